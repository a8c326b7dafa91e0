"""The kubernetes platform: patch a real Contour/Envoy gateway, run Locust as pods, read Prometheus.

One run per gateway: the run holds the gateway's Lease while it runs (lease.py). Everything it changes is
recorded in the run directory before the change (see originals.py), each changed workload is annotated
with the run, and all of it is undone on exit, on Ctrl-C and on failure; `gateway-sizer restore <run>`
undoes a run that was killed hard, and a new run refuses a gateway that still carries another's changes.
Traffic profiles: TLS profiles go to a Secret and HTTPProxy the run creates (tls.py), and before a TLS or
body profile is measured, a GET through the gateway checks that it is served (gateway_check.py). The
memory model's extra routes are HTTPProxies the run creates and times (routes.py).

What is measured is the run's fleet (fleet.py), one object per install shape: by default a sizing fleet beside the
production gateway, which it only reads (sizing_copy.py for a classic install, sizing_gateway.py for a Gateway of
Contour's provisioner); with `kubernetes.target: live` and `--live`, the production gateway itself (fleet_live.py).
Before anything changes the platform checks what preflight.py checks (a live gateway serving traffic is refused).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.errors import PlatformError, UnreachableError, UsageError
from runner.http import redact_url
from runner.locust import WEB_PORT, LoadTarget, LocustMaster
from runner.measure import Capacities
from runner.metrics import Metrics, Selector, Selectors
from runner.model import RouteProgramming
from runner.plan import Configuration
from runner.platforms.base import Endpoints, LocustPrometheusPlatform
from runner.platforms.kubernetes import nodes as nodefacts
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster, call, connect
from runner.platforms.kubernetes.gateway_check import check_body, wait_served
from runner.platforms.kubernetes.lease import LEASE_DURATION_S, GatewayLease, lease_for
from runner.platforms.kubernetes.loadgen import ClusterLocust
from runner.platforms.kubernetes.originals import FILE_NAME, ClusterChanges, Original, undo
from runner.platforms.kubernetes.preflight import check_safe, connect_prometheus
from runner.platforms.kubernetes.routes import GatewayRoutes
from runner.platforms.kubernetes.shapes import fleet_for
from runner.platforms.kubernetes.tls import tls_url
from runner.platforms.kubernetes.workloads import Workload
from runner.profiles import TrafficProfile
from runner.scenario import LoadSpec, Scenario


class KubernetesPlatform(LocustPrometheusPlatform):
    """A cluster reached with the kubernetes client; the gateway found by name (default projectcontour/envoy)."""

    name = "kubernetes"
    lease_duration_s = LEASE_DURATION_S

    def __init__(self, scenario: Scenario, run_dir: Path, *, free_ports: bool = False, live: bool = False) -> None:
        if free_ports:
            raise UsageError("--free-ports applies to the local platform only", "leave it out on kubernetes")
        self.scenario = scenario
        self.run_dir = run_dir
        self.run_id = run_dir.name
        # a resumed run keeps what its first attempt recorded: the originals from before any change
        self.changes = ClusterChanges.open(run_dir / FILE_NAME)
        self.fleet = fleet_for(scenario, self.run_id, self.changes, live=live)  # refuses live without --live
        self.cluster: Cluster | None = None
        self.lease: GatewayLease | None = None
        self._applied: Configuration | None = None  # the configuration the workloads run with now
        self.contour: Workload | None = None
        self.backend: Workload | None = None
        self._locust: LocustMaster | None = None
        self._metrics: Metrics | None = None
        self._found = False
        self.loadgen = ClusterLocust(scenario, run_dir.name, self.changes, self.fleet.gateway_url)
        self.tls = self.fleet.tls()
        self.routes = GatewayRoutes(scenario, run_dir.name, self.changes)
        self._programming: RouteProgramming | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        k8s = self.scenario.kubernetes
        self.cluster = cluster = connect(k8s.kubeconfig, k8s.context)
        self._find(cluster)
        self.loadgen.gateway_url = self.fleet.gateway_url  # as found (a Gateway's listener port)
        self._metrics = connect_prometheus(cluster, self.scenario)
        check_safe(cluster, self.metrics, self.fleet)  # before the first change: a live gateway's own traffic
        self.fleet.read_production(self.metrics)  # production's threads, before the fleet is made
        self.claim(cluster)
        self.tls.create(cluster)  # Contour programs it while Locust starts
        self._locust = self.loadgen.start(cluster, self.load_targets(), self.fleet.pod_labels())
        self.tls.wait_valid(cluster)
        self.fleet.route(cluster, self.locust)

    def _find(self, cluster: Cluster) -> None:
        if not self._found:
            self.fleet.find(cluster)
            self._found = True

    def load_targets(self) -> tuple[str, ...]:
        """Where this run's Locust may send: the gateway, its TLS listener and (for the baseline) the backend."""
        endpoints = self.endpoints
        return endpoints.gateway, tls_url(endpoints.gateway), endpoints.backend

    def claim(self, cluster: Cluster) -> None:
        """Find the gateway, take its Lease (one line naming the holder when another run is on it), refuse a
        gateway that still carries a killed run's changes, record the originals of what the run changes and
        create the run's fleet (fleet.claim)."""
        self._find(cluster)
        gateway = str(self.fleet.production)
        self.lease = lease_for(cluster, self.scenario, self.run_id, gateway, self.lease_duration_s)
        if self.lease.wait_and_acquire(for_run=self.run_id) is not None:  # a resume: its killed attempt's Lease
            print(f"gateway-sizer: {self.lease.waited_line(self.run_id)}", file=sys.stderr)
        self.lease.start_renewing()
        if self.scenario.contour.resources:
            self.contour = workloads.find(cluster, self.scenario.contour.workload, "contour")
        self.backend = workloads.find(cluster, self.scenario.backend.workload, "backend")
        testbed = [workload for workload in (self.contour, self.backend) if workload is not None]
        for workload in testbed:
            workloads.refuse_foreign_changes(workload, workloads.changed_by(cluster, workload), self.run_id)
        self.fleet.claim(cluster)
        for workload in testbed:  # kept as recorded first when this run is resumed
            self.changes.remember(
                Original(
                    workload,
                    workloads.get_pod_resources(cluster, workload),
                    workloads.replicas(cluster, workload) if workload.kind == "Deployment" else None,
                )
            )

    def apply(self, config: Configuration, *, fresh: bool = False) -> None:
        """Give the fleet the configuration's resources, replicas and threads (in place where only CPU and memory
        change, fleet.py), Contour and the backend theirs; return once every Envoy pod serves; then make the
        configuration's extra routes exist (the memory model's HTTPProxies, routes.py), timing those it creates."""
        self.check()
        cluster = self._cluster()
        rolling = self.patch(config)
        self.fleet.apply(cluster, config, self.locust, self.metrics, fresh=fresh)
        for workload in rolling:
            workloads.wait_rolled_out(cluster, workload, self.scenario.kubernetes.rollout_timeout_s)
        self._applied = config
        self._check_served(config.profile)
        self._programming = None
        if config.extra_routes or self.routes.existing():
            self._programming = self.routes.ensure(cluster, config.extra_routes, self.locust, self.fleet.gateway_url)

    def limit_changes(self) -> str | None:
        return self.fleet.limit_changes()

    def envoy_threads(self, config: Configuration) -> int | None:
        return self.fleet.threads(self.metrics, config)

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
        url = tls_url(self.fleet.gateway_url)
        host = self.tls.fqdn(profile.tls_key)
        return LoadTarget(url, host, profile.path(load.path), profile.new_connection, profile.accept_encoding)

    def patch(self, config: Configuration) -> list[Workload]:
        """Give Contour (a live run's only) and the backend the configuration's resources and replicas, each change
        recorded (and the workload annotated) before it is made; returns the workloads that roll out. Envoy is the
        fleet's (fleet.py)."""
        cluster = self._cluster()
        assert self.backend is not None
        changed: list[Workload] = []
        contour = self.contour
        if config.contour is not None and contour is not None:
            original = self.changes.original(contour)
            sized = workloads.resources_for(config.contour.cpu_cores, config.contour.memory_bytes)
            others = original.resources if original else {}
            wanted: dict[str, dict[str, Any] | None] = {contour.container: sized}
            wanted.update({name: workloads.guaranteed(r) for name, r in others.items() if name != contour.container})
            current = workloads.get_pod_resources(cluster, contour)
            if any(current.get(name) != value for name, value in wanted.items()):
                self._record(cluster, contour, resources=True)
                workloads.set_pod_resources(cluster, contour, wanted)
                changed.append(contour)
        original = self.changes.original(self.backend)
        if original is not None and workloads.replicas(cluster, self.backend) != config.backend_replicas:
            self._record(cluster, self.backend, replicas=True)
            workloads.scale(cluster, self.backend, config.backend_replicas)
            changed.append(self.backend)
        return changed

    def _record(self, cluster: Cluster, workload: Workload, *, resources: bool = False, replicas: bool = False) -> None:
        """Before a change of a test-bed workload: annotate it with this run and record what changes."""
        original = self.changes.original(workload)
        if original is None:
            return
        if not original.marked:
            original.marked = True
            self.changes.save()
            workloads.mark_changed(cluster, workload, self.run_id)
        original.resources_changed = original.resources_changed or resources
        original.replicas_changed = original.replicas_changed or replicas
        self.changes.save()

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
        """StopRun once another run has taken the gateway's Lease over (the sweep ends at once)."""
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
        """Envoy: exactly the fleet's pods as found after the last change (no other workload's, whatever its
        name); the rest by their workloads' pod names."""
        backend, contour = self.scenario.backend.workload, self.fleet.view.contour.workload
        ns = self.scenario.kubernetes.namespace
        return Selectors(
            envoy=self.fleet.selector(),
            backend=Selector(backend.namespace, workloads.pod_name_regex(backend.name), backend.container),
            generator=Selector(ns, workloads.pod_name_regex(self.loadgen.names.worker), "locust"),
            control_plane=Selector(contour.namespace, workloads.pod_name_regex(contour.name), contour.container),
        )

    @property
    def endpoints(self) -> Endpoints:
        k8s = self.scenario.kubernetes
        backend = self.scenario.backend.workload
        return Endpoints(
            gateway=self.fleet.gateway_url,
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
                contour = workloads.find(cluster, self.fleet.view.contour.workload, "contour")
        production = self.fleet.production
        if production is not None:  # the shape `recommend` sizes for: production's, its kind as found
            facts["envoy_workload"] = workloads.facts(cluster, production, self.changes, self.fleet.provisioned_by())
        facts["fleet"] = self.fleet.describe()
        facts["versions"] = {
            "envoy": workloads.image_of(cluster, self.fleet.workload),
            "contour": workloads.image_of(cluster, contour),
            "nginx": workloads.image_of(cluster, self.backend),
        }
        return facts


def restore(run_dir: Path, *, wait: bool = True) -> list[str]:
    """Undo what a run recorded in its run directory; one line per thing done. Holds the gateway's Lease
    meanwhile: waits for it while the run being restored may still hold it (at most until it expires; not at all
    once the pod it ran in, or the process it ran as on this machine, has ended), and refuses at once when another
    run holds it."""
    import yaml

    from runner.scenario import parse_scenario

    changes = ClusterChanges.load(run_dir)
    if not changes.pending:
        return [f"nothing to restore: {run_dir.name} left no changes behind"]
    source = run_dir / "scenario.yaml"
    raw = yaml.safe_load(source.read_text())
    if isinstance(raw, dict) and isinstance(raw.get("load"), dict):
        # restore runs no load: a Job's scenario names its locustfile in the runner image, absent here
        raw["load"].pop("locustfile", None)
    scenario = parse_scenario(raw, source=str(source))
    k8s = scenario.kubernetes
    cluster = connect(k8s.kubeconfig, k8s.context)
    envoy = scenario.envoy.workload
    lease = lease_for(cluster, scenario, run_dir.name, f"the gateway {envoy.namespace}/{envoy.name}")
    lines: list[str] = []
    if lease.wait_and_acquire(for_run=run_dir.name) is not None:
        lines.append(lease.waited_line(run_dir.name))
    try:
        lines += undo(cluster, changes, k8s.rollout_timeout_s, wait=wait)
    finally:
        lease.release()
    return lines
