"""The embedded local platform: the test bed's processes, Envoy re-started per configuration."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runner.errors import PlatformError
from runner.locust import LocustMaster, LocustOptions
from runner.measure import Capacities
from runner.metrics import Metrics, Selectors
from runner.plan import Configuration
from runner.platforms.base import Endpoints, Platform
from runner.platforms.local import binaries
from runner.platforms.local.testbed import SELECTORS, LocalTestbed, LocustSetup, Ports
from runner.scenario import Scenario


class LocalPlatform(Platform):
    """Real Envoy, nginx, Locust and Prometheus processes on loopback, Envoy capped by a cgroup."""

    name = "local"

    def __init__(self, scenario: Scenario, run_dir: Path, *, free_ports: bool = False) -> None:
        self.scenario = scenario
        self.testbed = LocalTestbed(
            workdir=run_dir / "testbed",
            ports=Ports.free() if free_ports else Ports(),
            testbed_id=f"sweep-{os.getpid()}",
            scrape_interval_s=scenario.prometheus.scrape_interval_s,
            host_header=scenario.load.host_header,
            log_dir=run_dir / "logs",
        )
        self._locust: LocustMaster | None = None
        self._metrics = Metrics(self.testbed.prometheus_url, scrape_interval_s=scenario.prometheus.scrape_interval_s)

    def start(self) -> None:
        load = self.scenario.load
        self.testbed.check_ports(max(self.scenario.backend.replicas))
        self.testbed.record_state(os.getpid())
        self.testbed.start_monitoring()
        options = LocustOptions.from_load(load)
        setup = LocustSetup(load.locustfile, load.locust_user_class, options, load.workers)
        self._locust = self.testbed.start_locust(setup)

    def apply(self, config: Configuration) -> None:
        backend = self.scenario.backend
        self.testbed.scale_backend(
            config.backend_replicas,
            cpu_cores=backend.cpu_cores,
            memory_bytes=backend.memory_bytes,
            worker_processes=backend.worker_processes,
            response_status=backend.response_status,
        )
        self.testbed.start_envoy(config.envoy_cpu_cores, config.envoy_memory_bytes, config.envoy_concurrency)

    def stop(self) -> None:
        self.testbed.stop()

    def check(self) -> None:
        self.testbed.check()

    @property
    def locust(self) -> LocustMaster:
        if self._locust is None:
            raise PlatformError("the local platform is not started")
        return self._locust

    @property
    def metrics(self) -> Metrics:
        return self._metrics

    @property
    def selectors(self) -> Selectors:
        return SELECTORS

    @property
    def endpoints(self) -> Endpoints:
        testbed = self.testbed
        return Endpoints(testbed.gateway_url, testbed.locust_url, testbed.prometheus_url, testbed.backend_url(0))

    def capacities(self) -> Capacities:
        backend = self.scenario.backend
        nginx_cores = float(backend.worker_processes)  # one nginx worker process uses one core at most
        if backend.cpu_cores is not None:
            nginx_cores = min(nginx_cores, backend.cpu_cores)
        return Capacities(generator_cores=1.0, backend_cores=nginx_cores)

    def describe(self) -> dict[str, Any]:
        return {"versions": binaries.versions(), "cgroup_version": self.testbed.cgroups.version}
