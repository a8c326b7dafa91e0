"""Per-step analysis sentences and the run's conclusions: each from the numbers, none the data cannot back."""

from __future__ import annotations

from report_data import THREE_LIMITS_RUN, change_step, fixture_summary, make_step

from runner.model import Finding, Step
from runner.report.analysis import conclusions, step_analysis
from runner.report.sizing import KneePoint, fit_knees, knee_points
from runner.results import load_summary


def _step(mean: float, p95: float | None = 2.0, users: int = 10, fail_ratio: float = 0.0, failures: int = 0) -> Step:
    return make_step(
        users=users, rps=users * 100.0, cpu_utilization_mean=mean, p95_ms=p95, fail_ratio=fail_ratio, failures=failures
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


def _texts(summary, points=None) -> list[str]:
    points = knee_points(summary) if points is None else points
    return [c.text for c in conclusions(summary, fit_knees(points), points)]


def test_conclusions_of_the_real_run_carry_their_figures():
    summary = fixture_summary()
    found = conclusions(summary, fit_knees(knee_points(summary)), knee_points(summary))
    by_start = {c.text.split(" ")[0]: c for c in found}
    assert by_start["Every"].figure == "2 of 2 configurations saturated"
    assert "two knees cannot show whether the growth is linear" in by_start["Each"].text
    assert by_start["Each"].plot == "knee_vs_cores"
    assert "3.44x for 2.00x the cores" in by_start["Knee"].text
    assert by_start["Knee"].figure == "RPS per core: 3,495 at 150m, 6,014 at 300m; intercept -756 RPS"
    latency = "worst p95 below -> at/above the threshold: 150m: 4 ms -> 30 ms; 300m: 37 ms -> 56 ms"
    assert by_start["p95"].figure == latency
    assert by_start["p95"].text == (
        "p95 latency jumped past 90% CPU at 150m only; elsewhere it stayed within 2x: keep headroom below the knee."
    )
    assert by_start["No"].figure == "0 of 93,602 requests in 13 steps"
    assert by_start["Locust"].text == (
        "Locust and Envoy counted the same load within 0.2% at every step below the threshold."
    )
    assert by_start["The"].figure == "busiest Locust worker at 30% CPU"
    assert "8% of its 256Mi limit" in by_start["Memory"].figure


def test_linearity_is_claimed_only_with_three_or_more_knees_on_a_line():
    summary = fixture_summary()
    assert not any("decides throughput" in t for t in _texts(summary))
    mib = 2**20
    line = [KneePoint(f"{c}", c, 1000 * c, 20 * mib, 1000 * c) for c in (1, 2, 3)]
    linear = "Envoy's CPU limit decides throughput: each added core adds 1,000 RPS"
    assert any(t.startswith(linear) for t in _texts(summary, line))
    bent = [KneePoint(f"{c}", c, r, 20 * mib, r) for c, r in ((1, 1000), (2, 3000), (3, 3100), (4, 3000))]
    assert any("not proportional" in t for t in _texts(summary, bent))


def test_troubles_in_the_data_become_conclusions():
    summary = fixture_summary()
    step = summary.configs[1].steps[-1]
    change_step(summary, 1, -1, generator_cpu_max=0.97, failures=300, fail_ratio=300 / step.requests)
    first = summary.configs[1].steps[0]  # below the threshold, where the two counts are compared
    change_step(summary, 1, 0, envoy_rps=first.rps * 1.2)
    summary.configs[1].status = "invalid"
    summary.configs[1].reason = "add Locust workers: generator at 97% CPU"
    texts = _texts(summary)
    assert "1 configuration(s) have no valid knee and are left out of the sizing." in texts
    assert any(t.startswith("A Locust worker reached 97% CPU") and "add Locust workers" in t for t in texts)
    assert any(t.startswith("0.32% of requests failed") for t in texts), texts
    assert any(t.startswith("Locust's and Envoy's RPS differ by up to 20% in 1 step(s)") for t in texts), texts
    assert any(t.startswith("One knee: 3,495 RPS per core at 150m") for t in texts)


def test_counts_apart_by_chance_in_a_short_window_are_not_called_uncounted_requests():
    summary = fixture_summary()
    change_step(summary, 0, 0, rps=204.0, envoy_rps=186.0, window_s=3.0, cpu_utilization_mean=0.4)  # a CI run's
    texts = _texts(summary)
    assert "Locust and Envoy counted the same load within 8.8% (what chance allows in their short windows)" in (
        " ".join(texts)
    ), texts
    change_step(summary, 0, 0, window_s=15.0)  # the same gap over 15 s is more than chance
    assert any(t.startswith("Locust's and Envoy's RPS differ by up to 9% in 1 step(s)") for t in _texts(summary))


def test_a_fired_guard_is_named_in_the_step_analysis():
    finding = Finding(guard="generator", detail="Locust worker at 97% CPU", advice="add workers")
    step = _step(0.4).model_copy(update={"guards": (finding,)})
    assert step_analysis(step, [step], 0.9).endswith(
        "room for more requests. Guard generator: Locust worker at 97% CPU."
    )


def test_conclusions_of_a_real_three_limit_run():
    summary = load_summary(THREE_LIMITS_RUN)
    texts = _texts(summary)
    assert "Envoy's CPU limit decides throughput: each added core adds 7,404 RPS at the knee." in texts
    assert any(t.startswith("Knee RPS grows faster than the CPU limit (6.26x for 3.00x the cores)") for t in texts)
    assert any(t.startswith("p95 latency jumped past 90% CPU at 100m only") for t in texts)


def test_a_kubernetes_run_shows_each_node_and_the_cpu_manager_policy():
    from report_data import fixture_summary

    from runner.model import Isolation, Node
    from runner.report.model import _environment

    summary = fixture_summary()
    environment = summary.environment.model_copy(
        update={
            "isolation": Isolation(cpu_manager_policy="none", note="not pinned"),
            "nodes": (Node(name="n1", cpu="2", kernel="6.1", cpu_model=None),),
        }
    )
    rows = {
        row.name: row.description for row in _environment(summary.model_copy(update={"environment": environment}), None)
    }
    assert rows["Isolation"] == "kubelet CPU manager policy: none; not pinned"
    assert rows["Node n1"] == "CPU model not labelled (Node Feature Discovery), 2 CPUs, 6.1"
