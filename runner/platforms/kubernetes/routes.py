"""The memory model's routes on Kubernetes: N root HTTPProxies the run creates, and how long they took to serve.

A route point of N routes makes N HTTPProxies exist, each a root proxy of its own fqdn
(`route-<i>.<host>`, <host> being the scenario's Host header) routing `/` to the Services the test bed's
HTTPProxy for <host> routes to, in its namespace, with its ingress class (objects.find_route). Points go up
in routes, and each adds the routes it lacks to the running gateway, as production does.

How long a route takes to be served: the Locust master (inside the cluster, next to Envoy) polls the new
route's fqdn through the gateway every 10 ms from just before its HTTPProxy is created until the first
2xx (locustfiles/route_probe.py). The routes a point adds are created in bulk but for the last
`memory.route_probes`, which are created one at a time, each timed: their p50/p99 is the route
programming latency with N routes in place. The bulk is timed too: from its first create to the first 2xx
of its last route, and to the last of its statuses written by Contour. The timed routes wait for those
statuses: while Contour writes them, a new route waits behind them (the first route after a burst of 880
here took 152 s, the ones after the statuses 0.2 s), which is the burst's cost, not the latency with N
routes in place. A route not served within PROGRAMMING_TIMEOUT_S fails the point, naming it.

Each HTTPProxy is named per run (`gateway-sizer-route-<run hash>-<i>`), labelled like the run's other
objects, recorded in ClusterChanges before it is created and deleted by undo and restore. With the
gateway's Lease held, route proxies labelled with the gateway but not recorded by this run are a killed
run's leftovers: deleted first, as they would claim the same fqdns.
"""

from __future__ import annotations

from typing import Any, Protocol

from runner.clock import SYSTEM_CLOCK, Clock
from runner.errors import PlatformError
from runner.locust import ProbeResult
from runner.model import RouteProgramming
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.created import RunObjects, list_proxies, wait_proxies_gone
from runner.platforms.kubernetes.objects import (
    COMPONENT_LABEL,
    GATEWAY_LABEL,
    MANAGED_BY,
    RUN_LABEL,
    TestbedRoute,
    find_route,
    gateway_key,
    host_of,
    label_value,
    proxy_manifest,
    proxy_problem,
    run_hash,
    run_labels,
)
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.scenario import Scenario

COMPONENT = "gateway-sizer-route"
PROGRAMMING_TIMEOUT_S = 300.0  # from a route's creation to its first 2xx through the gateway
POLL_S = 0.1
STATUS_TIMEOUT_S = 900.0  # for Contour to write the statuses of a point's bulk of new proxies
STATUS_POLL_S = 2.0


class RouteProber(Protocol):
    """The Locust master's route probe (runner.locust.LocustMaster)."""

    def start_probe(self, url: str, host_header: str, *, path: str = "/", timeout_s: float) -> ProbeResult: ...
    def probe(self) -> ProbeResult: ...


def route_fqdn(host_header: str, index: int) -> str:
    return f"route-{index}.{host_of(host_header)}"


def route_name(run_id: str, index: int) -> str:
    return f"{COMPONENT}-{run_hash(run_id)}-{index}"


class GatewayRoutes:
    """The run's route HTTPProxies: `ensure(count)` makes exactly `count` of them exist."""

    def __init__(self, scenario: Scenario, run_id: str, changes: ClusterChanges, clock: Clock = SYSTEM_CLOCK) -> None:
        self.scenario, self.run_id, self.clock = scenario, run_id, clock
        self.objects = RunObjects(changes)
        envoy = scenario.envoy.workload
        self.gateway = gateway_key(envoy.namespace, envoy.name)
        self.route: TestbedRoute | None = None
        self.probes = scenario.memory.route_probes if scenario.memory else 0

    @property
    def labels(self) -> dict[str, str]:
        return run_labels(COMPONENT, self.run_id, self.gateway)

    def existing(self) -> list[int]:
        """Indices of the route proxies this run recorded, in order."""
        prefix = f"{COMPONENT}-{run_hash(self.run_id)}-"
        names = [c["name"] for c in self.objects.changes.created if c["kind"] == "HTTPProxy"]
        return sorted(int(n.removeprefix(prefix)) for n in names if n.startswith(prefix))

    def _testbed(self, cluster: Cluster) -> TestbedRoute:
        if self.route is None:
            host = host_of(self.scenario.load.host_header)
            self.route = find_route(cluster, self.scenario.backend.workload.namespace, host)
            self.remove_leftovers(cluster)
        return self.route

    def ensure(self, cluster: Cluster, count: int, prober: RouteProber, gateway_url: str) -> RouteProgramming | None:
        """Make `count` route proxies exist: delete those beyond it, or create the missing ones and time
        them (None when none was created)."""
        route = self._testbed(cluster)
        existing = self.existing()
        for index in (i for i in existing if i >= count):
            self.objects.delete(cluster, "HTTPProxy", route.namespace, route_name(self.run_id, index))
        have = set(existing)
        missing = [i for i in range(count) if i not in have]
        if not missing:
            return None
        sampled = missing[len(missing) - min(self.probes, len(missing)) :]
        bulk = missing[: len(missing) - len(sampled)]
        started = self.clock.time()
        bulk_s, status_s = self._create_bulk(cluster, route, bulk, prober, gateway_url) if bulk else (None, None)
        samples = [self._create_timed(cluster, route, index, prober, gateway_url) for index in sampled]
        return RouteProgramming(
            created=len(missing),
            bulk=len(bulk),
            bulk_s=bulk_s,
            bulk_status_s=status_s,
            samples_s=samples,
            started_at=started,
            ended_at=self.clock.time(),
        )

    def _manifest(self, route: TestbedRoute, index: int) -> dict[str, Any]:
        fqdn = route_fqdn(self.scenario.load.host_header, index)
        return proxy_manifest(route_name(self.run_id, index), self.labels, fqdn, route, tls=False)

    def _create_bulk(
        self, cluster: Cluster, route: TestbedRoute, indices: list[int], prober: RouteProber, url: str
    ) -> tuple[float, float]:
        """Create the proxies, the last one probed; seconds from the first create to its first 2xx, and to
        the last of their statuses written."""
        self.objects.record("HTTPProxy", route.namespace, [route_name(self.run_id, i) for i in indices])
        last = indices[-1]
        probe_started = self._start_probe(prober, url, last)
        first_create = self.clock.monotonic()
        for index in indices:
            self.objects.create_proxy(cluster, self._manifest(route, index))
        served = self._served_s(prober, last) - (first_create - probe_started)
        self._wait_statuses(cluster, route.namespace, {route_name(self.run_id, i) for i in indices})
        return served, self.clock.monotonic() - first_create

    def _wait_statuses(self, cluster: Cluster, namespace: str, names: set[str]) -> None:
        """Wait until Contour has marked every proxy in `names` valid: until then it is busy writing their
        statuses, and a route created meanwhile waits behind them (152 s after a burst of 880 here)."""
        labels = {COMPONENT_LABEL: COMPONENT, RUN_LABEL: label_value(self.run_id)}
        deadline = self.clock.monotonic() + STATUS_TIMEOUT_S
        while True:
            pending = {
                item["metadata"]["name"]: item.get("status") or {}
                for item in list_proxies(cluster, namespace, labels)
                if item["metadata"]["name"] in names and (item.get("status") or {}).get("currentStatus") != "valid"
            }
            if not pending:
                return
            if self.clock.monotonic() > deadline:
                name, status = sorted(pending.items())[0]
                raise PlatformError(
                    f"Contour has not marked {len(pending):,} of {len(names):,} new HTTPProxies valid in "
                    f"{STATUS_TIMEOUT_S:.0f} s ({namespace}/{name}: {proxy_problem(status)})",
                    "check Contour's log; fewer routes per point take less time",
                )
            self.clock.sleep(STATUS_POLL_S)

    def _create_timed(self, cluster: Cluster, route: TestbedRoute, index: int, prober: RouteProber, url: str) -> float:
        """Create one proxy with its fqdn probed: seconds from the create call to the first 2xx."""
        self.objects.record("HTTPProxy", route.namespace, [route_name(self.run_id, index)])
        probe_started = self._start_probe(prober, url, index)
        created = self.clock.monotonic()
        self.objects.create_proxy(cluster, self._manifest(route, index))
        return self._served_s(prober, index) - (created - probe_started)

    def _start_probe(self, prober: RouteProber, url: str, index: int) -> float:
        """Start polling route `index`'s fqdn; the runner's monotonic time once the master polls it."""
        prober.start_probe(url, route_fqdn(self.scenario.load.host_header, index), timeout_s=PROGRAMMING_TIMEOUT_S)
        return self.clock.monotonic()

    def _served_s(self, prober: RouteProber, index: int) -> float:
        """Wait for the running probe; seconds from its start to the first 2xx."""
        deadline = self.clock.monotonic() + PROGRAMMING_TIMEOUT_S + 10
        while (result := prober.probe()).state == "running" and self.clock.monotonic() < deadline:
            self.clock.sleep(POLL_S)
        if result.seconds is None:
            fqdn = route_fqdn(self.scenario.load.host_header, index)
            last = f"HTTP {result.last_status}" if result.last_status else (result.last_error or "no answer")
            raise PlatformError(
                f"the gateway did not serve route {fqdn} within {PROGRAMMING_TIMEOUT_S:.0f} s of its HTTPProxy's "
                f"creation (probe {result.state} after {result.polls:,} polls, last: {last})",
                "check the HTTPProxy's status and Contour's log",
            )
        if result.polls < 2:  # the first poll precedes the create: a 2xx then means the host was served already
            fqdn = route_fqdn(self.scenario.load.host_header, index)
            raise PlatformError(
                f"route {fqdn} answered 2xx on the probe's first poll, before its HTTPProxy could be programmed: "
                "the gateway serves hosts it has no route for (a catch-all virtual host?), so route programming "
                "cannot be timed",
                "remove the catch-all HTTPProxy, or set memory.route_probes: 0",
            )
        return result.seconds

    def remove_leftovers(self, cluster: Cluster) -> list[str]:
        """Delete route proxies labelled with this gateway that this run did not record: a killed run's."""
        if self.route is None:
            return []
        namespace = self.route.namespace
        leftovers = list_proxies(cluster, namespace, {**MANAGED_BY, GATEWAY_LABEL: self.gateway,
                                                      COMPONENT_LABEL: COMPONENT})  # fmt: skip
        names = [item["metadata"]["name"] for item in leftovers]
        names = [name for name in names if self.objects.recorded("HTTPProxy", namespace, name) is None]
        for name in names:
            self.objects.delete(cluster, "HTTPProxy", namespace, name)
        wait_proxies_gone(cluster, namespace, names)  # their fqdns are free once they are gone
        return [f"HTTPProxy {namespace}/{name}" for name in names]
