"""The Envoy pods a run measures, as one object: which pods, how their resources, replicas and worker threads
change, how they are read, waited on (every pod ready and serving) and put back.

One implementation per install shape, chosen once (`fleet_for`):

- classic, sizing (sizing_copy.py): a Deployment cloned from the production Envoy's pod template, with a
  ClusterIP Service of its own;
- provisioned, sizing (sizing_gateway.py): a GatewayClass, a ContourDeployment copied from the user's and a
  Gateway of the run's own;
- classic, live (fleet_live.py): the production Envoy DaemonSet/Deployment itself, patched;
- provisioned, live (fleet_live.py): the production Gateway's Envoy, sized through its class's ContourDeployment.

The sizing shapes (the default, `kubernetes.target: sizing`) only read production's objects; everything they
create is recorded before it exists (created.py) and deleted on every exit path and by `gateway-sizer restore`.
The live shapes record production's originals before the first change (originals.py) and put them back.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol

from runner.errors import PlatformError
from runner.locust import LoadTarget, LocustMaster
from runner.metrics import ENVOY_LISTENERS, Metrics, Selector
from runner.plan import Configuration
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.gateway_check import fetch
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.resize import live_pods, running_resources
from runner.platforms.kubernetes.workloads import Workload
from runner.profiles import TlsKey
from runner.quantities import format_cpu, parse_cpu
from runner.scenario import Scenario
from runner.scenario.threads import ENVOY_DEFAULT_CONCURRENCY, PRODUCTION_CONCURRENCY

SERVING_TIMEOUT_S = 120.0  # for every new pod to serve a request, counted by Prometheus
SERVING_POLL_S = 0.5  # a GET through the fleet and one Prometheus query; Prometheus scrapes every 1-2 s
# Envoy's 2xx responses per pod on the listeners the sweep reads: a pod serves the load once this is above 0. Its
# request counter alone is not enough: it counts the 404s of a pod Contour has not yet given the run's route, and a
# scrape without `usedonly` publishes it at 0 before any request (nothing but the run's load reaches the fleet's pods)
SERVED_BY_POD = (
    "sum by (pod) (envoy_http_downstream_rq_xx{{{sel}," + ENVOY_LISTENERS + ',envoy_response_code_class="2"}})'
)
SCRAPED_BY_POD = "max by (pod) (envoy_http_downstream_rq_total{{{sel}," + ENVOY_LISTENERS + "}})"
THREADS_BY_POD = "max by (pod) (envoy_server_concurrency{{{sel}}})"  # Envoy's worker threads, from its own stats


def pods_regex(names: list[str]) -> str:
    """A Prometheus regex matching exactly these pod names (and no pod of another workload)."""
    return "|".join(name.replace(".", "\\.") for name in sorted(names)) or "^$"


class EnvoyFleet(ABC):
    """The Envoy pods of one run and how they change. `workload` is where the pods come from; `view` is the
    scenario as the run's own parts see it (the gateway they load, its URL, the Envoy workload)."""

    shape: ClassVar[str]  # "classic sizing fleet", ...
    sizing: ClassVar[bool]  # a copy of the run's own (True), or the production gateway (False)

    def __init__(self, scenario: Scenario, run_id: str, changes: ClusterChanges) -> None:
        self.scenario = scenario
        self.run_id = run_id
        self.changes = changes
        self.applied: Configuration | None = None  # what the pods run now
        self.pod_names: list[str] = []  # the pods measured, as found after the last change
        self.resize_refused: str | None = None  # why the pods cannot be resized in place (rollouts instead)
        self.production: Workload | None = None  # the production gateway's Envoy, once found (the live shapes': theirs)
        self.found_labels: dict[str, str] = {}  # the live shapes: the labels of production's pods, once found

    # -- names --------------------------------------------------------------------------------------
    @property
    @abstractmethod
    def workload(self) -> Workload:
        """The DaemonSet or Deployment whose pods are measured."""

    @property
    def view(self) -> Scenario:
        """The scenario with the fleet's gateway, Envoy workload and URL in place of production's (the live shapes:
        the scenario itself)."""
        return self.scenario

    @property
    def gateway_url(self) -> str:
        return self.view.kubernetes.gateway_url

    def __str__(self) -> str:
        return f"{self.shape} ({self.workload})"

    # -- lifecycle ------------------------------------------------------------------------------------
    @abstractmethod
    def find(self, cluster: Cluster) -> None:
        """Read the production gateway's objects and check them; changes nothing (before the Lease is held)."""

    @abstractmethod
    def claim(self, cluster: Cluster) -> None:
        """With the gateway's Lease held: refuse a gateway that carries another run's changes, record what the
        run will change (live) or create the run's own objects, each recorded before it exists (sizing)."""

    def route(self, cluster: Cluster, master: LocustMaster) -> None:  # noqa: B027 - optional hook
        """Make the load's Host header reach the backend through the fleet (a Gateway's: an HTTPRoute)."""

    @abstractmethod
    def size(self, cluster: Cluster, config: Configuration, *, fresh: bool) -> bool:
        """Give the pods the configuration's resources, replicas and threads: in place where only CPU and memory
        change and the cluster can, else by a rollout. Returns whether new pods came (they must show they serve)."""

    def apply(
        self, cluster: Cluster, config: Configuration, master: LocustMaster, metrics: Metrics, *, fresh: bool = False
    ) -> None:
        """Size the pods for `config`, wait until every pod is ready and serving, and check that each runs what
        was asked."""
        new_pods = self.size(cluster, config, fresh=fresh)
        self.applied = config
        self.pod_names = [p.metadata.name for p in live_pods(cluster, self.workload)]
        if new_pods:
            wait_serving(self, master, metrics, LoadTarget(self.gateway_url, self.scenario.load.host_header, "/"))
        self.verify(cluster, config)

    def verify(self, cluster: Cluster, config: Configuration) -> None:
        """Every pod runs what was asked: the CPU limit (what its kubelet reports), the QoS class, the worker
        threads, and (a Deployment) the pod count."""
        pods = live_pods(cluster, self.workload)
        for pod in pods:
            limits = (running_resources(cluster, pod, self.workload.container) or {}).get("limits") or {}
            if "cpu" not in limits or parse_cpu(limits["cpu"]) != config.envoy_cpu_cores:
                raise PlatformError(
                    f"{self.workload}: pod {pod.metadata.name} runs with CPU limit {limits.get('cpu')}, "
                    f"not {format_cpu(config.envoy_cpu_cores)} (an admission webhook or operator?)"
                )
        if self.workload.kind == "Deployment" and len(pods) != config.envoy_replicas:
            raise PlatformError(f"{self.workload} runs {len(pods)} pod(s), not {config.envoy_replicas}")
        if self.guaranteed:
            for name, qos in workloads.pod_qos_classes(cluster, self.workload).items():
                if qos != "Guaranteed":
                    raise PlatformError(
                        f"{self.workload}: pod {name} is {qos}, not Guaranteed, after the patch",
                        "set envoy.guaranteed_qos: false in the scenario to measure it as it is",
                    )
        wanted = self.threads_flag(config)
        if wanted is not False:
            workers = workloads.concurrency_in(workloads.get_args(cluster, self.workload))
            if workers != wanted:
                raise PlatformError(
                    f"{self.workload} runs with --concurrency {workers or 'unset'} after the patch, "
                    f"not {wanted or 'unset'} (an admission webhook or operator?)"
                )

    @property
    def guaranteed(self) -> bool:
        return self.scenario.envoy.guaranteed_qos

    def threads_flag(self, config: Configuration) -> int | bool | None:
        """The `--concurrency` Envoy's args must carry for `config` (None: none), or False where the run does not
        set Envoy's args (a provisioned Envoy's are its provisioner's)."""
        return config.envoy_concurrency or None

    def pod_labels(self) -> tuple[str, dict[str, str]]:
        """The namespace and labels of the fleet's pods (the Locust workers keep off their nodes)."""
        return self.workload.namespace, dict(self.found_labels)

    def selector(self) -> Selector:
        """Exactly the fleet's pods, as found after the last change."""
        workload = self.workload
        return Selector(workload.namespace, pods_regex(self.pod_names), workload.container)

    def threads(self, metrics: Metrics, config: Configuration) -> int | None:
        """The worker threads the pods run for `config`: the number asked, else what Envoy reports of itself
        (`server.concurrency`; Envoy's own count where nothing sets it), None when it cannot be read."""
        if config.envoy_concurrency not in (ENVOY_DEFAULT_CONCURRENCY, PRODUCTION_CONCURRENCY):
            return config.envoy_concurrency
        found = metrics.instant(THREADS_BY_POD.format(sel=self.selector().matchers(with_container=False)))
        counts = {int(float(s["value"][1])) for s in found}
        return counts.pop() if len(counts) == 1 else None

    def limit_changes(self) -> str | None:
        """How the fleet's limits changed from one configuration to the next, for the report."""
        if self.resize_refused is not None:
            return f"rolled out at every change of CPU or memory, each round a rollout: {self.resize_refused}"
        return "Envoy's pods resized in place (pods/resize) when only CPU or memory changed, else rolled out"

    def tls(self) -> TlsObjects:
        """The TLS profiles' objects: a classic install's are HTTPProxies, which every Envoy of its Contour
        serves (the fleet's among them)."""
        from runner.platforms.kubernetes.tls import GatewayTls

        return GatewayTls(self.scenario, self.run_id, self.changes)

    def provisioned_by(self) -> object | None:
        """What provisions the production gateway's Envoy (its class's ContourDeployment), None for a classic one."""
        return None

    def production_concurrency(self) -> int | None:
        """The production gateway's own `--concurrency` (None: unset, or its args are not the run's to read)."""
        return None

    def read_production(self, metrics: Metrics) -> str | None:
        """What the fleet takes from production's metrics before it is created, said in one line (None: nothing)."""
        return None

    def describe(self) -> dict[str, Any]:
        """What the report's environment says of the fleet (runner.model.FleetFacts)."""
        return {
            "target": self.shape,
            "workload": str(self.workload),
            "production_concurrency": self.production_concurrency(),
        }


def wait_serving(
    fleet: EnvoyFleet, master: LocustMaster, metrics: Metrics, target: LoadTarget, timeout_s: float = SERVING_TIMEOUT_S
) -> None:
    """Return once every pod of the fleet has answered the load's Host header, as Prometheus counts it per pod:
    GETs through the fleet's Service (a new connection each, spread over the pods) until each pod's count of 2xx
    responses is above 0, so no replica count is measured with a pod that serves nothing. PlatformError at the
    deadline naming the pods that served none and those Prometheus does not scrape."""
    deadline = time.monotonic() + timeout_s
    wanted = set(fleet.pod_names)
    sel = fleet.selector().matchers(with_container=False)
    while True:
        last = fetch(master, target)
        served = {s["metric"].get("pod") for s in metrics.instant(SERVED_BY_POD.format(sel=sel)) if _above_0(s)}
        if last.status == 200 and wanted <= served:
            return
        if time.monotonic() > deadline:
            scraped = {s["metric"].get("pod") for s in metrics.instant(SCRAPED_BY_POD.format(sel=sel))}
            raise PlatformError(
                f"{fleet.workload} does not serve Host {target.host_header} from every pod after {timeout_s:.0f} s: "
                f"GET {target.url}/ got {last.describe()}; {_not_serving(wanted - served, scraped)}",
                "check that the fleet's Service lists every pod (kubectl get endpointslices) and that Prometheus "
                "scrapes their port 8002 (/stats/prometheus; a PodMonitor selects them by kubernetes.sizing.labels), "
                "and Contour's and Envoy's logs",
            )
        time.sleep(SERVING_POLL_S)


def _above_0(series: dict[str, Any]) -> bool:
    return float(series["value"][1]) > 0


def _not_serving(pods: set[str], scraped: set[str]) -> str:
    """Which pods served no 2xx: those Envoy counted requests for (404s: no route yet), and those Prometheus has no
    request counter of (never scraped, or no request ever reached them)."""
    said = []
    if answered := sorted(pods & scraped):
        said.append(f"pod(s) {', '.join(answered)} answered no request with a 2xx")
    if silent := sorted(pods - scraped):
        said.append(f"Prometheus has no envoy_http_downstream_rq_total from pod(s) {', '.join(silent)}")
    return "; ".join(said) or "every pod had answered with a 2xx"


class TlsObjects(Protocol):
    """What the TLS profiles need made, by install: an HTTPProxy and Secret per key type (tls.GatewayTls), or an
    HTTPS listener, Secret and HTTPRoute on a Gateway (listener_tls.ListenerTls)."""

    def create(self, cluster: Cluster) -> None: ...

    def wait_valid(self, cluster: Cluster) -> None: ...

    def fqdn(self, key: TlsKey) -> str: ...
