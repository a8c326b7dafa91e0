"""The kubernetes platform: patch a real Contour/Envoy gateway, run Locust as pods, read Prometheus.

Everything it changes is recorded in the run directory before the change (see originals.py) and undone
on exit, on Ctrl-C and on failure; `gateway-sizer restore <run>` undoes a run that was killed hard.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.errors import PlatformError, UsageError
from runner.locust import WEB_PORT, LocustMaster, LocustOptions
from runner.measure import Capacities
from runner.metrics import Metrics, Selector, Selectors
from runner.plan import Configuration
from runner.platforms.base import Endpoints, Platform
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call, connect
from runner.platforms.kubernetes.loadgen import CONFIGMAP, MANAGED_BY, MASTER, WORKER, LocustDeployment, create_locust
from runner.platforms.kubernetes.originals import FILE_NAME, ClusterChanges, Original, delete_created, undo
from runner.platforms.kubernetes.workloads import Workload
from runner.quantities import format_cpu, parse_cpu, parse_memory
from runner.scenario import Scenario

DEFAULT_LOCUST_IMAGE = "locustio/locust:2.47.0"
DEFAULT_WORKER_CPU, DEFAULT_WORKER_MEMORY = "1", "512Mi"
DEFAULTS_CONFIGMAP = "gateway-sizer-defaults"  # optional, in the test namespace: a cluster's own defaults
WORKERS_TIMEOUT_S = 180.0
ENDPOINTS_TIMEOUT_S = 120.0


class KubernetesPlatform(Platform):
    """A cluster reached with the kubernetes client; the gateway found by name (default projectcontour/envoy)."""

    name = "kubernetes"

    def __init__(self, scenario: Scenario, run_dir: Path, **_options: object) -> None:
        self.scenario = scenario
        self.run_dir = run_dir
        self.changes = ClusterChanges(run_dir / FILE_NAME)
        self.cluster: Cluster | None = None
        self.envoy: Workload | None = None
        self.contour: Workload | None = None
        self.backend: Workload | None = None
        self._locust: LocustMaster | None = None
        self._metrics: Metrics | None = None
        self._worker_cpu: float | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        k8s = self.scenario.kubernetes
        self.cluster = cluster = connect(k8s.kubeconfig, k8s.context)
        self.envoy = workloads.find(cluster, self.scenario.envoy.workload, "envoy")
        if self.scenario.contour.resources:
            self.contour = workloads.find(cluster, self.scenario.contour.workload, "contour")
        self.backend = workloads.find(cluster, self.scenario.backend.workload, "backend")
        self._metrics = self._connect_prometheus(cluster)
        for workload in (self.envoy, self.contour, self.backend):
            if workload is not None:
                self.changes.remember(
                    Original(
                        workload,
                        workloads.get_pod_resources(cluster, workload),
                        workloads.replicas(cluster, workload) if workload.kind == "Deployment" else None,
                        args=workloads.get_args(cluster, workload) if workload is self.envoy else None,
                    )
                )
        self._start_locust(cluster)

    def _connect_prometheus(self, cluster: Cluster) -> Metrics:
        spec = self.scenario.prometheus
        if spec.url:
            metrics = Metrics(spec.url, scrape_interval_s=spec.scrape_interval_s)
        else:
            service = spec.service
            url = cluster.service_proxy_url(service.namespace, service.name, service.port)
            metrics = Metrics(url, session=cluster.session(), scrape_interval_s=spec.scrape_interval_s)
        metrics.check()
        return metrics

    def _defaults(self, cluster: Cluster) -> dict[str, str]:
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

    def _start_locust(self, cluster: Cluster) -> None:
        k8s, load = self.scenario.kubernetes, self.scenario.load
        defaults = self._defaults(cluster)
        spec = LocustDeployment(
            namespace=k8s.namespace,
            image=k8s.locust_image or defaults.get("locust-image", DEFAULT_LOCUST_IMAGE),
            pull_policy=k8s.image_pull_policy or defaults.get("image-pull-policy", "IfNotPresent"),
            user_class=load.locust_user_class,
            locustfile=load.locustfile,
            options=LocustOptions.from_load(load),
            gateway_url=k8s.gateway_url,
            workers=load.workers,
            worker_resources=self._worker_resources(defaults),
            run_id=self.run_dir.name,
        )
        self._remove_leftover_locust(cluster)
        create_locust(cluster, spec, self.changes)
        master = Workload("Deployment", k8s.namespace, MASTER, "locust")
        workloads.wait_rolled_out(cluster, master, k8s.rollout_timeout_s)
        url = cluster.service_proxy_url(k8s.namespace, MASTER, WEB_PORT)
        self._locust = LocustMaster(url, session=cluster.session())
        try:
            self._locust.wait_for_workers(load.workers, WORKERS_TIMEOUT_S)
        except Exception as error:
            worker = Workload("Deployment", k8s.namespace, WORKER, "locust")
            detail = workloads.stuck_pod(cluster, worker, workloads.read(cluster, worker))
            raise PlatformError(f"{error}; {detail}") from None

    def _worker_resources(self, defaults: dict[str, str]) -> dict[str, Any]:
        """The scenario's worker resources (Guaranteed), else the cluster's defaults, else 1 CPU / 512Mi."""
        chosen = self.scenario.kubernetes.worker_resources
        if chosen is not None:
            return workloads.resources_for(chosen.cpu_cores, chosen.memory_bytes, guaranteed=True)
        cpu = parse_cpu(defaults.get("worker-cpu", DEFAULT_WORKER_CPU))
        memory = parse_memory(defaults.get("worker-memory", DEFAULT_WORKER_MEMORY))
        resources = workloads.resources_for(cpu, memory, guaranteed=True)
        if "worker-cpu-request" in defaults:  # a small node: request less, keep the limit the guards judge by
            resources["requests"]["cpu"] = defaults["worker-cpu-request"]
        self._worker_cpu = cpu
        return resources

    def _remove_leftover_locust(self, cluster: Cluster) -> None:
        """Objects with our names from an earlier run that was killed: ours to delete, anyone else's to keep."""
        ns = self.scenario.kubernetes.namespace
        readers = [
            ("ConfigMap", CONFIGMAP, cluster.core.read_namespaced_config_map),
            ("Deployment", MASTER, cluster.apps.read_namespaced_deployment),
            ("Service", MASTER, cluster.core.read_namespaced_service),
            ("Deployment", WORKER, cluster.apps.read_namespaced_deployment),
        ]
        for kind, name, read in readers:
            try:
                obj = call(f"read {kind} {ns}/{name}", read, name, ns)
            except NotFoundError:
                continue
            labels = obj.metadata.labels or {}
            if any(labels.get(k) != v for k, v in MANAGED_BY.items()):
                raise UsageError(
                    f"{kind} {ns}/{name} exists and was not made by gateway-sizer",
                    "use another kubernetes.namespace or remove it",
                )
            delete_created(cluster, {"kind": kind, "namespace": ns, "name": name})
            _wait_gone(lambda read=read, name=name: call("read", read, name, ns), f"{kind} {ns}/{name}")

    def apply(self, config: Configuration) -> None:
        cluster, envoy = self._cluster(), self.envoy
        assert envoy is not None and self.backend is not None
        timeout = self.scenario.kubernetes.rollout_timeout_s
        changed: list[Workload] = []
        if config.contour is not None and self.contour is not None:
            sized = workloads.resources_for(config.contour.cpu_cores, config.contour.memory_bytes)
            if self._set(cluster, self.contour, sized, guaranteed=True):
                changed.append(self.contour)
        guaranteed = self.scenario.envoy.guaranteed_qos
        sized = workloads.resources_for(config.envoy_cpu_cores, config.envoy_memory_bytes, guaranteed=guaranteed)
        recorded = self.changes.original(envoy)
        args = workloads.with_concurrency(recorded.args if recorded else None, config.envoy_concurrency)
        if self._set(cluster, envoy, sized, guaranteed=guaranteed, args=args):
            changed.append(envoy)
        original = self.changes.original(self.backend)
        if original is not None and workloads.replicas(cluster, self.backend) != config.backend_replicas:
            original.replicas_changed = True
            self.changes.save()
            workloads.scale(cluster, self.backend, config.backend_replicas)
            changed.append(self.backend)
        for workload in changed:
            workloads.wait_rolled_out(cluster, workload, timeout)
        self._check_envoy_limit(cluster, config)

    def _set(
        self,
        cluster: Cluster,
        workload: Workload,
        sized: dict[str, Any],
        *,
        guaranteed: bool,
        args: list[str] | None = None,
    ) -> bool:
        """Give the sized container `sized` (and `args`, when given); for Guaranteed QoS, the pod's other
        containers limits = requests, and its init containers the sized container's resources: they run
        before it, so the pod requests no more, and a 10m init container would start the pod slowly.
        False when it already had them (no rollout)."""
        original = self.changes.original(workload)
        current = workloads.get_pod_resources(cluster, workload)
        wanted: dict[str, dict[str, Any] | None] = {workload.container: sized}
        if guaranteed and original is not None:
            init = workloads.init_container_names(cluster, workload)
            for name, resources in original.resources.items():
                if name != workload.container:
                    wanted[name] = sized if name in init else workloads.guaranteed(resources)
        new_resources = any(current.get(name) != value for name, value in wanted.items())
        new_args = args is not None and workloads.get_args(cluster, workload) != args
        if not new_resources and not new_args:
            return False
        if original is not None:  # recorded before the change, so a crash can be undone
            original.resources_changed = original.resources_changed or new_resources
            original.args_changed = original.args_changed or new_args
            self.changes.save()
        workloads.set_pod_resources(cluster, workload, wanted, {workload.container: args} if new_args else None)
        return True

    def _check_envoy_limit(self, cluster: Cluster, config: Configuration) -> None:
        """The patch held: the CPU limit, the QoS class and the worker threads are what was asked."""
        assert self.envoy is not None
        limits = (workloads.get_resources(cluster, self.envoy) or {}).get("limits", {})
        if limits.get("cpu") != format_cpu(config.envoy_cpu_cores):
            raise PlatformError(
                f"{self.envoy} has CPU limit {limits.get('cpu')} after the patch, "
                f"not {format_cpu(config.envoy_cpu_cores)} (an admission webhook or operator?)"
            )
        if self.scenario.envoy.guaranteed_qos:
            for pod, qos in workloads.pod_qos_classes(cluster, self.envoy).items():
                if qos != "Guaranteed":
                    raise PlatformError(
                        f"{self.envoy}: pod {pod} is {qos}, not Guaranteed, after the patch",
                        "set envoy.guaranteed_qos: false in the scenario to measure it as it is",
                    )
        workers = workloads.concurrency_in(workloads.get_args(cluster, self.envoy))
        if workers != config.envoy_concurrency:
            raise PlatformError(
                f"{self.envoy} runs with --concurrency {workers} after the patch, "
                f"not {config.envoy_concurrency} (an admission webhook or operator?)"
            )

    def stop(self) -> None:
        if self.cluster is None or not self.changes.pending:
            return
        if self.scenario.kubernetes.keep_locust:
            self.changes.created = [c for c in self.changes.created if c["name"] not in (MASTER, WORKER, CONFIGMAP)]
        undo(self.cluster, self.changes, self.scenario.kubernetes.rollout_timeout_s)

    def _cluster(self) -> Cluster:
        if self.cluster is None:
            raise PlatformError("the kubernetes platform is not started")
        return self.cluster

    # -- what the engine reads --------------------------------------------------------------------
    @property
    def locust(self) -> LocustMaster:
        if self._locust is None:
            raise PlatformError("the kubernetes platform is not started")
        return self._locust

    @property
    def metrics(self) -> Metrics:
        if self._metrics is None:
            raise PlatformError("the kubernetes platform is not started")
        return self._metrics

    @property
    def selectors(self) -> Selectors:
        envoy, backend = self.scenario.envoy.workload, self.scenario.backend.workload
        ns = self.scenario.kubernetes.namespace
        return Selectors(
            envoy=Selector(envoy.namespace, f"{envoy.name}-.*", envoy.container),
            backend=Selector(backend.namespace, f"{backend.name}-.*", backend.container),
            generator=Selector(ns, f"{WORKER}-.*", "locust"),
        )

    @property
    def endpoints(self) -> Endpoints:
        k8s = self.scenario.kubernetes
        backend = self.scenario.backend.workload
        return Endpoints(
            gateway=k8s.gateway_url,
            locust_web_ui=f"kubectl -n {k8s.namespace} port-forward svc/{MASTER} {WEB_PORT}, then http://127.0.0.1:{WEB_PORT}",
            prometheus=self.metrics.url if self._metrics else "(not connected)",
            backend=f"http://{backend.name}.{backend.namespace}.svc.cluster.local",
        )

    def capacities(self) -> Capacities:
        chosen = self.scenario.kubernetes.worker_resources
        worker = chosen.cpu_cores if chosen is not None else self._worker_cpu
        backend = self.scenario.backend.cpu_cores
        return Capacities(generator_cores=min(1.0, worker) if worker else 1.0, backend_cores=backend)

    def describe(self) -> dict[str, Any]:
        cluster = self._cluster()
        version = call("read the server version", client.VersionApi(cluster.api).get_code)
        facts: dict[str, Any] = {"kubernetes": version.git_version, "api_server": cluster.host}
        nodes = call("list nodes", cluster.core.list_node)
        facts["nodes"] = [
            {
                "name": n.metadata.name,
                "cpu": n.status.capacity.get("cpu"),
                "memory": n.status.capacity.get("memory"),
                "kernel": n.status.node_info.kernel_version,
                "runtime": n.status.node_info.container_runtime_version,
            }
            for n in nodes.items
        ]
        facts["versions"] = {
            "envoy": _image_tag(cluster, self.envoy),
            "contour": _image_tag(cluster, self.contour),
            "nginx": _image_tag(cluster, self.backend),
        }
        return facts


def _image_tag(cluster: Cluster, workload: Workload | None) -> str | None:
    if workload is None:
        return None
    obj = workloads.read(cluster, workload)
    for container in obj.spec.template.spec.containers:
        if container.name == workload.container:
            return str(container.image)
    return None


def _wait_gone(read: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            read()
        except NotFoundError:
            return
        time.sleep(0.5)
    raise PlatformError(f"{what} is still there {timeout_s:.0f} s after deleting it")
