"""Locust in the cluster: a master Deployment and Service, a workers Deployment, the locustfiles ConfigMap.

The manifests are plain data built here (one place), created with the API and labelled so a run's
objects can be found and removed. Each run's objects carry a short hash of its run id in their names
(`locust-master-1a2b3c4d`) and the labels of the run and of the gateway they load; a run holds the
gateway's Lease (lease.py), so any other objects labelled with its gateway are leftovers of a run that
was killed. The pods pass Pod Security `restricted`: non-root, no privilege escalation, no capabilities,
the runtime's default seccomp profile, no ServiceAccount token.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.errors import PlatformError, UsageError
from runner.locust import (
    GUARD_EXTENSION,
    MASTER_PORT,
    READY_PATH,
    STATS_EXTENSION,
    TOKEN_ENV,
    WEB_PORT,
    LocustMaster,
    LocustOptions,
    guard_env,
    loop_env,
    master_args,
    user_class,
    worker_args,
)
from runner.paths import LOCUSTFILE_DIR
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster, ConflictError, NotFoundError, call
from runner.platforms.kubernetes.objects import (
    GATEWAY_LABEL,
    MANAGED_BY,
    gateway_key,
    label_selector,
    run_hash,
    run_labels,
    wait_gone,
)
from runner.platforms.kubernetes.originals import ClusterChanges, delete_created
from runner.platforms.kubernetes.worker_port import WORKER_HOST_ENV, network_policy, worker_host
from runner.platforms.kubernetes.workloads import Workload, resources_for
from runner.quantities import parse_cpu, parse_memory
from runner.scenario import Scenario

MASTER = "locust-master"  # each name is followed by the run's hash: locust-master-1a2b3c4d
WORKER = "locust-worker"
CONFIGMAP = "gateway-sizer-locustfiles"
TOKEN_SECRET = "gateway-sizer-locust-token"  # the master's command token (locustfiles/gateway_sizer_guard.py)
TOKEN_KEY = "token"
FETCH_EXTENSION = "gateway_sizer_fetch.py"  # the master's GET through the gateway (gateway_check.py)
# Shipped from locustfiles/ whatever folder the scenario's locustfile is in: the master's extensions and
# the lean client they use.
EXTENSION_MODULES = (
    STATS_EXTENSION,
    GUARD_EXTENSION,
    FETCH_EXTENSION,
    "connection_holder.py",
    "route_probe.py",
    "plain_http.py",
    "lean_http.py",
    "lean_http_wire.py",
    "fine_timer.py",
)
MOUNT = "/home/locust/locustfiles"
LOCUST_UID = 1000  # the user of locustio/locust's image; any non-root uid works for the local image
DEFAULT_LOCUST_IMAGE = "locustio/locust:2.47.0"
DEFAULT_WORKER_CPU, DEFAULT_WORKER_MEMORY = "1", "512Mi"
DEFAULTS_CONFIGMAP = "gateway-sizer-defaults"  # optional, in the test namespace: a cluster's own defaults
WORKERS_TIMEOUT_S = 180.0
HOSTNAME_KEY = "kubernetes.io/hostname"
# Pod Security `restricted` (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
POD_SECURITY = {"runAsNonRoot": True, "runAsUser": LOCUST_UID, "runAsGroup": LOCUST_UID,
                "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@dataclass(frozen=True)
class LocustNames:
    """The names of one run's Locust objects."""

    run_id: str

    @property
    def master(self) -> str:
        return f"{MASTER}-{run_hash(self.run_id)}"

    @property
    def worker(self) -> str:
        return f"{WORKER}-{run_hash(self.run_id)}"

    @property
    def configmap(self) -> str:
        return f"{CONFIGMAP}-{run_hash(self.run_id)}"

    @property
    def token(self) -> str:
        return f"{TOKEN_SECRET}-{run_hash(self.run_id)}"


@dataclass(frozen=True)
class LocustDeployment:
    """What the Locust objects look like for one run."""

    namespace: str
    image: str
    pull_policy: str
    user_class: str
    locustfile: Path
    options: LocustOptions
    gateway_url: str
    workers: int
    worker_resources: dict[str, Any]
    run_id: str
    gateway: str  # gateway_key() of the gateway under load
    targets: tuple[str, ...]  # the only URLs the master and the workers send to (the guard extension)
    token: str  # what the master takes commands with, kept in a Secret
    worker_host: str = field(default_factory=worker_host)  # the workers' host name, the only one the master takes
    worker_placement: dict[str, Any] = field(default_factory=dict)  # the workers' nodeSelector or affinity

    @property
    def names(self) -> LocustNames:
        return LocustNames(self.run_id)

    def labels(self, component: str) -> dict[str, str]:
        return run_labels(component, self.run_id, self.gateway)

    def _files(self, *extensions: str) -> str:
        names = (self.locustfile.name, STATS_EXTENSION, GUARD_EXTENSION, *extensions)
        return ",".join(f"{MOUNT}/{name}" for name in names)

    def token_secret(self) -> dict[str, Any]:
        """The Secret the master reads its command token from (the runner holds the same token)."""
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.names.token, "namespace": self.namespace, "labels": self.labels(MASTER)},
            "type": "Opaque",
            "stringData": {TOKEN_KEY: self.token},
        }

    def configmap(self) -> dict[str, Any]:
        """The locustfile's folder, and the master's extensions with the modules they import."""
        folder = self.locustfile.parent
        data = {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}
        for name in EXTENSION_MODULES:
            data.setdefault(name, (LOCUSTFILE_DIR / name).read_text())
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.names.configmap,
                "namespace": self.namespace,
                "labels": self.labels("locustfiles"),
            },
            "data": data,
        }

    def _pod(self, component: str, args: list[str], resources: dict[str, Any], ports: list[dict[str, Any]]) -> dict:
        values = {"PYTHONUNBUFFERED": "1", **guard_env(self.targets), **loop_env()}  # the token: from its Secret
        env: list[dict[str, Any]] = [{"name": name, "value": value} for name, value in values.items()]
        if component == MASTER:
            secret = {"name": self.names.token, "key": TOKEN_KEY}
            env.append({"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": secret}})
            env.append({"name": WORKER_HOST_ENV, "value": self.worker_host})
        container = {
            "name": "locust",
            "image": self.image,
            "imagePullPolicy": self.pull_policy,
            "args": args,
            "workingDir": MOUNT,
            "env": env,
            "ports": ports,
            "resources": resources,
            "volumeMounts": [{"name": "locustfiles", "mountPath": MOUNT, "readOnly": True}],
            "securityContext": CONTAINER_SECURITY,
        }
        return {
            "metadata": {"labels": self.labels(component)},
            "spec": {
                "containers": [container],
                "volumes": [{"name": "locustfiles", "configMap": {"name": self.names.configmap}}],
                "terminationGracePeriodSeconds": 5,
                "enableServiceLinks": False,
                "automountServiceAccountToken": False,
                "securityContext": POD_SECURITY,
            },
        }

    def _deployment(self, component: str, name: str, replicas: int, pod: dict[str, Any]) -> dict[str, Any]:
        labels = self.labels(component)
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": pod},
        }

    def master(self) -> dict[str, Any]:
        args = master_args(self._files(FETCH_EXTENSION), self.user_class, self.gateway_url, self.options)
        ports = [{"name": "web", "containerPort": WEB_PORT}, {"name": "master", "containerPort": MASTER_PORT}]
        # probed every second: the run waits for its readiness (a probe is one GET of the web UI's stats)
        probe = {"httpGet": {"path": READY_PATH, "port": "web"}, "periodSeconds": 1}
        pod = self._pod(MASTER, args, resources_for(0.5, 512 * 2**20, guaranteed=False), ports)
        pod["spec"]["containers"][0]["readinessProbe"] = probe
        return self._deployment(MASTER, self.names.master, 1, pod)

    def service(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": self.names.master, "namespace": self.namespace, "labels": self.labels(MASTER)},
            "spec": {
                "selector": self.labels(MASTER),
                # the workers connect once the master listens, not once the Service's endpoints take it in after
                # its readiness probe; the runner itself calls the master only once it is ready
                "publishNotReadyAddresses": True,
                "ports": [
                    {"name": "web", "port": WEB_PORT, "targetPort": "web"},
                    {"name": "master", "port": MASTER_PORT, "targetPort": "master"},
                ],
            },
        }

    def worker(self) -> dict[str, Any]:
        args = worker_args(self._files(), self.user_class, self.options, master_host=self.names.master)
        pod = self._pod(WORKER, args, self.worker_resources, [])
        pod["spec"]["hostname"] = self.worker_host  # in each worker's Locust id, checked by the master
        pod["spec"].update(self.worker_placement)
        return self._deployment(WORKER, self.names.worker, self.workers, pod)

    def network_policy(self) -> dict[str, Any]:
        """The master's worker port open to this run's workers only (worker_port.py)."""
        return network_policy(self.names.master, self.namespace, self.labels(MASTER), self.labels(WORKER),
                              WEB_PORT, MASTER_PORT)  # fmt: skip


def worker_placement(node_selector: dict[str, str] | None, envoy_pods: tuple[str, dict[str, str]] | None) -> dict:
    """The workers' pod spec placement: on the nodes `node_selector` names, else preferably off the nodes that run
    the measured Envoy pods (`envoy_pods`: their namespace and labels), so that the generator takes no CPU from the
    Envoy it measures; preferred, so a one-node cluster still schedules them (the window's guards then judge the
    workers' node's CPU too)."""
    if node_selector:
        return {"nodeSelector": dict(node_selector)}
    if envoy_pods is None or not envoy_pods[1]:
        return {}
    namespace, labels = envoy_pods
    term = {"labelSelector": {"matchLabels": dict(labels)}, "namespaces": [namespace], "topologyKey": HOSTNAME_KEY}
    return {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
            }
        }
    }


def create_locust(cluster: Cluster, spec: LocustDeployment, changes: ClusterChanges) -> None:
    """Create the token's Secret, the ConfigMap, master, Service and workers, recording each before it exists."""
    policies = client.NetworkingV1Api(cluster.api)
    creators: list[tuple[str, dict[str, Any], Callable[..., Any]]] = [
        ("Secret", spec.token_secret(), cluster.core.create_namespaced_secret),
        ("ConfigMap", spec.configmap(), cluster.core.create_namespaced_config_map),
        ("NetworkPolicy", spec.network_policy(), policies.create_namespaced_network_policy),  # before the master
        ("Deployment", spec.master(), cluster.apps.create_namespaced_deployment),
        ("Service", spec.service(), cluster.core.create_namespaced_service),
        ("Deployment", spec.worker(), cluster.apps.create_namespaced_deployment),
    ]
    readers = {
        "ConfigMap": cluster.core.read_namespaced_config_map,
        "Deployment": cluster.apps.read_namespaced_deployment,
        "Service": cluster.core.read_namespaced_service,
        "NetworkPolicy": policies.read_namespaced_network_policy,
    }
    for kind, body, create in creators:
        name = body["metadata"]["name"]
        record = {"kind": kind, "namespace": spec.namespace, "name": name}
        if record not in changes.created:
            changes.created.append(record)
            changes.save()
        try:
            made: Any = call(f"create {kind} {spec.namespace}/{name}", create, spec.namespace, body)
            if kind == "Secret":  # deleted with its uid as a precondition (originals.delete_created)
                changes.created[changes.created.index(record)] = {**record, "uid": made.metadata.uid}
                changes.save()
        except ConflictError:  # there already: ours when a retried create's first attempt got through
            if kind == "Secret":  # unreadable to the runner by design; its name carries this run's hash
                continue
            found: Any = call(f"read {kind} {spec.namespace}/{name}", readers[kind], name, spec.namespace)
            labels = found.metadata.labels or {}
            if any(labels.get(k) != v for k, v in body["metadata"]["labels"].items()):
                changes.created.remove(record)
                changes.save()
                raise UsageError(
                    f"{kind} {spec.namespace}/{name} exists and was not made by this run",
                    "use another kubernetes.namespace or remove it",
                ) from None


class ClusterLocust:
    """Locust as pods for one run: leftovers of a killed run removed, the objects created (each recorded
    before it exists), the workers waited for, the master reached through the API server's proxy."""

    def __init__(
        self, scenario: Scenario, run_id: str, changes: ClusterChanges, gateway_url: str | None = None
    ) -> None:
        self.scenario = scenario
        self.run_id = run_id
        self.gateway_url = gateway_url or scenario.kubernetes.gateway_url  # the fleet's (fleet.py)
        self.names = LocustNames(run_id)
        envoy = scenario.envoy.workload
        self.gateway = gateway_key(envoy.namespace, envoy.name)
        self.changes = changes
        self.worker_cpu_cores: float | None = None

    def start(
        self, cluster: Cluster, targets: tuple[str, ...], envoy_pods: tuple[str, dict[str, str]] | None = None
    ) -> LocustMaster:
        """Create this run's Locust, closed to everyone but this run: load only to `targets`, commands only with
        a token made here (locustfiles/gateway_sizer_guard.py), its workers placed off the nodes of the Envoy pods
        `envoy_pods` names (namespace, labels) where the scenario names no node for them (worker_placement).
        Returns the client of its master. Call it holding the gateway's Lease: every other Locust object labelled
        with the gateway is then a leftover, and is deleted."""
        k8s, load = self.scenario.kubernetes, self.scenario.load
        defaults = self._defaults(cluster)
        token = secrets.token_urlsafe(32)
        spec = LocustDeployment(
            namespace=k8s.namespace,
            image=k8s.locust_image or defaults.get("locust-image", DEFAULT_LOCUST_IMAGE),
            pull_policy=k8s.image_pull_policy or defaults.get("image-pull-policy", "IfNotPresent"),
            user_class=user_class(load),
            locustfile=load.locustfile,
            options=LocustOptions.from_load(load),
            gateway_url=self.gateway_url,
            workers=load.workers,
            worker_resources=self._worker_resources(defaults),
            run_id=self.run_id,
            gateway=self.gateway,
            targets=targets,
            token=token,
            worker_placement=worker_placement(k8s.worker_placement.node_selector, envoy_pods),
        )
        self.remove_leftovers(cluster)
        create_locust(cluster, spec, self.changes)
        master = Workload("Deployment", k8s.namespace, self.names.master, "locust")
        workloads.wait_rolled_out(cluster, master, k8s.rollout_timeout_s)
        url = cluster.service_proxy_url(k8s.namespace, self.names.master, WEB_PORT)
        locust = LocustMaster(url, session=cluster.client(), token=token)
        try:
            locust.wait_for_workers(load.workers, WORKERS_TIMEOUT_S)
        except Exception as error:
            worker = Workload("Deployment", k8s.namespace, self.names.worker, "locust")
            detail = workloads.stuck_pod(cluster, worker, workloads.read(cluster, worker))
            raise PlatformError(f"{error}; {detail}") from None
        return locust

    def _defaults(self, cluster: Cluster) -> dict[str, str]:
        """The optional ConfigMap of a cluster's own defaults (image, pull policy, worker size)."""
        try:
            found = call(
                "read the cluster's gateway-sizer defaults",
                cluster.core.read_namespaced_config_map,
                DEFAULTS_CONFIGMAP,
                self.scenario.kubernetes.namespace,
            )
        except NotFoundError:
            return {}
        return dict(found.data or {})

    def _worker_resources(self, defaults: dict[str, str]) -> dict[str, Any]:
        """The scenario's worker resources (Guaranteed), else the cluster's defaults, else 1 CPU / 512Mi."""
        chosen = self.scenario.kubernetes.worker_resources
        if chosen is not None:
            self.worker_cpu_cores = chosen.cpu_cores
            return resources_for(chosen.cpu_cores, chosen.memory_bytes, guaranteed=True)
        cpu = parse_cpu(defaults.get("worker-cpu", DEFAULT_WORKER_CPU))
        memory = parse_memory(defaults.get("worker-memory", DEFAULT_WORKER_MEMORY))
        resources = resources_for(cpu, memory, guaranteed=True)
        if "worker-cpu-request" in defaults:  # a small node: request less, keep the limit the guards judge by
            resources["requests"]["cpu"] = defaults["worker-cpu-request"]
        self.worker_cpu_cores = cpu
        return resources

    def remove_leftovers(self, cluster: Cluster) -> list[str]:
        """Delete the Locust objects labelled with this gateway (by gateway-sizer): with the gateway's Lease
        held, they are a killed run's (or this run's earlier attempt's). Returns what was deleted."""
        ns = self.scenario.kubernetes.namespace
        selector = label_selector({**MANAGED_BY, GATEWAY_LABEL: self.gateway})
        policies = client.NetworkingV1Api(cluster.api)
        kinds: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
            ("Deployment", cluster.apps.list_namespaced_deployment, cluster.apps.read_namespaced_deployment),
            ("Service", cluster.core.list_namespaced_service, cluster.core.read_namespaced_service),
            ("ConfigMap", cluster.core.list_namespaced_config_map, cluster.core.read_namespaced_config_map),
            ("NetworkPolicy", policies.list_namespaced_network_policy, policies.read_namespaced_network_policy),
        ]
        deleted: list[str] = []
        for kind, list_them, read in kinds:
            found = call(f"list {kind}s in {ns}", list_them, ns, label_selector=selector)
            for obj in found.items:
                name = obj.metadata.name
                record = {"kind": kind, "namespace": ns, "name": name}
                with contextlib.suppress(NotFoundError):
                    delete_created(cluster, record)
                wait_gone(functools.partial(call, "read", read, name, ns), f"{kind} {ns}/{name}")
                if record in self.changes.created:
                    self.changes.created.remove(record)
                    self.changes.save()
                deleted.append(f"{kind} {ns}/{name}")
                if kind == "Deployment" and name.startswith(f"{MASTER}-"):  # its token: the runner lists no Secret
                    secret = {"kind": "Secret", "namespace": ns, "name": TOKEN_SECRET + name.removeprefix(MASTER)}
                    with contextlib.suppress(NotFoundError):
                        delete_created(cluster, secret)
                        deleted.append(f"Secret {ns}/{secret['name']}")
        return deleted
