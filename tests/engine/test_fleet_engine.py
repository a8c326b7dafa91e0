"""A sweep of fleets on the simulated platform: pods of one simulated Envoy each, the first taking more than its share
of the load, so the knee per pod, the fleet's knee, the imbalance and the scale-out efficiency are known in advance
and the sweep must find them, each inside its interval; the report's first screen names them."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import UsageError
from runner.fleet import bigger_pods, scale_out, twin
from runner.plan import Configuration, plan_sweep
from runner.report.fleet import build_fleet
from runner.report.markdown import render_markdown
from runner.report.model import build_report
from runner.report.series import require_series
from runner.results import RunStore, load_summary
from runner.scenario import parse_scenario
from runner.sweep import Sweep
from support.simulated import FakeClock, FakePlatform, SimulatedEnvoy

THRESHOLD = 0.9
IMBALANCE = 1.1  # the first of two pods takes 55% of the load
LOAD = {"step_seconds": 8, "warmup_seconds": 4, "settle_seconds": 2, "workers": 1, "seed": 1}


def _envoy(config: Configuration) -> SimulatedEnvoy:
    return SimulatedEnvoy(limit_cores=config.envoy_cpu_cores, seed=round(config.envoy_cpu_cores * 1000))


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    scenario = parse_scenario({"name": "fleet", "envoy": {"cpu": [0.25, 0.5], "replicas": [1, 2]}, "load": LOAD})
    platform = FakePlatform(FakeClock(), _envoy, imbalance=IMBALANCE)
    store = RunStore.create(scenario, tmp_path_factory.mktemp("fleet"))
    sweep = Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock)
    assert sweep.run() == "complete"
    return store.run_dir


def test_each_configuration_finds_the_knee_per_pod_and_the_fleet_knee_it_was_built_with(fleet_run: Path):
    summary = load_summary(fleet_run)
    measured = sorted((c.envoy.cpu_cores, c.envoy.replicas) for c in summary.configs)
    assert measured == [(0.25, 1), (0.25, 2), (0.5, 1), (0.5, 2)]
    for config in summary.configs:
        pods = config.envoy.replicas
        per_pod = SimulatedEnvoy(limit_cores=config.envoy.cpu_cores).true_knee(THRESHOLD)
        found, knee = config.valid_pod_knee, config.valid_knee
        assert found is not None and knee is not None, config.reason
        assert found.pods == pods and all(len(s.pods) == pods for s in config.steps)
        assert found.knee.interval is not None and knee.interval is not None
        assert found.knee.rps == pytest.approx(per_pod, rel=0.04)
        imbalance = IMBALANCE if pods > 1 else 1.0
        assert found.imbalance == pytest.approx(imbalance, rel=0.03)
        fleet = pods * per_pod / imbalance  # the busiest pod crosses when the fleet serves this
        assert knee.rps == pytest.approx(fleet, rel=0.04)
        if pods == 1:  # one pod: the knee per pod is the fleet's, exactly
            assert found.knee == knee
    for row in build_fleet(summary).rows:  # type: ignore[union-attr]
        # a pod of the fleet reaches the threshold where the same pod alone does: inside that knee's interval
        assert row.within_single, (row.pod_knee, row.single_knee)
        assert "inside one pod's interval" in row.consistency
        # every window reads its busiest pod: the first, against its own limit
        for step in config.steps:
            assert step.cpu_utilization_mean == max(p.cpu_utilization_mean for p in step.pods)


def test_the_scale_out_efficiency_and_more_pods_against_a_bigger_pod_come_paired_with_their_interval(fleet_run: Path):
    summary = load_summary(fleet_run)
    pair = next(c for c in summary.configs if c.envoy.replicas == 2 and c.envoy.cpu_cores == 0.25)
    single = twin(pair, summary.configs, replicas=1)
    assert single is not None and single.envoy.cpu_cores == 0.25
    efficiency = scale_out(pair, single, THRESHOLD)
    assert efficiency is not None and efficiency.rounds == 5
    assert efficiency.low <= 1 / IMBALANCE <= efficiency.high, efficiency  # the imbalance costs the fleet its share
    assert efficiency.high < 1.0  # and the interval says so
    [compared] = [p for p in bigger_pods(summary.configs, THRESHOLD) if p.many is pair]
    assert compared.one.envoy.cpu_cores == 0.5 and compared.one.envoy.replicas == 1
    small, large = SimulatedEnvoy(limit_cores=0.25), SimulatedEnvoy(limit_cores=0.5)
    truth = 2 * small.true_knee(THRESHOLD) / IMBALANCE / large.true_knee(THRESHOLD)
    assert compared.ratio is not None and compared.ratio.low <= truth <= compared.ratio.high, (compared.ratio, truth)


def test_the_report_names_the_pods_the_knee_per_pod_the_fleet_knee_and_the_efficiency_on_its_first_screen(
    fleet_run: Path,
):
    report = build_report(load_summary(fleet_run))
    fleet = report.headline.fleet
    parts = ["2 pods of 250m (1 worker thread each)", "knee per pod", "fleet knee", "imbalance 1.1"]
    parts += ["scale-out efficiency 0.9", "paired over 5 rounds", "serve 0.7"]
    for part in parts:
        assert part in fleet, (part, fleet)
    markdown = render_markdown(report, [])
    first_screen = markdown.split("\n## ", 1)[0]
    assert "**Fleet:** 2 pods of 250m" in first_screen, first_screen
    assert "## Fleet: knee per pod and scale-out" in markdown
    assert report.tables.fleet is not None and len(report.tables.fleet.rows) == 2


def test_a_run_of_fleets_only_sizes_nothing_and_says_to_sweep_one_pod_too(fleet_run: Path):
    summary = load_summary(fleet_run)
    summary.configs = [c for c in summary.configs if c.envoy.replicas == 2]
    report = build_report(summary)
    assert report.headline.series is None and "fleets of several Envoy pods only" in report.headline.lead
    assert report.no_sizing_reason is not None and "sizing reads one pod's knee" in report.no_sizing_reason
    with pytest.raises(UsageError) as refused:
        require_series(summary)
    assert "sweep one pod too, e.g. make sweep ENVOY_REPLICAS=1,2" in refused.value.one_line()
    fleet = build_fleet(summary)
    assert fleet is not None and all(row.single is None for row in fleet.rows)
    assert "not measured: the run has no configuration of the same pod alone" in report.headline.fleet
