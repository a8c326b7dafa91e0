"""The kubernetes platform's wait for every pod of a new fleet to serve before a replica count is measured
(runner/platforms/kubernetes/fleet.py `wait_serving`), with its GETs sent by a real Locust master
(locustfiles/gateway_sizer_fetch.py) and its counts read from a real Prometheus. No fleet pod runs here
(tests/cluster sweeps real ones): a stand-in for the fleet's Service answers each GET as the next of its pods
(round robin over those its endpoints list) and counts it per pod, and Prometheus scrapes those counts as Envoy
publishes them with `usedonly` (support/synthetic_prometheus.py): a counter appears once it moved."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from pathlib import Path

import pytest

from runner.errors import PlatformError
from runner.locust import LoadTarget, LocustMaster, LocustOptions, guard_env
from runner.metrics import Metrics
from runner.platforms.kubernetes.fleet import wait_serving
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.sizing_copy import ClassicSizing
from runner.platforms.local.processes import Supervisor, free_port
from runner.scenario import parse_scenario
from support.locust_pair import FETCHING, start_master
from support.processes import alive
from support.synthetic_prometheus import Counter, synthetic_prometheus
from support.wait import until

pytestmark = [pytest.mark.slow, pytest.mark.parallel_safe]
HOST = "external.nginx"
LISTENER = "ingress_http"
UNREACHABLE = None  # a pod the Service's endpoints do not list: no connection reaches it


class FakeServiceForSpeed:
    """Stands in for a fleet's ClusterIP Service and its Envoy pods on loopback: each GET is answered by the next
    pod its endpoints list, with the status that pod gives now (404: Contour has not yet given it the run's route),
    and counted per pod and status class as Envoy's listener counts it."""

    def __init__(self, answers: dict[str, int | None]) -> None:
        self.answers = dict(answers)  # pod -> the status it answers, or UNREACHABLE
        self.counts: dict[tuple[str, int], int] = {}
        self.lock = threading.Lock()
        self.turn = count()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status = stand_in.answer()
                body = b"served\n"
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def answer(self) -> int:
        with self.lock:
            listed = [pod for pod, status in self.answers.items() if status is not UNREACHABLE]
            pod = listed[next(self.turn) % len(listed)]
            status = self.answers[pod]
            assert status is not None
            self.counts[pod, status // 100] = self.counts.get((pod, status // 100), 0) + 1
            return status

    def answered(self, pod: str, status_class: int) -> int:
        with self.lock:
            return self.counts.get((pod, status_class), 0)

    def series(self, namespace: str) -> list[Counter]:
        """Each pod's CPU (the first pod's first: the synthetic Prometheus waits on it) and, once they moved,
        Envoy's request counter and its count per status class on the listener the sweep reads."""
        series = []
        for pod in self.answers:
            container = {"namespace": namespace, "pod": pod, "container": "envoy"}
            series.append(Counter("container_cpu_usage_seconds_total", container, 0.01))
            listener = {"namespace": namespace, "pod": pod, "envoy_http_conn_manager_prefix": LISTENER}
            series.append(Counter("envoy_http_downstream_rq_total", listener, read=self._total(pod)))
            for status_class in (2, 4):
                labels = {**listener, "envoy_response_code_class": str(status_class)}
                series.append(Counter("envoy_http_downstream_rq_xx", labels, read=self._class(pod, status_class)))
        return series

    def _total(self, pod: str) -> Callable[[], float | None]:
        return lambda: sum(self.answered(pod, c) for c in (2, 4)) or None

    def _class(self, pod: str, status_class: int) -> Callable[[], float | None]:
        return lambda: self.answered(pod, status_class) or None

    def stop(self) -> None:
        self.server.shutdown()


def _fleet(suffixes: list[str]) -> ClassicSizing:
    """A classic sizing fleet whose pods (as found after the last change) are `suffixes` of its Deployment's name."""
    scenario = parse_scenario({"name": "t", "platform": "kubernetes", "envoy": {"cpu": [0.15]}})
    fleet = ClassicSizing(scenario, "20261127-130000-serving", ClusterChanges(Path("/dev/null")))
    fleet.pod_names = [f"{fleet.workload.name}-{suffix}" for suffix in suffixes]
    return fleet


@dataclass(frozen=True)
class Serving:
    """A fleet whose pods answer as a test says, behind a stand-in Service, with what wait_serving needs."""

    fleet: ClassicSizing
    service: FakeServiceForSpeed
    master: LocustMaster
    metrics: Metrics
    target: LoadTarget

    def wait(self, timeout_s: float) -> None:
        wait_serving(self.fleet, self.master, self.metrics, self.target, timeout_s=timeout_s)


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Callable[[dict[str, int | None]], Serving]]:
    """Starts, for pods answering as given: the stand-in Service, a Prometheus scraping its counts every second and
    a Locust master fetching through it, as the kubernetes platform's master does."""
    supervisor = Supervisor(tmp_path / "locust-logs")
    with contextlib.ExitStack() as stack:

        def start(answers: dict[str, int | None]) -> Serving:
            fleet = _fleet(list(answers))
            service = FakeServiceForSpeed(dict(zip(fleet.pod_names, answers.values(), strict=True)))
            stack.callback(service.stop)
            url = stack.enter_context(synthetic_prometheus(tmp_path, service.series(fleet.workload.namespace)))
            options = LocustOptions(HOST, "/")
            master = start_master(supervisor, guard_env([service.url]), service.url, options, files=FETCHING)
            return Serving(fleet, service, LocustMaster(master.url), Metrics(url), LoadTarget(service.url, HOST, "/"))

        yield start
        pids = [p.pid for p in supervisor.processes]
        supervisor.stop_all()
        assert not alive(pids), f"Locust left running: {alive(pids)}"


def test_a_pod_is_serving_only_once_it_answered_the_load_with_a_2xx_not_when_its_counter_appears(serving):
    # pod b answers 404 (Contour has not given it the run's route yet) until Prometheus has counted its 404s for a
    # few seconds, then 200: its request counter is in Prometheus all that while, its 2xx count only afterwards
    run = serving({"a": 200, "b": 404})
    a, b = run.fleet.pod_names
    routed_at: list[float] = []

    def route_b_late() -> None:
        until(lambda: run.metrics.instant(f'envoy_http_downstream_rq_total{{pod="{b}"}}'), 60, "b's 404s counted")
        time.sleep(4.0)
        with run.service.lock:
            run.service.answers[b] = 200
        routed_at.append(time.monotonic())

    router = threading.Thread(target=route_b_late, daemon=True)
    router.start()
    run.wait(timeout_s=60)
    returned = time.monotonic()
    router.join(timeout=60)
    assert routed_at and returned > routed_at[0], "returned while pod b answered the load only with 404s"
    assert run.service.answered(b, 2) >= 1 and run.service.answered(a, 2) >= 1


def test_a_pod_that_never_answers_a_2xx_and_one_no_connection_reaches_are_named_at_the_deadline(serving):
    run = serving({"a": 200, "b": 404, "c": UNREACHABLE})
    a, b, c = run.fleet.pod_names
    started = time.monotonic()
    with pytest.raises(PlatformError) as refused:
        run.wait(timeout_s=6)
    assert time.monotonic() - started < 30
    line = refused.value.one_line()
    assert line.startswith(f"{run.fleet.workload} does not serve Host {HOST} from every pod after 6 s: GET "), line
    assert (
        f"pod(s) {b} answered no request with a 2xx; Prometheus has no envoy_http_downstream_rq_total from pod(s) {c}"
        in line
    ), line
    assert a not in line and "kubectl get endpointslices" in line, line
    assert run.service.answered(b, 4) >= 1 and run.service.answered(c, 2) + run.service.answered(c, 4) == 0
