"""Preflight: what a kubernetes run will measure and change, checked before anything changes, in every mode.

`gateway-sizer sweep` prints it before it starts, `gateway-sizer sweep --dry-run` prints it and the plan and
changes nothing; the platform runs the same checks again before its first change (`check_safe`). Each check reads
the cluster and Prometheus only:

- the production gateway's Envoy pods (names, nodes, owners; a pod of the selection owned by another workload is
  an error), and what the run creates beside them or changes in them;
- the series the queries need in Prometheus: cAdvisor's CPU and CFS counters, Envoy's request counter on the
  listeners the sweep reads (one line naming the missing series and how to add it);
- how often Prometheus holds a sample of Envoy's CPU, against the scenario's windows;
- the node's room for the largest configuration's pods (when the account may read nodes);
- no HPA or KEDA ScaledObject scales the workload the run sizes (autoscalers.py): production's when live, the
  sizing fleet's otherwise;
- live: the production pods' own traffic over the last seconds (a gateway serving traffic is refused, its RPS in
  the line) and their count (one pod until the sweep measures per pod).
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import PlatformError, UsageError
from runner.http import is_redacted
from runner.metrics import CFS_PERIODS, CPU_SAMPLES, ENVOY_REQUESTS, MIN_CPU_SAMPLES, Metrics, Selector
from runner.plan import Plan
from runner.platforms.kubernetes.autoscalers import check_autoscalers
from runner.platforms.kubernetes.connection import Cluster, connect
from runner.platforms.kubernetes.findings import Finding
from runner.platforms.kubernetes.fleet import EnvoyFleet, pods_regex
from runner.platforms.kubernetes.lease import lease_for
from runner.platforms.kubernetes.node_room import node_room
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.resize import live_pods
from runner.platforms.kubernetes.shapes import describe_gateway, fleet_for
from runner.platforms.kubernetes.workloads import Workload
from runner.scenario import Scenario

LIVE_IDLE_RPS = 1.0  # a live gateway serving more than this (not the run's) is refused
IDLE_WINDOW_S = 10.0  # the seconds of production's own traffic read before a live run (at least 3 scrapes)
SPACING_WINDOW_S = 120.0  # the span over which the spacing of Envoy's CPU samples is read
PLANNED_RUN = "planned-run"  # the run id a dry run names the fleet's objects for (a real run's hash differs)
PROMETHEUS_HINT = (
    "scrape each kubelet's /metrics/cadvisor and Envoy's port 8002 /stats/prometheus (k8s/manifests/prometheus does; "
    "kube-prometheus-stack: docs/kubernetes.md#your-own-prometheus)"
)


@dataclass
class Preflight:
    """What the checks found: one line each, and the first problem (a UsageError), if any."""

    lines: list[str] = field(default_factory=list)
    problem: UsageError | None = None

    def refuse(self, what: str, fix: str) -> None:
        if self.problem is None:
            self.problem = UsageError(what, fix)


def connect_prometheus(cluster: Cluster, scenario: Scenario) -> Metrics:
    """The scenario's Prometheus (its URL, or its Service through the API server's proxy), checked to answer."""
    spec = scenario.prometheus
    if spec.url and is_redacted(spec.url):
        raise UsageError(
            f"prometheus.url {spec.url} has its credentials removed (a run directory keeps none)",
            "pass --scenario with the scenario file that has them",
        )
    if spec.url:
        metrics = Metrics(spec.url, scrape_interval_s=spec.scrape_interval_s, retry_s=spec.retry_s)
    else:
        service = spec.service
        url = cluster.service_proxy_url(service.namespace, service.name, service.port)
        metrics = Metrics(url, session=cluster.client(budget_s=spec.retry_s), scrape_interval_s=spec.scrape_interval_s)
    metrics.check()
    return metrics


def _owner(pod: Any) -> str:
    """The workload that owns a pod: `DaemonSet ns/x` or `Deployment ns/y` (a ReplicaSet's, by its hash label)."""
    for ref in pod.metadata.owner_references or []:
        if ref.kind == "ReplicaSet":
            suffix = (pod.metadata.labels or {}).get("pod-template-hash")
            name = ref.name[: -len(suffix) - 1] if suffix and ref.name.endswith(f"-{suffix}") else ref.name
            return f"Deployment {pod.metadata.namespace}/{name}"
        return f"{ref.kind} {pod.metadata.namespace}/{ref.name}"
    return f"no owner ({pod.metadata.namespace}/{pod.metadata.name} is a bare pod)"


def _pods(cluster: Cluster, workload: Workload) -> list[Any]:
    return sorted(live_pods(cluster, workload), key=lambda p: p.metadata.name)


ANYWHERE = 'namespace=~".+"'  # a label matcher every container's series has


def _present(metrics: Metrics, template: str, selector: Selector | None, *, with_container: bool = True) -> set[str]:
    """The pods with a sample of a counter in the last SPACING_WINDOW_S (`selector` None: of any pod)."""
    matchers = ANYWHERE if selector is None else selector.matchers(with_container=with_container)
    query = template.format(sel=matchers, range=f"{SPACING_WINDOW_S:g}s")
    return {s["metric"].get("pod", "?") for s in metrics.instant(query)}


def _spacing(metrics: Metrics, selector: Selector) -> float | None:
    """The median seconds between the samples of Envoy's CPU counter Prometheus holds (cAdvisor's refresh and
    Prometheus' scrape together), None without two samples."""
    query = CPU_SAMPLES.format(sel=selector.matchers(), range=f"{SPACING_WINDOW_S:g}s")
    gaps = []
    for series in metrics.instant(query):
        times = sorted(float(t) for t, _ in series.get("values", []))
        gaps += [b - a for a, b in itertools.pairwise(times)]
    return statistics.median(gaps) if gaps else None


def check_series(report: Preflight, metrics: Metrics, scenario: Scenario, selector: Selector, pods: list[str]) -> None:
    """Envoy's CPU, CFS and request counters for the pods (or, for those the run creates, anywhere), and the
    windows against the spacing of the CPU samples."""
    cpu = _present(metrics, CPU_SAMPLES, selector)
    if not cpu:
        report.refuse(
            f"Prometheus has no container_cpu_usage_seconds_total for pod(s) {', '.join(pods)} (container "
            f"{selector.container}, cAdvisor's CPU counter)",
            PROMETHEUS_HINT,
        )
        return
    cfs = _present(metrics, CFS_PERIODS, None)
    requests = _present(metrics, ENVOY_REQUESTS, selector, with_container=False)
    counted = requests or _present(metrics, ENVOY_REQUESTS, None)
    if not cfs:
        report.refuse(
            "Prometheus has no container_cpu_cfs_periods_total for any container (cAdvisor's CFS counters, how "
            "often Envoy's CPU limit throttled it)",
            "keep container_cpu_cfs_periods_total and container_cpu_cfs_throttled_periods_total in the kubelet "
            "scrape's metric_relabel_configs",
        )
    if not counted:
        report.refuse(
            "Prometheus has no envoy_http_downstream_rq_total for any pod (Envoy's request counter on the listeners "
            "ingress_http, ingress_https, http-<port>, https-<port>)",
            "scrape Envoy's port 8002 at /stats/prometheus and keep http.*.downstream_rq_total in its filter "
            "(k8s/manifests/prometheus does; kube-prometheus-stack: a PodMonitor, docs/kubernetes.md)",
        )
    spacing = _spacing(metrics, selector)
    said = "not yet counted on them (Envoy exports it once used)" if counted and not requests else "present"
    every = f", a sample every {spacing:.1f} s" if spacing else ""
    report.lines.append(
        f"Prometheus: Envoy's CPU (cAdvisor) for {len(cpu)} pod(s){every}; CFS counters present; Envoy's request "
        f"counter {said}"
    )
    if spacing is None:
        return
    load = scenario.load
    needed = (MIN_CPU_SAMPLES - 1) * spacing
    if load.step_s < needed:
        report.refuse(
            f"load.step_seconds {load.step_s:g}: Prometheus holds a sample of Envoy's CPU every {spacing:.1f} s, "
            f"and a window needs {MIN_CPU_SAMPLES} of them",
            f"set load.step_seconds to {needed:.0f} or more, and prometheus.scrape_interval_seconds: {spacing:.0f}",
        )
    elif spacing > 1.5 * scenario.prometheus.scrape_interval_s:
        report.lines.append(
            f"warning: prometheus.scrape_interval_seconds is {scenario.prometheus.scrape_interval_s:g}, but samples "
            f"come every {spacing:.1f} s: set it to {spacing:.0f} (the RPS guards allow for a scrape's jitter)"
        )


def check_idle(report: Preflight, metrics: Metrics, selector: Selector, pods: list[str]) -> None:
    """Live: the production pods' own traffic and CPU over the last IDLE_WINDOW_S; a gateway serving traffic is
    refused with that figure in the line."""
    end = time.time()
    start = end - IDLE_WINDOW_S
    rps = metrics.envoy_rps(selector, start, end)
    cores = metrics.cpu_cores(selector, start, end).mean
    rps = 0.0 if rps != rps else rps  # no request counted: NaN
    figure = f"{rps:,.1f} RPS and {cores if cores == cores else 0:.3f} cores over the last {IDLE_WINDOW_S:.0f} s"
    report.lines.append(f"live: the production pods served {figure}")
    if rps > LIVE_IDLE_RPS:
        report.refuse(
            f"kubernetes.target: live: the production gateway serves traffic ({figure} on {', '.join(pods)}): the "
            "sweep would drive its users' pods past saturation",
            "size a sizing fleet beside it (kubernetes.target: sizing, the default)",
        )


def preflight(cluster: Cluster, metrics: Metrics, fleet: EnvoyFleet, plan: Plan | None = None) -> Preflight:
    """Every check, on a fleet whose production gateway has been found (fleet.find)."""
    scenario = fleet.scenario
    report = Preflight()
    production = _production(fleet)
    pods = _pods(cluster, production)
    names = [p.metadata.name for p in pods]
    facts = ", ".join(f"{p.metadata.name} on {p.spec.node_name or 'no node yet'}" for p in pods) or "none"
    report.lines.append(f"the production gateway ({describe_gateway(scenario)}): {production}, pod(s) {facts}")
    for pod in pods:
        if _owner(pod) != str(production):
            report.refuse(f"pod {pod.metadata.name} is {_owner(pod)}'s, not {production}'s", "check envoy.workload")
    selector = Selector(production.namespace, pods_regex(names), production.container)
    if names:
        check_series(report, metrics, scenario, selector, names)
    if fleet.sizing:
        report.lines.append(f"the run creates {fleet}; production's objects are only read")
        threads = fleet.read_production(metrics)
        if threads:
            report.lines.append(threads)
    else:
        report.lines.append(f"the run changes {production} and its pod(s) {', '.join(names) or 'none'}")
        if len(names) > 1:  # a live run sizes one pod; a fleet of several is the sizing fleet's (envoy.replicas)
            report.refuse(
                f"{production} runs {len(names)} pods: a live run measures one Envoy pod per configuration",
                "size a sizing fleet (kubernetes.target: sizing, the default), whose replicas are the run's "
                "(envoy.replicas)",
            )
        if names:
            check_idle(report, metrics, selector, names)
    add_findings(report, check_autoscalers(cluster, fleet.workload, AUTOSCALER_FIX[fleet.sizing]))
    room = node_room(cluster, fleet, pods, plan)
    if room:
        report.lines.append(room)
    return report


AUTOSCALER_FIX = {  # how each fix of an autoscaler that scales the workload the run sizes ends
    False: "or size a sizing fleet (kubernetes.target: sizing, the default)",
    True: "or name another workload in it: it scales the run's own sizing fleet",
}


def add_findings(report: Preflight, findings: list[Finding]) -> None:
    """A check's refusals and warnings (findings.py) into the preflight."""
    for finding in findings:
        if finding.refuse:
            report.refuse(finding.problem, finding.fix)
        else:
            report.lines.append(finding.warning())


def _production(fleet: EnvoyFleet) -> Workload:
    if fleet.production is None:
        raise PlatformError("the production gateway is not found yet (fleet.find first)")
    return fleet.production


def check_safe(cluster: Cluster, metrics: Metrics, fleet: EnvoyFleet) -> None:
    """The preflight's problem, raised (the platform, before its first change)."""
    found = preflight(cluster, metrics, fleet)
    if found.problem is not None:
        raise found.problem


def run_preflight(scenario: Scenario, plan: Plan, *, live: bool, run_id: str | None = None) -> Preflight:
    """The preflight of a run not started yet (`run_id`: one being resumed): the cluster and Prometheus read,
    nothing created or changed (a new run's fleet's objects are named for a run to come). A live target's
    replicas are refused when its gateway is found (fleet_live.py), before anything is changed."""
    k8s = scenario.kubernetes
    cluster = connect(k8s.kubeconfig, k8s.context)
    run = run_id or PLANNED_RUN
    fleet = fleet_for(scenario, run, ClusterChanges(Path(os.devnull)), live=live)
    fleet.find(cluster)
    lease_for(cluster, scenario, run, str(fleet.production)).refuse_if_held(for_run=run)  # one run per gateway
    return preflight(cluster, connect_prometheus(cluster, scenario), fleet, plan)
