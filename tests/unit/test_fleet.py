"""The fleet's pure parts: a window's pods as windows of their own, the knee per pod (exactly the knee for one pod,
on the recorded runs), the guards judged per pod, the local fleet's names and scrape targets, and each thread's CPU
as the exporter reads it from /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.fleet import imbalance, pod_knee, pod_steps
from runner.guards import GuardContext, check_step
from runner.knee import find_knee
from runner.measure import pod_windows
from runner.metrics import PodReading, WindowStats
from runner.platforms.local.envoy_fleet import envoy_pod, is_envoy_pod, scrape_targets
from runner.platforms.local.exporter import CLOCK_TICKS, thread_cpu_seconds
from runner.pod_window import PodWindow
from runner.results import load_summary
from support.report_data import DATA
from support.steps import make_step

CONTEXT = GuardContext(threshold=0.90, workers=2)


def _pod(name: str, utilization: float, rps: float, **fields: object) -> PodWindow:
    values: dict[str, object] = {
        "pod": name,
        "cpu_cores": utilization * 0.25,
        "cpu_utilization_min": utilization - 0.02,
        "cpu_utilization_mean": utilization,
        "cpu_utilization_max": utilization + 0.02,
        "rps": rps,
        "envoy_rps": rps,
    }
    return PodWindow.model_validate(values | fields)


@pytest.mark.parametrize("run", sorted(p.name for p in DATA.iterdir() if (p / "summary.json").exists()))
def test_on_every_recorded_run_the_knee_per_pod_of_one_pod_is_the_knee_exactly(run: str):
    for config in load_summary(DATA / run).configs:
        if not config.steps or config.envoy.replicas > 1:
            continue
        if not any(s.pods for s in config.steps):  # windows saved before per-pod windows stand for their pod
            assert pod_steps(config.steps) == config.steps
        found, outcome = pod_knee(config.steps, 0.9)
        assert outcome.knee == find_knee(config.steps, 0.9).knee
        if found is not None:
            assert found.pods == 1 and found.knee == outcome.knee and found.imbalance in (1.0, None)


def test_each_pod_of_a_window_is_a_window_of_its_share_of_the_load():
    step = make_step(3, rps=1000, utilization=0.8, target_rps=1100, round=2)
    step = step.model_copy(update={"pods": (_pod("envoy-a", 0.8, 600), _pod("envoy-b", 0.55, 400))})
    a, b = pod_steps([step])
    assert (a.rps, a.target_rps, a.cpu_utilization_mean, a.round) == (600, pytest.approx(660), 0.8, 2)
    assert (b.rps, b.target_rps, b.cpu_utilization_mean, b.index) == (400, pytest.approx(440), 0.55, 3)
    assert imbalance([step], 0.9) == pytest.approx(600 / 500)


def test_cpu_limit_not_enforced_judges_each_pod_not_their_sum():
    # three pods at 35% each: 105% of one pod's limit summed, which fired the guard before windows were per pod
    pods = tuple(_pod(f"envoy-{i}", 0.35, 300) for i in range(3))
    step = make_step(0, rps=900, utilization=0.35, pods=pods, cpu_utilization_max=0.37, envoy_cpu_cores=0.2625)
    assert "cpu-limit-not-enforced" not in [f.guard for f in check_step(step, [], CONTEXT)]
    over = (*pods[:2], _pod("envoy-2", 1.0, 300, cpu_utilization_max=1.12))
    step = step.model_copy(update={"pods": over, "cpu_utilization_max": 1.12})
    [finding] = [f for f in check_step(step, [], CONTEXT) if f.guard == "cpu-limit-not-enforced"]
    assert finding.detail == "Envoy pod envoy-2 used 112% of its CPU limit"


def test_a_worker_thread_at_its_wall_says_so_while_its_pod_reads_under_the_threshold():
    # 4 worker threads under a 2-core limit: one at 97% of a core while the pod reads 40% (routercap's case)
    workers = {"worker_threads": 4, "hottest_worker_cores": 0.97, "mean_worker_cores": 0.25, "cpu_limit_cores": 2.0}
    hot = _pod("envoy-a", 0.40, 500, hottest_worker_share=0.97, **workers)
    step = make_step(0, rps=500, utilization=0.40, pods=(hot,))
    [finding] = [f for f in check_step(step, [], CONTEXT) if f.guard == "worker-at-wall"]
    assert "envoy-a at 97% of what one thread can use, 3.9x the mean worker" in finding.detail
    assert "more worker threads (envoy.concurrency) or more pods" in finding.advice
    even = hot.model_copy(update={"hottest_worker_share": 0.45, "hottest_worker_cores": 0.45})
    assert "worker-at-wall" not in [f.guard for f in check_step(step.model_copy(update={"pods": (even,)}), [], CONTEXT)]
    full = hot.model_copy(update={"cpu_utilization_mean": 0.95})  # the pod itself at its limit: the knee says it
    assert "worker-at-wall" not in [f.guard for f in check_step(step.model_copy(update={"pods": (full,)}), [], CONTEXT)]


def test_under_a_limit_of_one_core_or_less_a_thread_reading_over_its_pod_is_no_pod_full_early():
    # CI on 2026-11-27: 300m, Envoy's worker thread read 91% of the limit while the pod read 89%, and the guard
    # called the pod full before its limit, which a thread whose wall is the limit cannot make it
    readings = {"envoy-local": PodReading(cpu=WindowStats(mean=0.267, min=0.26, max=0.27), worker_cores=(0.273,))}
    [pod] = pod_windows(readings, limit_cores=0.3, rps=1500)
    assert pod.hottest_worker_share == pytest.approx(0.91) and pod.cpu_utilization_mean == pytest.approx(0.89)
    step = make_step(0, rps=1500, utilization=0.89, pods=(pod,))
    assert "worker-at-wall" not in [f.guard for f in check_step(step, [], CONTEXT)]
    # the same thread under a 1.5-core limit is at 27% of its core: no wall; at 0.95 of a core it is one
    [wide] = pod_windows(readings, limit_cores=1.5, rps=1500)
    assert wide.hottest_worker_share == pytest.approx(0.273) and wide.cpu_limit_cores == 1.5
    hot = {"envoy-local": PodReading(cpu=WindowStats(mean=1.0, min=0.95, max=1.05), worker_cores=(0.95,))}
    [full_thread] = pod_windows(hot, limit_cores=1.5, rps=1500)
    step = make_step(0, rps=1500, utilization=full_thread.cpu_utilization_mean, pods=(full_thread,))
    [finding] = [f for f in check_step(step, [], CONTEXT) if f.guard == "worker-at-wall"]
    assert "envoy-local at 95% of what one thread can use" in finding.detail and "the pod at 67%" in finding.detail


def test_the_local_fleets_pods_keep_the_one_pod_name_first_and_are_scraped_as_pods():
    assert [envoy_pod(i) for i in range(3)] == ["envoy-local", "envoy-local-1", "envoy-local-2"]
    assert all(is_envoy_pod(envoy_pod(i)) for i in range(3)) and not is_envoy_pod("nginx-0")
    [first, second] = scrape_targets({"envoy-local": 9901, "envoy-local-1": 34567})
    labels = {"namespace": "projectcontour", "pod": "envoy-local", "container": "envoy"}
    assert first == {"targets": ["127.0.0.1:9901"], "labels": labels}
    assert second["targets"] == ["127.0.0.1:34567"] and second["labels"]["pod"] == "envoy-local-1"  # type: ignore[index]


def test_each_threads_cpu_is_read_by_its_name_from_proc(tmp_path: Path):
    # /proc/<pid>/task/<tid>/stat as the kernel writes it: a name in parentheses (which may hold spaces and
    # parentheses), then from the state on utime (field 14) and stime (field 15) in clock ticks
    rest = "S 1 1 1 0 -1 4194560 100 0 0 0 {utime} {stime} 0 0 20 0 9 0 100 0 0"
    for tid, name, utime, stime in ((11, "envoy", 5, 1), (12, "wrk:worker_0", 300, 40), (13, "odd (name) x", 2, 2)):
        task = tmp_path / "10" / "task" / str(tid)
        task.mkdir(parents=True)
        (task / "stat").write_text(f"{tid} ({name}) " + rest.format(utime=utime, stime=stime))
    found = thread_cpu_seconds([10], proc=tmp_path)
    assert found == {"envoy": 6 / CLOCK_TICKS, "wrk:worker_0": 340 / CLOCK_TICKS, "odd (name) x": 4 / CLOCK_TICKS}
    assert thread_cpu_seconds([os.getpid()])  # and this process's own threads, read from the real /proc
