"""Prometheus: the named PromQL the sweep uses, and a client that evaluates it over a window.

The same queries serve both platforms: cAdvisor's container metrics (published locally under the same
names by the exporter) and Envoy's own `envoy_http_downstream_rq_total`. The client speaks Prometheus'
HTTP API (`/api/v1/query`) directly, with a timeout and bounded retries on every call (runner.http).

Per pod (Metrics.envoy_pods): every figure is grouped by the `pod` label and nothing else, so a platform gets per-pod
windows once its Prometheus labels both Envoy's container series and its admin stats with the pod's name (the local
test bed by its file of scrape targets, the one-machine cluster by relabelling `__meta_kubernetes_pod_name`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import requests

from runner.errors import UnreachableError
from runner.http import RETRY_BUDGET_S, RetryingClient, split_credentials, timeout

# {sel} is a label matcher list (see Selector), {range} a PromQL duration.
# CPU is read as the counter's raw samples (with their own timestamps) and turned into rates here:
# cAdvisor stamps a kubelet's samples irregularly, every 1-15 s, and rate()'s extrapolation to the
# window's edges misjudged a saturated 8 s window by a quarter on the one-machine cluster.
CPU_SAMPLES = "container_cpu_usage_seconds_total{{{sel}}}[{range}]"
CFS_PERIODS = "container_cpu_cfs_periods_total{{{sel}}}[{range}]"
CFS_THROTTLED_PERIODS = "container_cpu_cfs_throttled_periods_total{{{sel}}}[{range}]"
MEMORY_WORKING_SET = "max(max_over_time(container_memory_working_set_bytes{{{sel}}}[{range}]))"
# Envoy's HTTP listeners as Contour names them: ingress_http, and ingress_https for TLS virtual hosts; for a
# Gateway API Gateway, one per listener of the Gateway, http-<port> and https-<port>.
ENVOY_LISTENERS = 'envoy_http_conn_manager_prefix=~"ingress_https?|https?-[0-9]+"'
ENVOY_REQUESTS = "envoy_http_downstream_rq_total{{{sel}," + ENVOY_LISTENERS + "}}[{range}]"
ENVOY_CONNECTIONS = "envoy_http_downstream_cx_total{{{sel}," + ENVOY_LISTENERS + "}}[{range}]"
# The memory model: gauges averaged over a window (the busiest pod's). Envoy refreshes its server.memory_*
# gauges on its stats flush, every 5 s. Active connections: summed over the listeners, then the busiest pod.
MEMORY_WORKING_SET_MEAN = "max(avg_over_time(container_memory_working_set_bytes{{{sel}}}[{range}]))"
ENVOY_HEAP = "max(avg_over_time(envoy_server_memory_heap_size{{{sel}}}[{range}]))"
ENVOY_ALLOCATED = "max(avg_over_time(envoy_server_memory_allocated{{{sel}}}[{range}]))"
ENVOY_ACTIVE_BY_POD = (
    "sum by (pod) (avg_over_time(envoy_http_downstream_cx_active{{{sel}," + ENVOY_LISTENERS + "}}[{range}]))"
)
ENVOY_ACTIVE_CONNECTIONS = f"max({ENVOY_ACTIVE_BY_POD})"
# Each of Envoy's worker threads' CPU counter (Envoy names them wrk:worker_<n>), where the platform publishes threads
# (the local exporter does; cAdvisor does not, so on a cluster the query finds nothing).
WORKER_THREAD_CPU = 'gateway_sizer_thread_cpu_seconds_total{{{sel},thread=~"wrk:.*"}}[{range}]'
# Sub-window over which min and max utilization are taken (the reference report's "58%-70%" range).
MIN_SUBWINDOW_S = 5.0
# A window's CPU figures need this many samples of the container's counter. cAdvisor in a kubelet
# refreshes them every 10-15 s by default, so on a cluster a window may have to grow to hold them.
MIN_CPU_SAMPLES = 3
# the API server's proxy found no such Service: the cluster's Prometheus has another name
NO_SERVICE_HINT = (
    "name the cluster's Prometheus Service in prometheus.service (kube-prometheus-stack's is "
    "<release>-kube-prometheus-prometheus in its namespace: scenarios/kube-prometheus-stack.yaml)"
)
QUERY_TIMEOUT_S = 10.0

Samples = list[tuple[float, float]]


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
    control_plane: Selector | None = None  # Contour, where the platform has one


@dataclass(frozen=True)
class WindowStats:
    """Gauge-like statistics of a series over a window."""

    mean: float
    min: float
    max: float


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


RECENT_ANSWERS = 24  # a window's queries, reused within the window (see Metrics._query)


@dataclass(frozen=True)
class PodReading:
    """One pod's figures over a window: its CPU (cores: mean, min and max over sub-windows), the share of its CFS
    periods throttled (None: not published), the rates of Envoy's own request and connection counters (NaN: not
    scraped), its active connections, and each of its worker threads' cores (empty: threads not published)."""

    cpu: WindowStats
    throttled_share: float | None = None
    envoy_rps: float = math.nan
    envoy_cx_rate: float = math.nan
    active_connections: float = math.nan
    worker_cores: tuple[float, ...] = ()


class Metrics:
    """Evaluates the sweep's PromQL against one Prometheus over [start, end] windows."""

    def __init__(
        self,
        url: str,
        session: requests.Session | RetryingClient | None = None,
        scrape_interval_s: float = 1.0,
        retry_s: float = RETRY_BUDGET_S,
    ) -> None:
        # credentials in the URL (http://user:password@host) go to the session, never into a message
        bare, credentials = split_credentials(url.rstrip("/"))
        self.url = bare
        self.scrape_interval_s = scrape_interval_s
        # the API server's proxy needs the cluster's credentials: the caller's client carries them (and its budget)
        self._client = session if isinstance(session, RetryingClient) else RetryingClient(session, budget_s=retry_s)
        self._recent: dict[tuple[str, float], list[dict[str, Any]]] = {}
        if credentials is not None:
            self._client.session.auth = credentials

    def _query(self, query: str, at: float) -> list[dict[str, Any]]:
        """The query's result at `at`; a window asks some queries twice (CPU samples, then CPU cores), and
        the same query at the same past time has the same answer, so recent answers are reused."""
        key = (query, round(at, 3))
        if key in self._recent:
            return self._recent[key]
        result = self._fetch(query, at)
        self._recent[key] = result
        while len(self._recent) > RECENT_ANSWERS:
            del self._recent[next(iter(self._recent))]
        return result

    def _fetch(self, query: str, at: float) -> list[dict[str, Any]]:
        params = {"query": query, "time": f"{at:.3f}", "timeout": f"{QUERY_TIMEOUT_S:g}s"}
        try:
            response = self._client.get(f"{self.url}/api/v1/query", params=params, timeout=timeout(QUERY_TIMEOUT_S))
        except requests.RequestException as error:
            raise UnreachableError(
                f"Prometheus at {self.url} failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}",
                "check the prometheus URL in the scenario (prometheus.url) and that it is running",
            ) from None
        try:
            body = response.json() if response.content else {}
        except ValueError:  # a proxy's error page, not Prometheus's JSON: the status says what happened
            body = {"error": response.text.strip()[:80] or None}
        if response.status_code != 200 or body.get("status") != "success":
            no_service = response.status_code == 404 and "/services/" in self.url and "/proxy" in self.url
            raise UnreachableError(
                f"Prometheus at {self.url} answered HTTP {response.status_code}: "
                f"{str(body.get('error') or response.reason)[:160]}",
                NO_SERVICE_HINT
                if no_service
                else "check the prometheus URL in the scenario (prometheus.url) and that it is healthy",
            )
        return list(body.get("data", {}).get("result", []))

    def _scalar(self, query: str, at: float) -> float:
        result = self._query(query, at)
        return float(result[0]["value"][1]) if result else math.nan

    def check(self) -> None:
        """Raise UnreachableError unless Prometheus answers a trivial query."""
        self._query("vector(1)", at=time.time())

    def instant(self, query: str, at: float | None = None) -> list[dict[str, Any]]:
        """The series of an instant query at `at` (default: now), as Prometheus gives them (`metric`, `value`)."""
        return self._fetch(query, time.time() if at is None else at)

    def _counter_samples(self, template: str, selector: Selector, start: float, end: float) -> dict[str, Samples]:
        """Raw samples of a counter inside [start, end], per pod."""
        query = template.format(sel=selector.matchers(), range=_duration(end - start))
        found: dict[str, Samples] = {}
        for series in self._query(query, end):
            pod = series["metric"].get("pod", "?")
            found.setdefault(pod, []).extend((float(t), float(v)) for t, v in series.get("values", []))
        return found

    def cpu_samples(self, selector: Selector, start: float, end: float) -> int:
        """Samples of the selected containers' CPU counter inside [start, end] (the best-covered pod)."""
        samples = self._counter_samples(CPU_SAMPLES, selector, start, end)
        return max((len(points) for points in samples.values()), default=0)

    def cpu_cores(self, selector: Selector, start: float, end: float, spacing_s: float = 0.0) -> WindowStats:
        """Cores used by the selected containers: mean from the window's first to its last sample, min and
        max over spans of at least two scrape intervals (or sample spacings), summed over pods."""
        stats = list(self._cpu_by_pod(selector, start, end, spacing_s).values())
        if not stats:
            return WindowStats(math.nan, math.nan, math.nan)
        return WindowStats(sum(s.mean for s in stats), sum(s.min for s in stats), sum(s.max for s in stats))

    def _cpu_by_pod(self, selector: Selector, start: float, end: float, spacing_s: float) -> dict[str, WindowStats]:
        sub = max(MIN_SUBWINDOW_S, 2 * max(self.scrape_interval_s, spacing_s))
        samples = self._counter_samples(CPU_SAMPLES, selector, start, end)
        found = {pod: counter_window(points, sub) for pod, points in samples.items()}
        return {pod: stats for pod, stats in found.items() if stats is not None}

    def envoy_pods(self, selector: Selector, start: float, end: float, spacing_s: float = 0.0) -> dict[str, PodReading]:
        """Each Envoy pod's figures over the window (runner.measure divides them by the pod's limit): the pods
        whose CPU counter the window holds, each with its own throttling, Envoy counters and worker threads."""
        periods = self._increase_by_pod(CFS_PERIODS, selector, start, end)
        throttled = self._increase_by_pod(CFS_THROTTLED_PERIODS, selector, start, end)
        requests = self._rates_by_pod(ENVOY_REQUESTS, selector, start, end)
        connections = self._rates_by_pod(ENVOY_CONNECTIONS, selector, start, end)
        query = ENVOY_ACTIVE_BY_POD.format(sel=selector.matchers(with_container=False), range=_duration(end - start))
        active = {s["metric"].get("pod", "?"): float(s["value"][1]) for s in self._query(query, end)}
        workers = self._rates_by_pod(WORKER_THREAD_CPU, selector, start, end, with_container=True)
        return {
            pod: PodReading(
                cpu=cpu,
                throttled_share=throttled.get(pod, 0.0) / periods[pod] if periods.get(pod, 0.0) > 0 else None,
                envoy_rps=sum(requests[pod]) if pod in requests else math.nan,
                envoy_cx_rate=sum(connections[pod]) if pod in connections else math.nan,
                active_connections=active.get(pod, math.nan),
                worker_cores=tuple(workers.get(pod, ())),
            )
            for pod, cpu in self._cpu_by_pod(selector, start, end, spacing_s).items()
        }

    def _increase_by_pod(self, template: str, selector: Selector, start: float, end: float) -> dict[str, float]:
        return {pod: _increase(points) for pod, points in self._counter_samples(template, selector, start, end).items()}

    def _rates_by_pod(
        self, template: str, selector: Selector, start: float, end: float, *, with_container: bool = False
    ) -> dict[str, list[float]]:
        """The rate of each series of a counter over the window, grouped by pod (a pod's listeners, or threads)."""
        found: dict[str, list[float]] = {}
        for pod, rate in self._series_rates(template, selector, start, end, with_container=with_container):
            found.setdefault(pod, []).append(rate)
        return found

    def _series_rates(
        self, template: str, selector: Selector, start: float, end: float, *, with_container: bool = False
    ) -> list[tuple[str, float]]:
        """Each series' pod and rate over the window, in Prometheus' order: from the counter's raw samples, as CPU
        is (rate()'s extrapolation misjudges short windows and scrape gaps)."""
        query = template.format(sel=selector.matchers(with_container=with_container), range=_duration(end - start))
        found = []
        for series in self._query(query, end):
            stats = counter_window([(float(t), float(v)) for t, v in series.get("values", [])], MIN_SUBWINDOW_S)
            if stats is not None:
                found.append((series["metric"].get("pod", "?"), stats.mean))
        return found

    def cpu_cores_by_pod(self, selector: Selector, start: float, end: float) -> dict[str, float]:
        """Mean cores per pod over the window."""
        return {pod: stats.mean for pod, stats in self._cpu_by_pod(selector, start, end, 0.0).items()}

    def envoy_rps(self, selector: Selector, start: float, end: float) -> float:
        """Requests per second Envoy's HTTP listeners accepted over the window."""
        return self._envoy_rate(ENVOY_REQUESTS, selector, start, end)

    def envoy_cx_rate(self, selector: Selector, start: float, end: float) -> float:
        """New downstream connections per second Envoy's HTTP listeners accepted over the window."""
        return self._envoy_rate(ENVOY_CONNECTIONS, selector, start, end)

    def _envoy_rate(self, template: str, selector: Selector, start: float, end: float) -> float:
        """The summed rate of one of Envoy's counters over the window (NaN: not scraped)."""
        rates = [rate for _, rate in self._series_rates(template, selector, start, end)]
        return sum(rates) if rates else math.nan

    def memory_working_set_bytes(self, selector: Selector, start: float, end: float) -> float:
        return self._scalar(MEMORY_WORKING_SET.format(sel=selector.matchers(), range=_duration(end - start)), end)

    def memory_working_set_mean_bytes(self, selector: Selector, start: float, end: float) -> float:
        """The containers' working set, averaged over the window (NaN: no sample)."""
        query = MEMORY_WORKING_SET_MEAN.format(sel=selector.matchers(), range=_duration(end - start))
        return self._scalar(query, end)

    def envoy_gauge(self, template: str, selector: Selector, start: float, end: float) -> float:
        """One of Envoy's own gauges (ENVOY_HEAP, ENVOY_ALLOCATED, ENVOY_ACTIVE_CONNECTIONS) averaged over
        the window (NaN: not scraped)."""
        query = template.format(sel=selector.matchers(with_container=False), range=_duration(end - start))
        return self._scalar(query, end)


def _after_reset(samples: Samples) -> Samples:
    """The samples after the counter's last reset (a restarted container starts again from zero)."""
    points = sorted(samples)
    for index in range(len(points) - 1, 0, -1):
        if points[index][1] < points[index - 1][1]:
            return points[index:]
    return points


def _increase(samples: Samples) -> float:
    points = _after_reset(samples)
    return points[-1][1] - points[0][1] if len(points) >= 2 else 0.0


def counter_window(samples: Samples, sub_s: float) -> WindowStats | None:
    """A counter's rate over its samples: the mean from the first to the last, min and max over the
    spans of at least `sub_s` seconds that start at each sample. Samples before a reset are dropped."""
    points = _after_reset(samples)
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
