"""The kubernetes platform: patch a real Contour/Envoy gateway, run Locust as pods, read Prometheus.

One run per gateway: the run holds the gateway's Lease while it runs (lease.py). Everything it changes is
recorded in the run directory before the change (see originals.py), each changed workload is annotated
with the run, and all of it is undone on exit, on Ctrl-C and on failure; `gateway-sizer restore <run>`
undoes a run that was killed hard, and a new run refuses a gateway that still carries another's changes.
Traffic profiles: TLS profiles go to a Secret and HTTPProxy the run creates (tls.py), and before a TLS or
body profile is measured, a GET through the gateway checks that it is served (gateway_check.py). The
memory model's extra routes are HTTPProxies the run creates and times (routes.py).

A Gateway that Contour's gateway provisioner owns is sized through its ContourDeployment (provisioned.py) and
routed by an HTTPRoute of the run's (httproute.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.errors import PlatformError, UnreachableError, UsageError
from runner.http import is_redacted, redact_url
from runner.locust import WEB_PORT, LoadTarget, LocustMaster
from runner.measure import Capacities
from runner.metrics import Metrics, Selector, Selectors
from runner.model import RouteProgramming
from runner.plan import Configuration
from runner.platforms.base import Endpoints, LocustPrometheusPlatform, refuse_fleet
from runner.platforms.kubernetes import gateway_object, provisioned, workloads
from runner.platforms.kubernetes import nodes as nodefacts
from runner.platforms.kubernetes.connection import Cluster, call, connect
from runner.platforms.kubernetes.gateway_check import check_body, wait_served
from runner.platforms.kubernetes.httproute import route_to_backend
from runner.platforms.kubernetes.lease import LEASE_DURATION_S, GatewayLease, lease_for
from runner.platforms.kubernetes.listener_tls import ListenerTls
from runner.platforms.kubernetes.loadgen import ClusterLocust
from runner.platforms.kubernetes.originals import FILE_NAME, ClusterChanges, Original, undo
from runner.platforms.kubernetes.resize import ResizeUnsupported, live_pods, resize_in_place, running_resources
from runner.platforms.kubernetes.routes import GatewayRoutes
from runner.platforms.kubernetes.tls import GatewayTls, tls_url
from runner.platforms.kubernetes.workloads import Workload
from runner.profiles import TrafficProfile
from runner.quantities import format_cpu, parse_cpu
from runner.scenario import LoadSpec, Scenario


class KubernetesPlatform(LocustPrometheusPlatform):
    """A cluster reached with the kubernetes client; the gateway found by name (default projectcontour/envoy)."""

    name = "kubernetes"
    lease_duration_s = LEASE_DURATION_S

    def __init__(self, scenario: Scenario, run_dir: Path, *, free_ports: bool = False) -> None:
        if free_ports:
            raise UsageError("--free-ports applies to the local platform only", "leave it out on kubernetes")
        refuse_fleet(scenario.envoy.replicas, self.name)
        self.scenario = scenario
        self.run_dir = run_dir
        self.run_id = run_dir.name
        # a resumed run keeps what its first attempt recorded: the originals from before any change
        self.changes = ClusterChanges.open(run_dir / FILE_NAME)
        self.cluster: Cluster | None = None
        self.lease: GatewayLease | None = None
        self.envoy: Workload | None = None
        self._applied: Configuration | None = None  # the configuration the workloads run with now
        self.resize_refused: str | None = None  # why Envoy's pods cannot be resized in place (rollouts instead)
        self.contour: Workload | None = None
        self.backend: Workload | None = None
        self._locust: LocustMaster | None = None
        self._metrics: Metrics | None = None
        self.loadgen = ClusterLocust(scenario, run_dir.name, self.changes)
        self.tls = (ListenerTls if scenario.kubernetes.gateway.provisioned else GatewayTls)(
            scenario, run_dir.name, self.changes
        )
        self.routes = GatewayRoutes(scenario, run_dir.name, self.changes)
        self._programming: RouteProgramming | None = None
        self.parameters: provisioned.Parameters | None = None  # a provisioned gateway's ContourDeployment

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        k8s = self.scenario.kubernetes
        self.cluster = cluster = connect(k8s.kubeconfig, k8s.context)
        self.claim(cluster)
        self._metrics = self._connect_prometheus(cluster)
        self.tls.create(cluster)  # Contour programs it while Locust starts
        self._locust = self.loadgen.start(cluster, self.load_targets())
        self.tls.wait_valid(cluster)
        if self.parameters is not None:
            route_to_backend(cluster, self.scenario, self.run_id, self.changes, self.locust)

    def load_targets(self) -> tuple[str, ...]:
        """Where this run's Locust may send: the gateway, its TLS listener and (for the baseline) the backend."""
        endpoints = self.endpoints
        return endpoints.gateway, tls_url(endpoints.gateway), endpoints.backend

    def claim(self, cluster: Cluster) -> None:
        """Find the workloads, take the gateway's Lease (one line naming the holder when another run is on
        it), refuse a gateway that still carries a killed run's changes, and record the originals."""
        found = provisioned.find(cluster, self.scenario) if self.scenario.kubernetes.gateway.provisioned else None
        self.envoy = found.envoy if found else workloads.find(cluster, self.scenario.envoy.workload, "envoy")
        self.lease = lease_for(cluster, self.scenario, self.run_id, str(self.envoy), self.lease_duration_s)
        self.lease.wait_and_acquire(for_run=self.run_id)  # a resume waits out its killed attempt's Lease
        self.lease.start_renewing()
        if self.scenario.contour.resources:
            self.contour = workloads.find(cluster, self.scenario.contour.workload, "contour")
        self.backend = workloads.find(cluster, self.scenario.backend.workload, "backend")
        for workload in (self.envoy, self.contour, self.backend):
            if workload is not None:
                workloads.refuse_foreign_changes(workload, workloads.changed_by(cluster, workload), self.run_id)
        if found is not None:  # the ContourDeployment as it was: kept as recorded first when resumed
            workloads.refuse_foreign_changes(found.gateway, gateway_object.changed_by(cluster, found), self.run_id)
            provisioned.record_original(cluster, found)  # read again with the Lease held
            self.parameters = self.changes.remember_parameters(found)
        for workload in (self.envoy, self.contour, self.backend):
            if workload is not None:  # kept as recorded first when this run is resumed
                self.changes.remember(
                    Original(
                        workload,
                        workloads.get_pod_resources(cluster, workload),
                        workloads.replicas(cluster, workload) if workload.kind == "Deployment" else None,
                        args=workloads.get_args(cluster, workload) if workload is self.envoy else None,
                    )
                )

    def _connect_prometheus(self, cluster: Cluster) -> Metrics:
        spec = self.scenario.prometheus
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
            proxy = cluster.client(budget_s=spec.retry_s)
            metrics = Metrics(url, session=proxy, scrape_interval_s=spec.scrape_interval_s)
        metrics.check()
        return metrics

    def apply(self, config: Configuration, *, fresh: bool = False) -> None:
        """Resize Envoy's pods in place when only its CPU and memory change from the configuration applied
        before (resize.py), else patch and roll out the workloads; then make the configuration's extra routes
        exist (the memory model's HTTPProxies, routes.py), timing those it creates."""
        self.check()
        cluster = self._cluster()
        if fresh or not self._resized(cluster, config):
            for workload in self.patch(config):
                workloads.wait_rolled_out(cluster, workload, self.scenario.kubernetes.rollout_timeout_s)
        self._applied = config
        self._check_envoy_limit(cluster, config)
        self._check_served(config.profile)
        self._programming = None
        if config.extra_routes or self.routes.existing():
            self._programming = self.routes.ensure(cluster, config.extra_routes, self.locust,
                                                   self.scenario.kubernetes.gateway_url)  # fmt: skip

    def _resized(self, cluster: Cluster, config: Configuration) -> bool:
        """Give the running Envoy pods the configuration's CPU and memory in place, when nothing else changes
        from the configuration applied before and the cluster can; False when a rollout must do it."""
        before, envoy = self._applied, self.envoy
        if before is None or envoy is None or self.resize_refused is not None or self.parameters is not None:
            return False  # a provisioned Envoy's template is its provisioner's: rolled out through it
        same = replace(before, envoy_cpu_cores=config.envoy_cpu_cores, envoy_memory_bytes=config.envoy_memory_bytes)
        if same != replace(config, profile=before.profile, arrivals=before.arrivals):
            return False
        sized = workloads.resources_for(config.envoy_cpu_cores, config.envoy_memory_bytes,
                                        guaranteed=self.scenario.envoy.guaranteed_qos)  # fmt: skip
        original = self.changes.original(envoy)
        if original is not None and not original.pods_resized:  # recorded first: restore puts the pods back
            original.pods_resized = True
            self._mark(cluster, original)
            self.changes.save()
        try:
            resize_in_place(cluster, envoy, sized, self.scenario.kubernetes.rollout_timeout_s)
        except ResizeUnsupported as refused:
            self.resize_refused = str(refused)  # the report says that rounds cost rollouts here
            return False
        return True

    def limit_changes(self) -> str | None:
        if self.parameters is not None:
            return (
                f"rolled out by Contour's gateway provisioner at every change of CPU or memory (set in "
                f"{self.parameters}), each round a rollout"
            )
        if self.resize_refused is not None:
            return f"rolled out at every change of CPU or memory, each round a rollout: {self.resize_refused}"
        return "Envoy's pods resized in place (pods/resize) when only CPU or memory changed, else rolled out"

    def route_programming(self) -> RouteProgramming | None:
        return self._programming

    def _check_served(self, profile: TrafficProfile) -> None:
        """Through the gateway: a TLS profile's virtual host answers, a body profile's file has its size."""
        load = self.scenario.load
        target = self.target(profile, load)
        if profile.tls:
            wait_served(self.locust, LoadTarget(target.url, target.host_header, "/"))
        if profile.body_bytes is not None:
            check_body(self.locust, target, profile.body_bytes, load.accept_encoding)

    def target(self, profile: TrafficProfile, load: LoadSpec) -> LoadTarget:
        """TLS profiles go to port 443 of the gateway's host, with the run's TLS proxy's fqdn as Host (and so
        as SNI); the rest as on any platform."""
        if not profile.tls:
            return super().target(profile, load)
        url = tls_url(self.scenario.kubernetes.gateway_url)
        host = self.tls.fqdn(profile.tls_key)
        return LoadTarget(url, host, profile.path(load.path), profile.new_connection, profile.accept_encoding)

    def patch(self, config: Configuration) -> list[Workload]:
        """Give the workloads the configuration's resources, args and replicas, each change recorded (and
        the workload annotated) before it is made; returns the workloads that roll out."""
        cluster, envoy = self._cluster(), self.envoy
        assert envoy is not None and self.backend is not None
        changed: list[Workload] = []
        if config.contour is not None and self.contour is not None:
            sized = workloads.resources_for(config.contour.cpu_cores, config.contour.memory_bytes)
            if self._set(cluster, self.contour, sized, guaranteed=True):
                changed.append(self.contour)
        guaranteed = self.scenario.envoy.guaranteed_qos
        if self.parameters is not None:  # Envoy's own container has requests = limits; its pod's sidecars are sized
            # by the provisioner
            sized = workloads.resources_for(config.envoy_cpu_cores, config.envoy_memory_bytes, guaranteed=True)
            provisioned.size(cluster, self.parameters, sized, self.run_id, self.changes.save,
                             self.scenario.kubernetes.rollout_timeout_s)  # fmt: skip
        else:
            sized = workloads.resources_for(config.envoy_cpu_cores, config.envoy_memory_bytes, guaranteed=guaranteed)
            recorded = self.changes.original(envoy)
            args = workloads.with_concurrency(recorded.args if recorded else None, config.envoy_concurrency)
            if self._set(cluster, envoy, sized, guaranteed=guaranteed, args=args):
                changed.append(envoy)
        original = self.changes.original(self.backend)
        if original is not None and workloads.replicas(cluster, self.backend) != config.backend_replicas:
            self._mark(cluster, original)
            original.replicas_changed = True
            self.changes.save()
            workloads.scale(cluster, self.backend, config.backend_replicas)
            changed.append(self.backend)
        return changed

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
            self._mark(cluster, original)
            original.resources_changed = original.resources_changed or new_resources
            original.args_changed = original.args_changed or new_args
            self.changes.save()
        workloads.set_pod_resources(cluster, workload, wanted, {workload.container: args} if new_args else None)
        return True

    def _mark(self, cluster: Cluster, original: Original) -> None:
        """Annotate the workload with this run before its first change (recorded before it is made)."""
        if original.marked:
            return
        original.marked = True
        self.changes.save()
        workloads.mark_changed(cluster, original.workload, self.run_id)

    def _check_envoy_limit(self, cluster: Cluster, config: Configuration) -> None:
        """The patch held: every Envoy pod runs with the CPU limit asked (what its kubelet reports, after a
        rollout or a resize in place), and the QoS class and the worker threads are what was asked."""
        assert self.envoy is not None
        for pod in live_pods(cluster, self.envoy):
            limits = (running_resources(cluster, pod, self.envoy.container) or {}).get("limits") or {}
            if "cpu" not in limits or parse_cpu(limits["cpu"]) != config.envoy_cpu_cores:
                raise PlatformError(
                    f"{self.envoy}: pod {pod.metadata.name} runs with CPU limit {limits.get('cpu')}, "
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
        if workers != (config.envoy_concurrency or None):  # 0: Envoy's default, no --concurrency
            raise PlatformError(
                f"{self.envoy} runs with --concurrency {workers or 'unset'} after the patch, "
                f"not {config.envoy_concurrency or 'unset'} (an admission webhook or operator?)"
            )

    def stop(self) -> None:
        try:
            if self.cluster is None or not self.changes.pending:
                return
            if self.scenario.kubernetes.keep_locust:
                names = self.loadgen.names
                kept = (names.master, names.worker, names.configmap)
                self.changes.created = [c for c in self.changes.created if c["name"] not in kept]
            undo(self.cluster, self.changes, self.scenario.kubernetes.rollout_timeout_s)
        finally:
            if self.lease is not None:
                self.lease.release()

    def check(self) -> None:
        """PlatformError once another run has taken the gateway's Lease over."""
        if self.lease is not None:
            self.lease.check()

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
        contour = self.scenario.contour.workload
        ns = self.scenario.kubernetes.namespace
        return Selectors(
            envoy=Selector(envoy.namespace, workloads.pod_name_regex(envoy.name), envoy.container),
            backend=Selector(backend.namespace, workloads.pod_name_regex(backend.name), backend.container),
            generator=Selector(ns, workloads.pod_name_regex(self.loadgen.names.worker), "locust"),
            control_plane=Selector(contour.namespace, workloads.pod_name_regex(contour.name), contour.container),
        )

    @property
    def endpoints(self) -> Endpoints:
        k8s = self.scenario.kubernetes
        backend = self.scenario.backend.workload
        return Endpoints(
            gateway=k8s.gateway_url,
            locust_web_ui=f"kubectl -n {k8s.namespace} port-forward svc/{self.loadgen.names.master} {WEB_PORT}, "
            f"then http://127.0.0.1:{WEB_PORT}",
            prometheus=redact_url(self.metrics.url) if self._metrics else "(not connected)",
            backend=f"http://{backend.name}.{backend.namespace}.svc.cluster.local",
        )

    def capacities(self) -> Capacities:
        chosen = self.scenario.kubernetes.worker_resources
        worker = chosen.cpu_cores if chosen is not None else self.loadgen.worker_cpu_cores
        backend = self.scenario.backend.cpu_cores
        return Capacities(generator_cores=min(1.0, worker) if worker else 1.0, backend_cores=backend)

    def describe(self) -> dict[str, Any]:
        cluster = self._cluster()
        version = call("read the server version", client.VersionApi(cluster.api).get_code)
        facts: dict[str, Any] = {"kubernetes": version.git_version, "api_server": redact_url(cluster.host)}
        try:
            nodes = call("list nodes", cluster.core.list_node)
        except UnreachableError:
            raise
        except UsageError as error:  # the in-cluster runner's RBAC reads no cluster-scoped object
            facts["isolation"] = {"cpu_manager_policy": f"unknown (nodes not readable: {error})", "note": ""}
        else:
            facts["nodes"] = [
                {
                    "name": n.metadata.name,
                    "cpu": n.status.capacity.get("cpu"),
                    "memory": n.status.capacity.get("memory"),
                    "kernel": n.status.node_info.kernel_version,
                    "runtime": n.status.node_info.container_runtime_version,
                    "cpu_model": nodefacts.cpu_model(n.metadata.labels),
                }
                for n in nodes.items
            ]
            facts["isolation"] = nodefacts.isolation(
                {str(n.metadata.name): nodefacts.cpu_manager_policy(cluster, str(n.metadata.name)) for n in nodes.items}
            )
        contour = self.contour
        if contour is None:  # not patched by this run (no contour.resources), but its version still matters
            with contextlib.suppress(UsageError):
                contour = workloads.find(cluster, self.scenario.contour.workload, "contour")
        if self.envoy is not None:  # the shape `recommend` sizes for: its kind as found, also when `auto`
            facts["envoy_workload"] = workloads.facts(cluster, self.envoy, self.changes, self.parameters)
        facts["versions"] = {
            "envoy": _image_tag(cluster, self.envoy),
            "contour": _image_tag(cluster, contour),
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


def restore(run_dir: Path, *, wait: bool = True) -> list[str]:
    """Undo what a run recorded in its run directory; one line per thing done. Holds the gateway's Lease
    meanwhile: waits for it while the run being restored may still hold it (at most until it expires), and
    refuses at once when another run holds it."""
    from runner.scenario import load_scenario

    changes = ClusterChanges.load(run_dir)
    if not changes.pending:
        return [f"nothing to restore: {run_dir.name} left no changes behind"]
    scenario = load_scenario(str(run_dir / "scenario.yaml"))
    k8s = scenario.kubernetes
    cluster = connect(k8s.kubeconfig, k8s.context)
    envoy = scenario.envoy.workload
    lease = lease_for(cluster, scenario, run_dir.name, f"the gateway {envoy.namespace}/{envoy.name}")
    lines: list[str] = []
    waited = lease.wait_and_acquire(for_run=run_dir.name)
    if waited is not None:
        lines.append(f"waited for run {run_dir.name}'s {lease} to expire (it was killed without releasing it)")
    try:
        lines += undo(cluster, changes, k8s.rollout_timeout_s, wait=wait)
    finally:
        lease.release()
    return lines
