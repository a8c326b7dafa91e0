"""The memory model's routes on Kubernetes as real API objects (Contour's CRDs): N root HTTPProxies routing
like the test bed, recorded before they exist, trimmed when a point asks for fewer, removed by undo, a
killed run's removed first, and timed through the route probe. No Contour or Envoy runs here, so the
Locust master's probe is stood in for by FakeProbe, which "serves" a route a fixed time after it starts
polling; the real probe is tested in tests/local/test_connection_holder.py and end to end on the cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runner.clock import SYSTEM_CLOCK, Clock
from runner.errors import PlatformError
from runner.locust import ProbeResult
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.objects import (
    GATEWAY_LABEL,
    GROUP,
    MANAGED_BY,
    PLURAL,
    RUN_LABEL,
    VERSION,
    gateway_key,
)
from runner.platforms.kubernetes.originals import ClusterChanges, undo
from runner.platforms.kubernetes.routes import COMPONENT, GatewayRoutes, route_fqdn, route_name
from runner.scenario import parse_scenario
from support.k8s import (
    TESTBED_SERVICES,
    create_testbed_proxy,
    gone,
    profiles_scenario_data,
    read_proxy,
    set_proxy_status,
)
from support.simulated import FakeClock

pytestmark = pytest.mark.kubernetes
RUN = "20261124-230000-routes"
URL = "http://envoy.projectcontour"
TICK = 0.01


class FakeTickingClock(FakeClock):
    """Fake time that moves TICK on every reading, so the time between two readings is known exactly: the route
    timing's correction for the gap between a probe's start and its create is checked without real time."""

    def monotonic(self) -> float:
        self.now += TICK
        return super().monotonic()


@dataclass
class FakeProbe:
    """Stands in for the Locust master's route probe, and for Contour: each probe reports its first 2xx
    `seconds` after it started, on poll number `polls`, or, for hosts in `never`, a timeout; and, as
    Contour would, marks every route proxy valid (unless `statuses` is False). Keeps the
    hosts it was asked to poll, in order."""

    admin: Cluster
    namespace: str
    seconds: float = 0.25
    never: set[str] = field(default_factory=set)
    hosts: list[str] = field(default_factory=list)
    polls: int = 25
    statuses: bool = True

    def start_probe(self, url: str, host_header: str, *, path: str = "/", timeout_s: float) -> ProbeResult:
        self.hosts.append(host_header)
        return ProbeResult("running", 100.0, None, 0, None, None)

    def probe(self) -> ProbeResult:
        if self.statuses:
            for name, proxy in _route_proxies(self.admin, self.namespace).items():
                if (proxy.get("status") or {}).get("currentStatus") != "valid":
                    set_proxy_status(self.admin, self.namespace, name, {"currentStatus": "valid"})
        if self.hosts[-1] in self.never:
            return ProbeResult("timeout", 100.0, None, 3, 404, None)
        return ProbeResult("done", 100.0, 100.0 + self.seconds, self.polls, 200, None)


def _routes(
    namespace: str, tmp_path: Path, run_id: str = RUN, probes: int = 2, clock: Clock = SYSTEM_CLOCK
) -> tuple[GatewayRoutes, ClusterChanges]:
    data = profiles_scenario_data(namespace, ["plain"])
    data["memory"] = {"routes": [0, 5], "route_probes": probes}
    (tmp_path / run_id).mkdir(exist_ok=True)
    changes = ClusterChanges(tmp_path / run_id / "originals.json")
    return GatewayRoutes(parse_scenario(data), run_id, changes, clock), changes


def _route_proxies(admin, namespace: str) -> dict[str, dict]:
    found = admin.custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, label_selector=f"app.kubernetes.io/name={COMPONENT}"
    )
    return {item["metadata"]["name"]: item for item in found["items"]}


def test_a_route_point_makes_n_root_proxies_routing_like_the_test_bed_the_last_ones_timed(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    routes, changes = _routes(namespace, tmp_path, probes=2, clock=FakeTickingClock())
    probe = FakeProbe(admin, namespace, seconds=0.25)
    timing = routes.ensure(admin, 5, probe, URL)
    proxies = _route_proxies(admin, namespace)
    assert sorted(proxies) == sorted(route_name(RUN, i) for i in range(5))
    labels = {"app.kubernetes.io/name": COMPONENT, RUN_LABEL: RUN, GATEWAY_LABEL: gateway_key(namespace, "envoy"),
              **MANAGED_BY}  # fmt: skip
    for index in range(5):
        proxy = proxies[route_name(RUN, index)]
        assert proxy["metadata"]["labels"] == labels
        assert proxy["spec"] == {
            "virtualhost": {"fqdn": f"route-{index}.external.nginx"},
            "routes": [{"conditions": [{"prefix": "/"}], "services": TESTBED_SERVICES}],
        }
    # the bulk's last route is probed, then each timed route while it is created
    assert probe.hosts == [route_fqdn("external.nginx", i) for i in (2, 3, 4)]
    assert timing is not None and (timing.created, timing.bulk, len(timing.samples_s)) == (5, 3, 2)
    # a probe's seconds less the time between its start and the create (one clock reading: TICK)
    assert [*timing.samples_s, timing.bulk_s] == pytest.approx([0.25 - TICK] * 3), timing
    assert timing.bulk_status_s is not None and timing.bulk_status_s > 0, timing  # from the first create, once marked
    assert timing.started_at <= timing.ended_at
    assert [c["name"] for c in changes.created] == [route_name(RUN, i) for i in range(5)]


def test_a_point_with_fewer_routes_deletes_the_surplus_and_one_with_as_many_creates_none(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    routes, changes = _routes(namespace, tmp_path, probes=0)
    routes.ensure(admin, 5, FakeProbe(admin, namespace), URL)
    assert routes.ensure(admin, 5, FakeProbe(admin, namespace), URL) is None
    assert routes.ensure(admin, 2, FakeProbe(admin, namespace), URL) is None
    assert sorted(_route_proxies(admin, namespace)) == [route_name(RUN, 0), route_name(RUN, 1)]
    assert routes.existing() == [0, 1]
    more = routes.ensure(admin, 4, FakeProbe(admin, namespace), URL)
    assert more is not None and (more.created, more.bulk, more.samples_s) == (2, 2, [])
    assert len(changes.created) == 4


def test_a_route_envoy_never_serves_fails_naming_it_and_undo_removes_every_route(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    routes, changes = _routes(namespace, tmp_path, probes=1)
    with pytest.raises(PlatformError, match=r"did not serve route route-2\.external\.nginx .*last: HTTP 404"):
        routes.ensure(admin, 3, FakeProbe(admin, namespace, never={"route-2.external.nginx"}), URL)
    assert len(_route_proxies(admin, namespace)) == 3
    lines = undo(admin, changes, timeout_s=30)
    assert len(lines) == 3 and not _route_proxies(admin, namespace)
    assert all(gone(read_proxy, admin, namespace, route_name(RUN, i)) for i in range(3))
    assert not changes.created


def test_a_new_run_removes_a_killed_runs_route_proxies_first(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    killed, _ = _routes(namespace, tmp_path, run_id="20261124-220000-killed", probes=0)
    killed.ensure(admin, 3, FakeProbe(admin, namespace), URL)
    routes, changes = _routes(namespace, tmp_path, probes=0)
    routes.ensure(admin, 2, FakeProbe(admin, namespace), URL)
    assert sorted(_route_proxies(admin, namespace)) == [route_name(RUN, 0), route_name(RUN, 1)]
    assert [c["name"] for c in changes.created] == [route_name(RUN, 0), route_name(RUN, 1)]


def test_a_route_served_on_the_probes_first_poll_is_refused_as_a_catch_all_not_timed(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    routes, _ = _routes(namespace, tmp_path, probes=1)
    with pytest.raises(PlatformError, match=r"route route-0\.external\.nginx answered 2xx on the probe's first poll"):
        routes.ensure(admin, 1, FakeProbe(admin, namespace, polls=1), URL)


def test_the_timed_routes_wait_until_contour_has_written_the_bulks_statuses(admin, namespace, tmp_path, monkeypatch):
    monkeypatch.setattr("runner.platforms.kubernetes.routes.STATUS_TIMEOUT_S", 3.0)
    monkeypatch.setattr("runner.platforms.kubernetes.routes.STATUS_POLL_S", 0.5)
    create_testbed_proxy(admin, namespace)
    routes, _ = _routes(namespace, tmp_path, probes=1)
    probe = FakeProbe(admin, namespace, statuses=False)
    with pytest.raises(
        PlatformError,
        match=r"not marked 2 of 2 new HTTPProxies valid in 3 s \(.*-0: NotReconciled: Waiting for controller\)",
    ):
        routes.ensure(admin, 3, probe, URL)
    assert probe.hosts == ["route-1.external.nginx"]  # no route was timed while the bulk's statuses were missing
