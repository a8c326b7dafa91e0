"""The report of a real fleet sweep (tests/report/data/local-fleet: `make sweep ENVOY_CPUS=0.25 ENVOY_REPLICAS=1,2` on
the local platform, 5 rounds, 2026-11-27): its first screen names the pods, the knee per pod, the fleet's knee and
the scale-out efficiency with their intervals, each read from the run's own figures."""

from __future__ import annotations

from runner.fleet import scale_out, twin
from runner.report import formatting as fmt
from runner.report.fleet import build_fleet
from runner.report.markdown import render_markdown
from runner.report.model import build_report
from runner.report.scale_out import scale_out_of
from runner.report.series import build_series
from runner.results import load_summary
from support.processes import run_sizer
from support.report_data import DATA

RUN = DATA / "local-fleet"


def test_the_first_screen_names_the_pods_the_knee_per_pod_the_fleet_knee_and_the_efficiency():
    summary = load_summary(RUN)
    fleet = next(c for c in summary.configs if c.envoy.replicas == 2)
    single = twin(fleet, summary.configs, replicas=1)
    assert single is not None and fleet.valid_pod_knee is not None and fleet.valid_knee is not None
    efficiency = scale_out(fleet, single, summary.threshold)
    assert efficiency is not None and efficiency.rounds == 5
    report = build_report(summary)
    first_screen = render_markdown(report, []).split("\n## ", 1)[0]
    pod, knee = fleet.valid_pod_knee.knee, fleet.valid_knee
    for part in (
        "**Fleet:** 2 pods of 250m (1 worker thread each)",
        f"knee per pod {fmt.rps(pod.rps)} RPS (95% CI {fmt.interval(pod.low, pod.high)} RPS, 5 interleaved rounds)",
        f"fleet knee {fmt.rps(knee.rps)} RPS (95% CI {fmt.interval(knee.low, knee.high)} RPS, 5 interleaved rounds)",
        f"scale-out efficiency {fmt.times(efficiency.value)} (95% CI {fmt.interval(efficiency.low, efficiency.high)},"
        " paired over 5 rounds)",
    ):
        assert part in first_screen, (part, first_screen)


def test_the_knee_per_pod_of_two_pods_is_checked_against_one_pods_interval():
    summary = load_summary(RUN)
    section = build_fleet(summary)
    assert section is not None
    [row] = section.rows
    single = row.single_knee
    assert row.pod_knee is not None and single is not None and single.interval is not None
    inside = single.interval[0] <= row.pod_knee.rps <= single.interval[1]
    assert row.within_single is inside
    assert ("lies inside one pod's interval" in row.consistency) is inside
    # every window of the fleet saw both pods, read each against its own limit, and its utilization is the busiest
    for step in row.config.steps:
        assert [p.pod for p in step.pods] == ["envoy-local", "envoy-local-1"]
        assert step.cpu_utilization_mean == max(p.cpu_utilization_mean for p in step.pods)
        assert all(p.cpu_utilization_max <= 1.03 for p in step.pods)
        assert all(p.worker_threads == 1 for p in step.pods)


def test_recommend_sizes_pods_with_the_scale_out_and_imbalance_the_run_measured():
    summary = load_summary(RUN)
    fleet = next(c for c in summary.configs if c.envoy.replicas == 2)
    single = twin(fleet, summary.configs, replicas=1)
    assert single is not None and fleet.valid_pod_knee is not None
    estimate = scale_out(fleet, single, summary.threshold)
    assert estimate is not None
    measured = scale_out_of(summary, build_series(summary))  # type: ignore[arg-type]
    assert measured.measured and measured.replicas == 2
    assert (measured.efficiency, measured.interval) == (estimate.value, (estimate.low, estimate.high))
    assert measured.imbalance == fleet.valid_pod_knee.imbalance
    result = run_sizer("recommend", "--target-rps", "5000", "--run", str(RUN))
    assert result.returncode == 0, result.stderr
    assert f"scale-out:   {measured.text}" in result.stdout
    assert "measured at 2 pods against one" in result.stdout


FLEETS = DATA / "local-fleets"  # make sweep ENVOY_CPUS=0.25,0.5 ENVOY_REPLICAS=1,2, 5 rounds, 2026-11-27


def test_two_small_pods_against_one_pod_of_both_their_cores_is_paired_round_by_round():
    summary = load_summary(FLEETS)
    section = build_fleet(summary)
    assert section is not None
    [pair] = section.comparisons
    assert (pair.many.envoy.cpu_cores, pair.many.envoy.replicas) == (0.25, 2)
    assert (pair.one.envoy.cpu_cores, pair.one.envoy.replicas) == (0.5, 1)
    assert pair.ratio is not None and pair.ratio.rounds == 5
    ci = fmt.interval(pair.ratio.low, pair.ratio.high)
    text = (
        f"2 pods of 250m (1 worker thread each) serve {fmt.times(pair.ratio.value)} (95% CI {ci}, paired over 5 rounds)"
    )
    assert text in build_report(summary).headline.fleet


def test_pods_that_slowed_each_other_are_said_so_with_each_ones_cpu_per_request():
    summary = load_summary(FLEETS)
    section = build_fleet(summary)
    assert section is not None
    small = next(r for r in section.rows if r.config.envoy.cpu_cores == 0.25)
    assert small.pod_ratio is not None and small.pod_knee is not None and small.single_knee is not None
    # paired round by round the knee per pod of two 250m pods lies below one pod's alone (recorded: 0.80x, 0.64-0.99)
    assert small.pod_ratio.high < 1
    cost = summary.threshold * 0.25 * 1e6
    each, alone = fmt.microseconds(cost / small.pod_knee.rps), fmt.microseconds(cost / small.single_knee.rps)
    assert f"each pod of the fleet spent {each} of CPU per request, one pod alone {alone}" in small.consistency
    assert "the pods shared CPU 1 on this machine" in small.consistency
