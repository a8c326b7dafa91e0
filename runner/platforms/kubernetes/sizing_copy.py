"""The classic install's sizing fleet: a Deployment cloned from the production Envoy workload's pod template, with
a ClusterIP Service of its own, in production's namespace (its pods mount production's Secrets, which live there).

The clone keeps what makes it the same Envoy: the image, the bootstrap init container and its args, Envoy's args,
the volumes and the Secrets they mount, the tolerations, the node affinity, the security context. Contour serves
the same xDS to every Envoy that bootstraps against it, so the clone runs production's listeners and routes. What
differs, each for a reason:
- its labels are the run's (app.kubernetes.io/name: gateway-sizer-envoy and the run's): production's Service never
  selects its pods, and a Service that would is refused before anything is created;
- the sweep's limits, replicas and `--concurrency` (by default production's own: its args as they are);
- placed with the scenario's node selector, or on the node of production's first Envoy pod;
- no hostPorts, and the pod network when production uses the host's: the fleet shares a node with production's
  pods, whose ports those are; it is reached through its own Service;
- no priority class (it never preempts a pod), no pod (anti-)affinity or spread constraint (they are about
  production's own pods), a 10 s grace period and the Recreate strategy (no user is on it to drain);
- its readiness probed every second from its start, not after production's delay and period: the run waits for it
  before it measures (one GET a second of Envoy's admin /ready, not a listener a window reads).
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit

from runner.errors import UsageError
from runner.metrics import Metrics, Selector
from runner.plan import Configuration
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call
from runner.platforms.kubernetes.created import RunObjects
from runner.platforms.kubernetes.fleet import THREADS_BY_POD, pods_regex
from runner.platforms.kubernetes.fleet_objects import first_configuration, remove_leftovers, view_of
from runner.platforms.kubernetes.objects import gateway_key, run_hash, run_labels
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.resize import live_pods
from runner.platforms.kubernetes.template_sizing import TemplateFleet, TemplateSizing
from runner.platforms.kubernetes.workloads import Workload
from runner.scenario import Scenario

COMPONENT = "gateway-sizer-envoy"
GRACE_S = 10
READY_PROBE_S = 1  # the fleet's readiness probe period, without an initial delay
NODE_FIELD = "metadata.name"  # a node affinity on the node's name needs no label of it
DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/restartedAt",)


def fleet_name(run_id: str) -> str:
    return f"{COMPONENT}-{run_hash(run_id)}"


def _on_node(affinity: dict[str, Any] | None, node: str) -> dict[str, Any]:
    """Production's node affinity with every term also requiring node `node` (a term of its own when it has none)."""
    node_affinity = copy.deepcopy((affinity or {}).get("nodeAffinity") or {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    pinned = {"key": NODE_FIELD, "operator": "In", "values": [node]}
    required["nodeSelectorTerms"] = [
        {**term, "matchFields": [*(term.get("matchFields") or []), pinned]} for term in terms
    ]
    return {"nodeAffinity": node_affinity}


def clone_template(
    production: dict[str, Any],
    labels: dict[str, str],
    resources: dict[str, dict[str, Any] | None],
    envoy: tuple[str, list[str] | None],
    node_selector: dict[str, str] | None,
    node: str | None,
) -> tuple[dict[str, Any], list[str]]:
    """The fleet's pod template from production's (the API's JSON of it), and one note per difference beyond the
    labels, sizes and args. `envoy`: Envoy's container name and its args for the configuration."""
    template = copy.deepcopy(production)
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    kept = {k: v for k, v in annotations.items() if k not in DROPPED_ANNOTATIONS}
    template["metadata"] = {"labels": dict(labels), **({"annotations": kept} if kept else {})}
    spec = template["spec"]
    notes = []
    if spec.pop("priorityClassName", None) is not None:
        notes.append("no priority class (it never preempts a pod)")
    for key in ("priority", "preemptionPolicy", "nodeName", "topologySpreadConstraints"):
        spec.pop(key, None)
    if spec.get("hostNetwork"):
        spec["hostNetwork"] = False
        if spec.get("dnsPolicy") == "ClusterFirstWithHostNet":
            spec["dnsPolicy"] = "ClusterFirst"
        notes.append("the pod network, not the host's (production's Envoy holds the node's ports)")
    host_ports = []
    for container in [*(spec.get("initContainers") or []), *spec["containers"]]:
        for port in container.get("ports") or []:
            if port.pop("hostPort", None) is not None:
                host_ports.append(str(port.get("containerPort")))
            port.pop("hostIP", None)
        if container["name"] in resources:
            container["resources"] = resources[container["name"]] or {}
        if _probe_readiness_sooner(container):
            notes.append(f"{container['name']}'s readiness probed every {READY_PROBE_S} s from its start")
        if container["name"] == envoy[0]:
            container.pop("args", None)
            if envoy[1] is not None:
                container["args"] = list(envoy[1])
    if host_ports:
        notes.append(f"no hostPorts (production's pods publish {', '.join(host_ports)} on their nodes)")
    affinity = {k: v for k, v in (spec.get("affinity") or {}).items() if k == "nodeAffinity"}
    spec.pop("affinity", None)
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    elif node is not None:
        affinity = _on_node(affinity, node)
    if affinity:
        spec["affinity"] = affinity
    spec["terminationGracePeriodSeconds"] = min(spec.get("terminationGracePeriodSeconds") or GRACE_S, GRACE_S)
    return template, notes


def _probe_readiness_sooner(container: dict[str, Any]) -> bool:
    """Probe a container's readiness every READY_PROBE_S from its start (Contour's Envoy: after 3 s, every 4 s); returns
    whether that changed its probe."""
    probe = container.get("readinessProbe")
    if not probe:
        return False
    wanted = {"initialDelaySeconds": 0, "periodSeconds": min(probe.get("periodSeconds") or 10, READY_PROBE_S)}
    if all((probe.get(key) or 0) == value for key, value in wanted.items()):
        return False
    probe.update(wanted)
    return True


def service_ports(production: dict[str, Any] | None, envoy_ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fleet Service's ports: production Service's (without node ports), else Envoy's container ports."""
    if production is not None:
        keep = ("name", "port", "targetPort", "protocol", "appProtocol")
        return [{k: p[k] for k in keep if p.get(k) is not None} for p in production["spec"].get("ports") or []]
    return [
        {
            "name": p.get("name") or f"port-{p['containerPort']}",
            "port": p["containerPort"],
            "targetPort": p["containerPort"],
        }
        for p in envoy_ports
    ]


def service_of(url: str) -> tuple[str, str] | None:
    """(namespace, name) of the Service a cluster URL names (`http://envoy.projectcontour.svc.cluster.local`)."""
    parts = (urlsplit(url).hostname or "").split(".")
    return (parts[1], parts[0]) if len(parts) >= 2 and (len(parts) == 2 or parts[2] == "svc") else None


class ClassicSizing(TemplateFleet):
    """A Deployment and Service of the run's own, cloned from the classic install's Envoy DaemonSet/Deployment."""

    shape = "a sizing fleet (a Deployment cloned from production's Envoy)"
    sizing = True

    def __init__(self, scenario: Scenario, run_id: str, changes: ClusterChanges) -> None:
        super().__init__(scenario, run_id, changes)
        envoy = scenario.envoy.workload
        self.name = fleet_name(run_id)
        self.gateway = gateway_key(envoy.namespace, envoy.name)
        self.labels = {**scenario.kubernetes.sizing.labels, **run_labels(COMPONENT, run_id, self.gateway)}
        self.template: dict[str, Any] = {}
        self.production_service: dict[str, Any] | None = None
        self.production_pods: list[str] = []  # production's pods on the node the fleet copies
        self.production_threads: int | None = None  # production's worker threads, where its args set none
        self.node: str | None = None  # the node of production's first Envoy pod (the default placement)
        self.notes: list[str] = []
        self._sizing: TemplateSizing | None = None
        self.objects = RunObjects(changes)

    @property
    def workload(self) -> Workload:
        return Workload(
            "Deployment", self.scenario.envoy.workload.namespace, self.name, self.scenario.envoy.workload.container
        )

    @property
    def view(self) -> Scenario:
        workload = self.workload
        parts = urlsplit(self.scenario.kubernetes.gateway_url)
        port = f":{parts.port}" if parts.port else ""
        url = f"{parts.scheme}://{workload.name}.{workload.namespace}.svc.cluster.local{port}"
        return view_of(self.scenario, workload, url)

    def pod_labels(self) -> tuple[str, dict[str, str]]:
        return self.workload.namespace, dict(self.labels)

    def find(self, cluster: Cluster) -> None:
        self.production = production = workloads.find(cluster, self.scenario.envoy.workload, "envoy")
        obj = workloads.read(cluster, production)
        self.template = cluster.api.sanitize_for_serialization(obj.spec.template)
        pods = sorted(live_pods(cluster, production), key=lambda p: p.metadata.name)
        placement = self.scenario.kubernetes.sizing.node_selector
        if placement is None and not any(p.spec.node_name for p in pods):
            raise UsageError(
                f"{production} runs no pod on a node, so the sizing fleet has no node to copy",
                "name the node it should run on (kubernetes.sizing.node_selector)",
            )
        self.node = next((p.spec.node_name for p in pods if p.spec.node_name), None)
        self.production_pods = [p.metadata.name for p in pods if p.spec.node_name == self.node]
        self.production_service = self._production_service(cluster)
        envoy = next(c for c in self.template["spec"]["containers"] if c["name"] == production.container)
        if not service_ports(self.production_service, envoy.get("ports") or []):
            raise UsageError(
                f"no Service of {production}'s at {self.scenario.kubernetes.gateway_url}, and its container "
                f"{production.container} names no port: the sizing fleet's Service would have none",
                "set kubernetes.gateway_url to production's Envoy Service (http://<name>.<namespace>.svc.cluster.local)",
            )
        self._refuse_selecting_services(cluster)

    def _production_service(self, cluster: Cluster) -> dict[str, Any] | None:
        named = service_of(self.scenario.kubernetes.gateway_url)
        if named is None:
            return None
        try:
            found = call(
                f"read Service {named[0]}/{named[1]}", cluster.core.read_namespaced_service, named[1], named[0]
            )
        except NotFoundError:
            return None
        data: dict[str, Any] = cluster.api.sanitize_for_serialization(found)
        return data

    def _refuse_selecting_services(self, cluster: Cluster) -> None:
        """UsageError when a Service of the namespace (production's above all) would select the fleet's pods."""
        namespace = self.workload.namespace
        services = call(f"list Services in {namespace}", cluster.core.list_namespaced_service, namespace)
        for service in services.items:
            selector = service.spec.selector or {}
            if selector and all(self.labels.get(k) == v for k, v in selector.items()):
                raise UsageError(
                    f"Service {namespace}/{service.metadata.name} would select the sizing fleet's pods "
                    f"(its selector {selector}): it would send its traffic to them",
                    "drop those labels from kubernetes.sizing.labels",
                )

    def read_production(self, metrics: Metrics) -> str | None:
        """Production's worker threads when its args set none: the count its Envoy reports of itself
        (`server.concurrency`, on the node the fleet copies), which the clone then sets as `--concurrency`. Envoy
        picks its own count from its CPU limit (Envoy 1.37 and later) or the node's CPUs, so a clone left without the
        flag would run fewer threads under a smaller limit than production runs."""
        container = self.workload.container
        envoy: dict[str, Any] = next((c for c in self.template["spec"]["containers"] if c["name"] == container), {})
        if workloads.concurrency_in(envoy.get("args")) is not None or not self.production_pods:
            return None
        production = self.production
        assert production is not None
        selector = Selector(production.namespace, pods_regex(self.production_pods), container)
        counts = {
            int(float(s["value"][1]))
            for s in metrics.instant(THREADS_BY_POD.format(sel=selector.matchers(with_container=False)))
        }
        if len(counts) != 1:
            return (
                "production's Envoy reports no worker-thread count (server.concurrency): the fleet runs Envoy's own "
                "default under its limit, which the report records"
            )
        (self.production_threads,) = counts
        return (
            f"the fleet runs production's {self.production_threads} worker threads (its args set no --concurrency; "
            f"its Envoy reports {self.production_threads}): --concurrency {self.production_threads} on the fleet"
        )

    def _sized(self, config: Configuration) -> TemplateSizing:
        """How the clone is sized: production's container resources and args as the base (with production's
        worker-thread count, read_production)."""
        containers = {
            c["name"]: c.get("resources") or None
            for c in [*(self.template["spec"].get("initContainers") or []), *self.template["spec"]["containers"]]
        }
        envoy = next(c for c in self.template["spec"]["containers"] if c["name"] == self.workload.container)
        init = {c["name"] for c in self.template["spec"].get("initContainers") or []}
        args = envoy.get("args")
        if self.production_threads is not None:
            args = workloads.with_concurrency(args, self.production_threads)
        return TemplateSizing(
            self.workload, containers, args, init, self.scenario.envoy.guaranteed_qos, lambda *_: None
        )

    def claim(self, cluster: Cluster) -> None:
        """Delete a killed run's fleet (with the Lease held, any other is one), then create the Service and the
        Deployment, each recorded before it exists, sized for the plan's first configuration."""
        namespace = self.workload.namespace
        remove_leftovers(cluster, self.objects, namespace, self.gateway, COMPONENT, keep=self.name)
        first = first_configuration(self.scenario)
        self._sizing = sizing = self._sized(first)
        container = self.workload.container
        template, self.notes = clone_template(
            self.template,
            self.labels,
            sizing.resources(first),
            (container, sizing.args(first)),
            self.scenario.kubernetes.sizing.node_selector,
            self.node,
        )
        envoy = next(c for c in self.template["spec"]["containers"] if c["name"] == container)
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": self.name, "namespace": namespace, "labels": self.labels},
            "spec": {
                "type": "ClusterIP",
                "selector": self.labels,
                "ports": service_ports(self.production_service, envoy.get("ports") or []),
            },
        }
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.name, "namespace": namespace, "labels": self.labels},
            "spec": {
                "replicas": first.envoy_replicas,
                "selector": {"matchLabels": self.labels},
                "strategy": {"type": "Recreate"},
                "revisionHistoryLimit": 1,
                "template": template,
            },
        }
        self.objects.record("Service", namespace, [self.name])
        self.objects.create(cluster, service)
        self.objects.record("Deployment", namespace, [self.name])
        self.objects.create(cluster, deployment)

    def size(self, cluster: Cluster, config: Configuration, *, fresh: bool) -> bool:
        assert self._sizing is not None, "claimed first"
        timeout_s = self.scenario.kubernetes.rollout_timeout_s
        if self.applied is None:  # the pods it was created with (or, for another first configuration, new ones)
            self._sizing.patch(cluster, config, config.envoy_replicas)
            workloads.wait_rolled_out(cluster, self.workload, timeout_s)
            return True
        return self._size(cluster, config, fresh=fresh, replicas=config.envoy_replicas)

    def production_concurrency(self) -> int | None:
        containers = self.template.get("spec", {}).get("containers") or []
        envoy: dict[str, Any] = next((c for c in containers if c["name"] == self.workload.container), {})
        return workloads.concurrency_in(envoy.get("args"))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "copied_from": str(self.production), "differences": tuple(self.notes)}
