"""A result records what its run decided with: the Accept-Encoding its clients sent (the profile's own, else the
scenario's) and the scrape interval its guards judged the windows with; the report renders those."""

from __future__ import annotations

from runner.plan import plan_sweep
from runner.report.model import build_report
from runner.results import RunStore, load_summary
from runner.scenario import parse_scenario
from runner.sweep import Sweep
from support.simulated import FakeClock, FakePlatform, SimulatedEnvoy


def test_each_result_records_its_clients_encoding_and_the_scrape_interval_it_was_judged_at(tmp_path):
    scenario = parse_scenario(
        {
            "name": "recorded",
            "envoy": {"cpu": [0.25]},
            "prometheus": {"scrape_interval_seconds": 2},
            "load": {"workers": 1, "rounds": 1, "step_seconds": 8, "accept_encoding": "gzip"},
            "profiles": ["plain", "identity"],
        }
    )
    platform = FakePlatform(FakeClock(), lambda c: SimulatedEnvoy(limit_cores=c.envoy_cpu_cores))
    store = RunStore.create(scenario, tmp_path)
    Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock).run()
    summary = load_summary(store.run_dir)
    sent = {c.profile.name: c.accept_encoding for c in summary.configs}
    assert sent == {"plain": "gzip", "identity": "identity"}
    assert {c.scrape_interval_s for c in summary.configs} == {2.0}
    # the report says what was recorded, with or without the run's scenario
    for resolved in (scenario, None):
        rows = {r.profile: r.compression for r in build_report(summary, resolved).rows}
        assert rows == {
            "plain": "clients ask for compression (Accept-Encoding: gzip)",
            "identity": "clients ask for no compression (identity)",
        }
    environment = build_report(summary, None).tables.environment.rows
    prometheus = next([c.text for c in r.cells] for r in environment if r.cells[0].text == "Prometheus")
    assert prometheus[-1].endswith("; 2 s scrape interval"), prometheus  # recorded: no scenario needed


def test_a_run_saved_before_results_recorded_them_falls_back_to_its_scenario(tmp_path):
    scenario = parse_scenario({"name": "old", "envoy": {"cpu": [0.25]}, "load": {"accept_encoding": "br"}})
    summary = load_summary_without_records(tmp_path, scenario)
    assert all(c.accept_encoding is None and c.scrape_interval_s is None for c in summary.configs)
    with_scenario = build_report(summary, scenario)
    assert {r.compression for r in with_scenario.rows} == {"clients ask for compression (Accept-Encoding: br)"}
    without = build_report(summary, None)
    assert {r.compression for r in without.rows} == {"compression not recorded (the run's scenario.yaml is missing)"}
    assert summary.configs[0].accept_encoding is None  # the fallback copies; the loaded summary stays as saved


def load_summary_without_records(tmp_path, scenario):
    """A simulated run whose results are saved as a version before these fields would have saved them."""
    platform = FakePlatform(FakeClock(), lambda c: SimulatedEnvoy(limit_cores=c.envoy_cpu_cores))
    store = RunStore.create(scenario, tmp_path)
    plan = plan_sweep(scenario)
    Sweep(scenario=scenario, plan=plan, platform=platform, store=store, clock=platform.clock).run()
    for config in store.summary.configs:
        config.accept_encoding = config.scrape_interval_s = None
    store.save()
    return load_summary(store.run_dir)
