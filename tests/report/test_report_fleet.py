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
