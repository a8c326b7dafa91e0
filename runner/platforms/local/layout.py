"""Where the local test bed's parts are: their pods (named and namespaced as on a cluster), the selectors that
find them in Prometheus, their loopback ports, and what their processes start with."""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import asdict, dataclass

from runner.metrics import Selector, Selectors
from runner.platforms.local.processes import port_is_free

ENVOY_NAMESPACE, ENVOY_POD, ENVOY_CONTAINER = "projectcontour", "envoy-local", "envoy"
EXPORTER_POD, PROMETHEUS_POD = "cadvisor-exporter", "prometheus"
MASTER_POD, WORKER_POD = "locust-master", "locust-worker"
BACKEND_NAMESPACE = "gateway-loadtest"
MONITORING_NAMESPACE = "monitoring"
START_TIMEOUT_S = 30.0
LOOPBACK = "127.0.0.1"
# Open files for Envoy and the Locust master: room for the memory model's held connections (at most
# 25,000, runner/scenario/limits.py) and their upstream side; raising the hard limit takes CAP_SYS_RESOURCE, which
# root in a container may lack (this machine: hard limit 20,000, so at most ~19,000 held connections).
NOFILE = 65_536

SELECTORS = Selectors(
    envoy=Selector(ENVOY_NAMESPACE, "envoy-.*", ENVOY_CONTAINER),
    backend=Selector(BACKEND_NAMESPACE, "nginx-.*", "nginx"),
    generator=Selector(BACKEND_NAMESPACE, "locust-worker-.*", "locust"),
)


@dataclass(frozen=True)
class Ports:
    """Loopback ports of the test bed. nginx replica i listens on `nginx_base + i`."""

    gateway: int = 10080
    envoy_admin: int = 9901
    prometheus: int = 9090
    exporter: int = 9102
    locust_web: int = 8089
    locust_master: int = 5557
    nginx_base: int = 18080
    gateway_tls: int = 10443

    def named(self, replicas: int) -> dict[str, int]:
        ports = {k: v for k, v in asdict(self).items() if k != "nginx_base"}
        ports.update({f"nginx-{i}": self.nginx_base + i for i in range(replicas)})
        return ports

    @classmethod
    def free(cls, nginx_slots: int = 16) -> Ports:
        """Free ports for every role (tests run beside a user's test bed)."""
        with contextlib.ExitStack() as stack:
            singles = []
            for _ in range(7):
                sock = stack.enter_context(socket.socket())
                sock.bind((LOOPBACK, 0))
                singles.append(sock.getsockname()[1])
            base = 20000 + (os.getpid() * 37) % 20000
            while not all(port_is_free(LOOPBACK, base + i) for i in range(nginx_slots)):
                base += nginx_slots
        gateway, envoy_admin, prometheus, exporter, locust_web, locust_master, gateway_tls = singles
        return cls(gateway, envoy_admin, prometheus, exporter, locust_web, locust_master, base, gateway_tls)
