"""A small exporter that publishes local cgroups under cAdvisor's metric names.

Run as `python -m runner.platforms.local.exporter --registry FILE --port N`. FILE lists the containers
(namespace, pod, container, cgroup) and is re-read on every scrape, so the testbed can add and remove
containers while the exporter runs. With the same names and labels as cAdvisor, one set of PromQL serves
the local and the kubernetes platform. A container whose entry asks for `threads` also has each of its threads' CPU
published (`gateway_sizer_thread_cpu_seconds_total`, labelled with the thread's name: Envoy names its worker threads
wrk:worker_<n>), which cAdvisor has no name for: on a cluster that query finds nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from runner.files import write_atomic
from runner.platforms.local.cgroups import cgroup_from_spec

LABELS = ["namespace", "pod", "container"]
PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # the unit of a thread's utime and stime in /proc/<pid>/task/<tid>/stat


def thread_cpu_seconds(pids: list[int], proc: Path = PROC) -> dict[str, float]:
    """CPU time (user and system) of every thread of `pids` so far, by thread name (threads of one name summed)."""
    found: dict[str, float] = {}
    for pid in pids:
        for stat in (proc / str(pid) / "task").glob("*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                text = stat.read_text()
                name = text[text.index("(") + 1 : text.rindex(")")]
                fields = text[text.rindex(")") + 2 :].split()  # from the state, field 3: utime is 14, stime 15
                found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return found


def write_registry(path: Path, containers: list[dict[str, Any]]) -> None:
    """Replace the registry file atomically (the exporter may be reading it)."""
    write_atomic(path, json.dumps(containers, indent=1))


class CgroupCollector(Collector):
    """Yields cAdvisor-named metric families for every container in the registry file."""

    def __init__(self, registry_file: Path) -> None:
        self.registry_file = registry_file

    def _containers(self) -> list[dict[str, Any]]:
        try:
            return list(json.loads(self.registry_file.read_text()))
        except (FileNotFoundError, json.JSONDecodeError):
            return []

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        cpu = CounterMetricFamily("container_cpu_usage_seconds_total", "Cumulative cpu time consumed", labels=LABELS)
        periods = CounterMetricFamily("container_cpu_cfs_periods_total", "Elapsed enforcement periods", labels=LABELS)
        throttled = CounterMetricFamily(
            "container_cpu_cfs_throttled_periods_total", "Throttled period intervals", labels=LABELS
        )
        throttled_s = CounterMetricFamily(
            "container_cpu_cfs_throttled_seconds_total",
            "Total time duration the container has been throttled",
            labels=LABELS,
        )
        quota = GaugeMetricFamily("container_spec_cpu_quota", "CPU quota of the container", labels=LABELS)
        period = GaugeMetricFamily("container_spec_cpu_period", "CPU period of the container", labels=LABELS)
        memory = GaugeMetricFamily("container_memory_working_set_bytes", "Current working set", labels=LABELS)
        memory_limit = GaugeMetricFamily("container_spec_memory_limit_bytes", "Memory limit", labels=LABELS)
        threads = CounterMetricFamily(
            "gateway_sizer_thread_cpu_seconds_total", "CPU time of each thread, by name", labels=[*LABELS, "thread"]
        )
        for entry in self._containers():
            labels = [entry["namespace"], entry["pod"], entry["container"]]
            group = cgroup_from_spec(entry["cgroup"])
            try:
                cpu.add_metric(labels, group.cpu_usage_seconds())
                memory.add_metric(labels, group.memory_working_set_bytes())
                quota_us, period_us = group.cpu_quota()
                if quota_us > 0:  # like cAdvisor: no quota series for an unlimited container
                    quota.add_metric(labels, quota_us)
                    period.add_metric(labels, period_us)
                    nr_periods, nr_throttled, throttled_time = group.cpu_throttling()
                    periods.add_metric(labels, nr_periods)
                    throttled.add_metric(labels, nr_throttled)
                    throttled_s.add_metric(labels, throttled_time)
                limit = group.memory_limit_bytes()
                if limit:
                    memory_limit.add_metric(labels, limit)
                if entry.get("threads"):
                    for name, seconds in sorted(thread_cpu_seconds(group.pids()).items()):
                        threads.add_metric([*labels, name], seconds)
            except (FileNotFoundError, KeyError, ValueError):
                continue  # the container went away between reading the registry and its files
        yield from (cpu, periods, throttled, throttled_s, quota, period, memory, memory_limit, threads)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--address", default="127.0.0.1")
    args = parser.parse_args(argv)
    REGISTRY.register(CgroupCollector(args.registry))
    server, thread = start_http_server(args.port, addr=args.address)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    thread.join(timeout=2)


if __name__ == "__main__":
    main()
