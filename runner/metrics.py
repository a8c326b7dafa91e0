"""Prometheus: the named PromQL the sweep uses, and a client that evaluates it over a window.

The same queries serve both platforms: cAdvisor's container metrics (published locally under the same
names by the exporter) and Envoy's own `envoy_http_downstream_rq_total`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

from runner.errors import UnreachableError

# {sel} is a label matcher list (see Selector), {range} a PromQL duration.
CPU_CORES = "sum(rate(container_cpu_usage_seconds_total{{{sel}}}[{range}]))"
CPU_CORES_BY_POD = "sum by (pod) (rate(container_cpu_usage_seconds_total{{{sel}}}[{range}]))"
CPU_SAMPLES = "max(count_over_time(container_cpu_usage_seconds_total{{{sel}}}[{range}]))"
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

    def cpu_samples(self, selector: Selector, start: float, end: float) -> int:
        """Samples of the selected containers' CPU counter inside [start, end] (the best-covered one)."""
        value = self._scalar(CPU_SAMPLES.format(sel=selector.matchers(), range=_duration(end - start)), end)
        return int(value) if math.isfinite(value) else 0

    def _range_stats(self, template: str, sel: str, start: float, end: float, spacing_s: float = 0.0) -> WindowStats:
        window = end - start
        mean = self._scalar(template.format(sel=sel, range=_duration(window)), end)
        sub = max(MIN_SUBWINDOW_S, 2.5 * max(self.scrape_interval_s, spacing_s))
        if window <= sub:
            return WindowStats(mean, mean, mean)
        query = template.format(sel=sel, range=_duration(sub))
        try:
            series = self._prom.custom_query_range(
                query, start_time=_dt(start + sub), end_time=_dt(end), step=_duration(self.scrape_interval_s)
            )
        except (requests.RequestException, PrometheusApiClientException) as error:
            raise UnreachableError(f"Prometheus at {self.url} failed: {error}") from None
        values = [float(v) for s in series for _, v in s["values"] if v not in ("NaN", "+Inf", "-Inf")]
        if not values:
            return WindowStats(mean, mean, mean)
        return WindowStats(mean, min(mean, *values), max(mean, *values))  # the range always holds the mean

    def cpu_cores(self, selector: Selector, start: float, end: float, spacing_s: float = 0.0) -> WindowStats:
        """Cores used by the selected containers: mean over the window, min/max over sub-windows (at least
        2.5 scrape intervals, or 2.5 sample spacings when the counter is refreshed less often)."""
        return self._range_stats(CPU_CORES, selector.matchers(), start, end, spacing_s)

    def cpu_cores_by_pod(self, selector: Selector, start: float, end: float) -> dict[str, float]:
        query = CPU_CORES_BY_POD.format(sel=selector.matchers(), range=_duration(end - start))
        return {r["metric"].get("pod", "?"): float(r["value"][1]) for r in self._query(query, end)}

    def envoy_rps(self, selector: Selector, start: float, end: float) -> float:
        """Requests per second Envoy's HTTP listener accepted over the window."""
        query = ENVOY_RPS.format(sel=selector.matchers(with_container=False), range=_duration(end - start))
        return self._scalar(query, end)

    def memory_working_set_bytes(self, selector: Selector, start: float, end: float) -> float:
        return self._scalar(MEMORY_WORKING_SET.format(sel=selector.matchers(), range=_duration(end - start)), end)


def _now() -> float:
    return time.time()


def _dt(timestamp: float) -> datetime:
    """prometheus-api-client takes datetimes for range queries."""
    return datetime.fromtimestamp(timestamp, tz=UTC)
