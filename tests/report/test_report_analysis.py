"""Per-step analysis sentences and the run's conclusions: each from the numbers, none the data cannot back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.guards import rps_mismatch_limit
from runner.model import Capacity, Finding, Knee, RunSummary, Step
from runner.report import read_scenario
from runner.report.model import build_report
from runner.report.rows import step_analysis
from runner.results import load_summary
from support.report_data import (
    DATA,
    GATEWAY_API_RUN,
    THREE_LIMITS_RUN,
    change_step,
    change_step_judged,
    fixture_summary,
)
from support.steps import make_step

PROFILES_RUN = DATA / "local-profiles"


def _step(mean: float, p95: float | None = 2.0, users: int = 10, fail_ratio: float = 0.0, failures: int = 0) -> Step:
    return make_step(
        users=users, rps=users * 100.0, utilization=mean, p95_ms=p95, fail_ratio=fail_ratio, failures=failures
    )


def test_step_sentences_follow_utilization_like_the_reference_report():
    light = _step(0.58, users=4)
    steps = [light]
    assert step_analysis(light, steps, 0.9).startswith("Resources not fully used (42% of the CPU limit idle)")
    assert step_analysis(_step(0.80), steps, 0.9).startswith("Approaching full load (20% idle)")
    assert step_analysis(_step(0.90), steps, 0.9).startswith("At the limit: CPU at 90%, past the 90% threshold")
    assert step_analysis(_step(0.749), steps, 0.9).startswith("Resources not fully used")


def test_latency_and_failures_are_named_only_when_they_matter():
    steps = [_step(0.5, p95=2.0, users=4)]
    assert "15x the lightest step's (30 ms vs 2 ms)" in step_analysis(_step(0.95, p95=30.0), steps, 0.9)
    assert "latency" not in step_analysis(_step(0.95, p95=6.0), steps, 0.9)  # 3x but only 4 ms more
    assert "2.0% of requests failed" in step_analysis(_step(0.5, fail_ratio=0.02, failures=20), steps, 0.9)
    assert "3 failed request(s)" in step_analysis(_step(0.5, fail_ratio=0.001, failures=3), steps, 0.9)


def _texts(summary: RunSummary) -> list[str]:
    return [c.text for c in build_report(summary).conclusions]


def test_conclusions_of_the_real_run_carry_their_figures():
    found = build_report(fixture_summary()).conclusions
    by_start = {c.text.split(" ")[0]: c for c in found}
    assert by_start["Every"].figure == "2 of 2 configurations saturated"
    two = by_start["Two"]  # two limits of one pass: how the knee per core moved, and what a third would settle
    assert two.text.startswith("Two CPU limits (knee per core against 150m: 300m 1.72x, one pass: no interval)")
    assert "a third limit (600m: make sweep ENVOY_CPUS=0.15,0.3,0.6) would fit the growth" in two.text
    assert two.plot == "knee_per_core"
    latency = "worst p95 below -> at/above the threshold: 150m: 4 ms -> 30 ms; 300m: 37 ms -> 56 ms"
    assert by_start["p95"].figure == latency
    assert by_start["p95"].text == (
        "p95 latency jumped past 90% CPU at 150m only; elsewhere it stayed within 2x: keep headroom below the knee."
    )
    assert by_start["No"].figure == "0 of 93,602 requests in 13 steps"
    assert by_start["Locust"].text == (
        "Locust and Envoy counted the same load within 0.2% at every step below the threshold."
    )
    assert any(c.text.startswith("The knees at 150m, 300m have no confidence interval") for c in found)
    assert by_start["The"].figure == "busiest Locust worker at 30% CPU"
    assert "8% of its 256Mi limit" in by_start["Memory"].figure


def test_no_conclusion_leads_with_a_slope_or_a_line():
    for run in (fixture_summary(), load_summary(THREE_LIMITS_RUN)):
        text = " ".join(f"{c.text} {c.figure}" for c in build_report(run).conclusions)
        assert "added core adds" not in text and "intercept" not in text and "x cores" not in text


def test_troubles_in_the_data_become_conclusions():
    summary = fixture_summary()
    step = summary.configs[1].steps[-1]
    change_step(summary, 1, -1, generator_cpu_max=0.97, failures=300, fail_ratio=300 / step.requests)
    first = summary.configs[1].steps[0]  # below the threshold, where the two counts are compared
    change_step_judged(summary, 1, 0, envoy_rps=first.rps * 1.2)
    summary.configs[1].status = "invalid"
    summary.configs[1].reason = "add Locust workers: generator at 97% CPU"
    report = build_report(summary)
    texts = [c.text for c in report.conclusions]
    assert "1 configuration(s) have no valid knee and are left out of the sizing." in texts
    assert any(t.startswith("A Locust worker reached 97% CPU") and "add Locust workers" in t for t in texts)
    assert any(t.startswith("0.32% of requests failed") for t in texts), texts
    assert any(t.startswith("Locust's and Envoy's RPS differ by up to 20% in 1 step(s)") for t in texts), texts
    assert report.headline.scaling.startswith("One CPU limit (150m): how the knee per core changes with the limit")


def test_counts_apart_by_chance_in_a_short_window_are_not_called_uncounted_requests():
    summary = fixture_summary()
    change_step_judged(summary, 0, 0, rps=204.0, envoy_rps=186.0, window_s=3.0, cpu_utilization_mean=0.4)  # a CI run's
    texts = _texts(summary)
    assert "Locust and Envoy counted the same load within 8.8% (what chance allows in their short windows)" in (
        " ".join(texts)
    ), texts
    change_step_judged(summary, 0, 0, window_s=15.0)  # the same gap over 15 s is more than chance
    assert any(t.startswith("Locust's and Envoy's RPS differ by up to 9% in 1 step(s)") for t in _texts(summary))


def test_a_gateway_api_run_scraped_every_2_s_is_judged_as_its_guard_judged_it():
    # a real Gateway API run (2 s scrapes): its 300m configuration's first window made 5.7% apart, between what
    # chance allows at 1 s scrapes (5.1%) and at the run's 2 s (6.3%); the run's guard did not fire, and the report
    # must not say requests went uncounted (it judged again at 1 s before the results recorded the interval)
    summary, scenario = load_summary(GATEWAY_API_RUN), read_scenario(GATEWAY_API_RUN)
    assert scenario is not None and scenario.prometheus.scrape_interval_s == 2.0
    first = summary.configs[1].steps[0]
    assert first.window_s == 6.0 and first.cpu_utilization_mean < summary.threshold
    step = change_step_judged(summary, 1, 0, scrape_interval_s=2.0, envoy_rps=first.rps * (1 - 0.057))
    assert not step.guards  # the run's guard, at its 2 s scrape interval
    assert rps_mismatch_limit(step, 1.0) < 0.057 < rps_mismatch_limit(step, 2.0)
    texts = [c.text for c in build_report(summary, scenario).conclusions]
    assert "Locust and Envoy counted the same load within 5.7% (what chance allows in their short windows)" in (
        " ".join(texts)
    ), texts
    assert not any(t.startswith("Locust's and Envoy's RPS differ") for t in texts), texts
    # the same gap over a window the guard flags is reported as the run recorded it
    change_step_judged(summary, 1, 0, scrape_interval_s=2.0, window_s=30.0)
    texts = [c.text for c in build_report(summary, scenario).conclusions]
    assert any(t.startswith("Locust's and Envoy's RPS differ by up to 6% in 1 step(s)") for t in texts), texts


def test_a_fired_guard_is_named_in_the_step_analysis():
    finding = Finding(guard="generator", detail="Locust worker at 97% CPU", advice="add workers")
    step = _step(0.4).model_copy(update={"guards": (finding,)})
    assert step_analysis(step, [step], 0.9).endswith(
        "room for more requests. Guard generator: Locust worker at 97% CPU."
    )


def test_three_limits_of_one_pass_say_the_growth_needs_rounds():
    texts = _texts(load_summary(THREE_LIMITS_RUN))
    growth = next(t for t in texts if t.startswith("3 CPU limits in one pass"))
    # knee per core: 282 / 0.1 = 2,816; 970 / 0.2 = 4,849; 1,762 / 0.3 = 5,875; over 2,816: 1.72x, 2.09x
    assert "200m 1.72x, one pass: no interval; 300m 2.09x, one pass: no interval" in growth
    assert "the growth's exponent needs interleaved rounds for an interval" in growth
    assert any(t.startswith("p95 latency jumped past 90% CPU at 100m only") for t in texts)


def test_capacity_below_the_knee_says_latency_broke_first_and_sizes_from_the_capacity():
    summary = fixture_summary()
    knee = summary.configs[1].knee
    assert knee is not None
    # issue 20's 500m run: knee 6,235, capacity 4,105; here the 300m knee with a capacity 34% below it
    summary.configs[1].capacity = Capacity(rps=knee.rps * 0.658, broken_at=knee.rps * 0.7, broken_by="p99 300 ms")
    summary.configs[0].capacity = Capacity(rps=summary.configs[0].knee.rps * 1.12)  # type: ignore[union-attr]
    report = build_report(summary)
    texts = " ".join(c.text for c in report.conclusions)
    assert (
        "At 300m latency broke before Envoy's CPU reached 90%: its capacity lies below the knee, so size from "
        "the capacity there, not from the knee." in texts
    )
    assert "Envoy served 12%-12% more than the knee before it broke" in texts  # 150m only, not -34%
    assert "-34%--34%" not in texts and "real headroom" not in texts
    basis = report.headline.series.largest  # type: ignore[union-attr]
    assert basis.source == "capacity" and basis.rps == pytest.approx(knee.rps * 0.658)
    assert report.headline.lead.startswith(f"{knee.rps * 0.658 / 0.3:,.0f} RPS per core at the capacity of Envoy 300m")


def test_the_recorded_profiles_run_names_its_throttled_windows_against_the_steady_cost_curve():
    raw = json.loads((PROFILES_RUN / "summary.json").read_text())
    plain = raw["configs"][0]
    knee, steps = plain["knee"], plain["steps"]
    throttled = [s for s in steps if s["throttled_share"] is not None and s["throttled_share"] >= 0.15]
    first = min(throttled, key=lambda s: s["target_rps"])
    cost = first["envoy_cpu_cores"] / first["envoy_rps"] * 1e6
    curve = 0.9 * (first["rps"] / knee["rps"]) ** knee["exponent"] * 0.5 / first["rps"] * 1e6  # the knee's power law
    report = build_report(load_summary(PROFILES_RUN), read_scenario(PROFILES_RUN))
    text = next(
        c.text for c in report.conclusions if c.text.startswith("Envoy 500m CPU / 256Mi, nginx x1, poisson arrivals:")
    )
    assert f"{len(throttled)} of {len(steps)} windows ran throttled" in text
    assert f"the lowest, at {first['target_rps']:,.0f} RPS offered, had p99 {first['p99_ms']:,.0f} ms" in text
    assert cost / curve - 1 >= 0.05  # 8% above the curve, at p99 68 ms against 3-15 ms: the two regimes
    assert f"{cost:,.0f} \u00b5s of CPU per request: {cost / curve - 1:.0%} above the knee's cost curve" in text
    assert text.endswith(
        "throttled, a request costs more CPU and much more latency; such windows mark where Envoy "
        "breaks, not what a request costs."
    )
    section = next(s for s in report.sections if s.row.config.key == plain["key"])
    regimes = [row.cells[7].text for row in section.steps.rows]  # the Regime column
    assert f"throttled {first['throttled_share']:.0%}" in regimes and "steady" in regimes


def test_an_old_run_has_no_regime_and_no_regime_conclusion():
    report = build_report(fixture_summary())
    assert all(s.row.regimes is None for s in report.sections)
    assert {row.cells[7].text for s in report.sections for row in s.steps.rows} == {"-"}


def test_a_kubernetes_run_shows_each_node_and_the_cpu_manager_policy():
    from runner.model import Isolation, Node

    summary = fixture_summary()
    environment = summary.environment.model_copy(
        update={
            "isolation": Isolation(cpu_manager_policy="none", note="not pinned"),
            "nodes": (Node(name="n1", cpu="2", kernel="6.1", cpu_model=None),),
        }
    )
    table = build_report(summary.model_copy(update={"environment": environment})).tables.environment
    rows = {row.cells[0].text: row.cells[-1].text for row in table.rows}
    assert rows["Isolation"] == "kubelet CPU manager policy: none; not pinned"
    assert rows["Node n1"] == "CPU model not labelled (Node Feature Discovery), 2 CPUs, 6.1"


def test_a_knee_without_an_interval_says_where_it_comes_from(tmp_path: Path):
    summary = fixture_summary()
    summary.configs[0].knee = Knee(rps=524.0, low=500.0, high=550.0, method="power-fit", windows=6)
    found = build_report(summary).conclusions
    trust = next(c for c in found if c.text.startswith("The knee at 300m"))
    assert "150m: 524 RPS, 95% CI 500-550 RPS, one pass (power fit over 6 windows)" in trust.figure
