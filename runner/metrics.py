"""Prometheus: the named PromQL the sweep uses, and a client that evaluates it over a window.

The same queries serve both platforms: cAdvisor's container metrics (published locally under the same
names by the exporter) and Envoy's own `envoy_http_downstream_rq_total`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from runner.errors import UnreachableError

# {sel} is a label matcher list (see Selector), {range} a PromQL duration.
# CPU is read as the counter's raw samples (with their own timestamps) and turned into rates here:
# cAdvisor stamps a kubelet's samples irregularly, every 1-15 s, and rate()'s extrapolation to the
# window's edges misjudged a saturated 8 s window by a quarter on the one-machine cluster.
CPU_SAMPLES = "container_cpu_usage_seconds_total{{{sel}}}[{range}]"
MEMORY_WORKING_SET = "max(max_over_time(container_memory_working_set_bytes{{{sel}}}[{range}]))"
ENVOY_RPS = 'sum(rate(envoy_http_downstream_rq_total{{{sel},envoy_http_conn_manager_prefix="ingress_http"}}[{range}]))'
# Sub-window over which min and max utilization are taken (the reference report's "58%-70%" range).
MIN_SUBWINDOW_S = 5.0
# A window's CPU figures need this many samples of the container's counter. cAdvisor in a kubelet
# refreshes them every 10-15 s by default, so on a cluster a window may have to grow to hold them.
MIN_CPU_SAMPLES = 3
QUERY_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Selector:
    """Which containers a query is about, as Prometheus labels (namespace, pod regex, container)."""

    namespace: str
    pod_regex: str
    container: str | None = None

    def matchers(self, *, with_container: bool = True) -> str:
        parts = [f'namespace="{self.namespace}"', f'pod=~"{self.pod_regex}"']
        if with_container and self.container:
            parts.append(f'container="{self.container}"')
        return ",".join(parts)


@dataclass(frozen=True)
class Selectors:
    """The containers a sweep watches."""

    envoy: Selector
    backend: Selector
    generator: Selector


@dataclass(frozen=True)
class WindowStats:
    """Gauge-like statistics of a series over a window."""

    mean: float
    min: float
    max: float


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


class Metrics:
    """Evaluates the sweep's PromQL against one Prometheus over [start, end] windows."""

    def __init__(self, url: str, session: requests.Session | None = None, scrape_interval_s: float = 1.0) -> None:
        self.url = url.rstrip("/")
        self.scrape_interval_s = scrape_interval_s
        self._prom = PrometheusConnect(url=self.url, disable_ssl=False)
        if session is not None:
            self._prom._session = session  # the API server's service proxy needs the cluster's credentials

    def _query(self, query: str, at: float) -> list[dict]:
        try:
            return list(self._prom.custom_query(query, params={"time": f"{at:.3f}", "timeout": "10s"}))
        except (requests.RequestException, PrometheusApiClientException) as error:
            raise UnreachableError(
                f"Prometheus at {self.url} failed: {str(error).splitlines()[0][:160]}",
                "check the prometheus URL in the scenario (prometheus.url) and that it is running",
            ) from None

    def _scalar(self, query: str, at: float) -> float:
        result = self._query(query, at)
        return float(result[0]["value"][1]) if result else math.nan

    def check(self) -> None:
        """Raise UnreachableError unless Prometheus answers a trivial query."""
        self._query("vector(1)", at=_now())

    def has_series(self, metric_selector: str, at: float) -> bool:
        return bool(self._query(f"count({metric_selector})", at))

    def _counter_samples(self, query: str, end: float) -> dict[str, list[tuple[float, float]]]:
        """Raw samples of a range-vector query, per pod."""
        found: dict[str, list[tuple[float, float]]] = {}
        for series in self._query(query, end):
            pod = series["metric"].get("pod", "?")
            found.setdefault(pod, []).extend((float(t), float(v)) for t, v in series.get("values", []))
        return found

    def _cpu_samples(self, selector: Selector, start: float, end: float) -> dict[str, list[tuple[float, float]]]:
        return self._counter_samples(CPU_SAMPLES.format(sel=selector.matchers(), range=_duration(end - start)), end)

    def cpu_samples(self, selector: Selector, start: float, end: float) -> int:
        """Samples of the selected containers' CPU counter inside [start, end] (the best-covered pod)."""
        return max((len(points) for points in self._cpu_samples(selector, start, end).values()), default=0)

    def cpu_cores(self, selector: Selector, start: float, end: float, spacing_s: float = 0.0) -> WindowStats:
        """Cores used by the selected containers: mean from the window's first to its last sample, min and
        max over spans of at least two scrape intervals (or sample spacings), summed over pods."""
        sub = max(MIN_SUBWINDOW_S, 2 * max(self.scrape_interval_s, spacing_s))
        windows = (counter_window(points, sub) for points in self._cpu_samples(selector, start, end).values())
        stats = [s for s in windows if s is not None]
        if not stats:
            return WindowStats(math.nan, math.nan, math.nan)
        return WindowStats(sum(s.mean for s in stats), sum(s.min for s in stats), sum(s.max for s in stats))

    def cpu_cores_by_pod(self, selector: Selector, start: float, end: float) -> dict[str, float]:
        """Mean cores per pod over the window."""
        found = {
            pod: counter_window(points, MIN_SUBWINDOW_S)
            for pod, points in self._cpu_samples(selector, start, end).items()
        }
        return {pod: stats.mean for pod, stats in found.items() if stats is not None}

    def envoy_rps(self, selector: Selector, start: float, end: float) -> float:
        """Requests per second Envoy's HTTP listener accepted over the window."""
        query = ENVOY_RPS.format(sel=selector.matchers(with_container=False), range=_duration(end - start))
        return self._scalar(query, end)

    def memory_working_set_bytes(self, selector: Selector, start: float, end: float) -> float:
        return self._scalar(MEMORY_WORKING_SET.format(sel=selector.matchers(), range=_duration(end - start)), end)


def counter_window(samples: list[tuple[float, float]], sub_s: float) -> WindowStats | None:
    """A counter's rate over its samples: the mean from the first to the last, min and max over the
    spans of at least `sub_s` seconds that start at each sample. Samples before a reset are dropped."""
    points = sorted(samples)
    for index in range(len(points) - 1, 0, -1):
        if points[index][1] < points[index - 1][1]:  # the container restarted: keep what follows
            points = points[index:]
            break
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    mean = (points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0])
    rates, later = [], 0
    for time_i, value_i in points:
        while later < len(points) and points[later][0] - time_i < sub_s:
            later += 1
        if later == len(points):
            break
        time_j, value_j = points[later]
        rates.append((value_j - value_i) / (time_j - time_i))
    return WindowStats(mean, min([mean, *rates]), max([mean, *rates]))


def _now() -> float:
    return time.time()
