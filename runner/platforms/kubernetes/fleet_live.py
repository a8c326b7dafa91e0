"""The live shapes: the production gateway itself is measured and changed (`kubernetes.target: live`, run only
with `--live` on the command line too).

- classic: the Envoy DaemonSet/Deployment is patched (resources, Guaranteed QoS, `--concurrency`) and its pods
  resized in place between configurations; its originals are recorded before the first change and put back.
- provisioned: the Gateway's class's ContourDeployment gets Envoy's resources and the provisioner rolls Envoy out
  (provisioned.py); traffic goes through an HTTPRoute of the run's (httproute.py). A Gateway that the
  ContourDeployment comes to size during the run stops it (class_gateways.py).

A live gateway's pods are production's: their replica count is not the run's to set.
"""

from __future__ import annotations

from runner.errors import UsageError
from runner.locust import LocustMaster
from runner.plan import Configuration
from runner.platforms.kubernetes import class_gateways, gateway_object, listeners, provisioned, workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.fleet import EnvoyFleet, TlsObjects
from runner.platforms.kubernetes.httproute import route_to_backend
from runner.platforms.kubernetes.listener_tls import ListenerTls
from runner.platforms.kubernetes.originals import ClusterChanges, Original
from runner.platforms.kubernetes.template_sizing import TemplateFleet, TemplateSizing
from runner.platforms.kubernetes.workloads import Workload
from runner.scenario import Scenario


def _refuse_replicas(scenario_replicas: tuple[int, ...], what: object) -> None:
    if scenario_replicas != (1,):
        raise UsageError(
            f"envoy.replicas: the production gateway's pod count ({what}) is not the run's to set",
            "size a sizing fleet (kubernetes.target: sizing, the default), whose replicas are the run's",
        )


class ClassicLive(TemplateFleet):
    """The production Envoy DaemonSet or Deployment of a classic Contour install, patched by the run."""

    shape = "the production Envoy (live)"
    sizing = False

    def __init__(self, scenario: Scenario, run_id: str, changes: ClusterChanges) -> None:
        super().__init__(scenario, run_id, changes)
        self._workload: Workload | None = None

    @property
    def workload(self) -> Workload:
        if self._workload is None:
            raise UsageError("the production Envoy is not found yet")
        return self._workload

    def find(self, cluster: Cluster) -> None:
        self.production = self._workload = workloads.find(cluster, self.scenario.envoy.workload, "envoy")
        workloads.refuse_foreign_changes(self._workload, workloads.changed_by(cluster, self._workload), self.run_id)
        self.found_labels = dict(workloads.read(cluster, self._workload).spec.selector.match_labels or {})
        _refuse_replicas(self.scenario.envoy.replicas, self._workload)

    def claim(self, cluster: Cluster) -> None:
        workload = self.workload
        workloads.refuse_foreign_changes(workload, workloads.changed_by(cluster, workload), self.run_id)
        original = self.changes.remember(  # kept as recorded first when this run is resumed
            Original(
                workload,
                workloads.get_pod_resources(cluster, workload),
                workloads.replicas(cluster, workload) if workload.kind == "Deployment" else None,
                args=workloads.get_args(cluster, workload),
            )
        )
        self._sizing = TemplateSizing(
            workload,
            original.resources,
            original.args,
            workloads.init_container_names(cluster, workload),
            self.scenario.envoy.guaranteed_qos,
            lambda *what: self._record(cluster, original, *what),
        )

    def _record(self, cluster: Cluster, original: Original, resources: bool, args: bool, _: bool, pods: bool) -> None:
        """Before a change of production: the run's annotation on the workload, and what changes, saved."""
        if not original.marked:
            original.marked = True
            self.changes.save()
            workloads.mark_changed(cluster, original.workload, self.run_id)
        original.resources_changed = original.resources_changed or resources
        original.args_changed = original.args_changed or args
        original.pods_resized = original.pods_resized or pods
        self.changes.save()

    def size(self, cluster: Cluster, config: Configuration, *, fresh: bool) -> bool:
        return self._size(cluster, config, fresh=fresh, replicas=None)

    def production_concurrency(self) -> int | None:
        return workloads.concurrency_in(self._sizing.base_args) if self._sizing else None


class ProvisionedLive(EnvoyFleet):
    """The Envoy Contour's gateway provisioner made for the production Gateway, sized through its class's
    ContourDeployment (a class of its own: provisioned.find refuses one that provisions other Gateways)."""

    shape = "the production Gateway's Envoy (live)"
    sizing = False

    def __init__(self, scenario: Scenario, run_id: str, changes: ClusterChanges) -> None:
        super().__init__(scenario, run_id, changes)
        self.parameters: provisioned.Parameters | None = None

    @property
    def workload(self) -> Workload:
        if self.parameters is None:
            raise UsageError("the production Gateway is not found yet")
        return self.parameters.envoy

    @property
    def guaranteed(self) -> bool:
        return False  # the provisioner sizes the sidecar and the init container: Burstable pods

    def find(self, cluster: Cluster) -> None:
        self.parameters = found = provisioned.find(cluster, self.scenario)
        # the listener that takes the run's HTTPRoute (else one line naming what stops each), and its port
        self.scenario = listeners.routed(cluster, self.scenario)
        workloads.refuse_foreign_changes(found.gateway, gateway_object.changed_by(cluster, found), self.run_id)
        self.production = found.envoy
        self.found_labels = dict(workloads.read(cluster, self.production).spec.selector.match_labels or {})
        _refuse_replicas(self.scenario.envoy.replicas, self.parameters.gateway)

    def claim(self, cluster: Cluster) -> None:
        found = self.parameters
        assert found is not None, "found first"
        workloads.refuse_foreign_changes(found.gateway, gateway_object.changed_by(cluster, found), self.run_id)
        provisioned.record_original(cluster, found)  # read again with the Lease held
        self.parameters = self.changes.remember_parameters(found)  # a resumed run keeps its first record

    def route(self, cluster: Cluster, master: LocustMaster) -> None:
        route_to_backend(cluster, self.scenario, self.run_id, self.changes, master)

    def size(self, cluster: Cluster, config: Configuration, *, fresh: bool) -> bool:
        """Between configurations, before any change of the ContourDeployment: stop the run when a Gateway it sizes
        was created since the start (class_gateways.py); then size Envoy through it (provisioned.size)."""
        assert self.parameters is not None, "claimed first"
        class_gateways.stop_if_joined(cluster, self.parameters)
        sized = workloads.resources_for(config.envoy_cpu_cores, config.envoy_memory_bytes, guaranteed=True)
        timeout_s = self.scenario.kubernetes.rollout_timeout_s
        return provisioned.size(cluster, self.parameters, sized, self.run_id, self.changes.save, timeout_s)

    def threads_flag(self, config: Configuration) -> int | bool | None:
        return False  # the provisioner writes Envoy's args

    def provisioned_by(self) -> object | None:
        return self.parameters

    def tls(self) -> TlsObjects:
        return ListenerTls(self.scenario, self.run_id, self.changes)

    def limit_changes(self) -> str | None:
        return (
            f"rolled out by Contour's gateway provisioner at every change of CPU or memory (set in "
            f"{self.parameters}), each round a rollout"
        )
