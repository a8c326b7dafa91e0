"""The embedded local platform: the test bed's processes; Envoy's pods (`envoy.replicas` of them, sharing the gateway's
port) with their limits rewritten in place between visits (restarted when their bootstrap or worker count changes)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runner.certificates import CertificateFiles, remove_certificates, write_certificate
from runner.errors import PlatformError
from runner.locust import LoadTarget, LocustMaster, LocustOptions, user_class
from runner.measure import Capacities
from runner.metrics import Metrics, Selectors
from runner.paths import cache_dir
from runner.plan import Configuration
from runner.platforms.base import Endpoints, LocustPrometheusPlatform
from runner.platforms.local import binaries, envoy
from runner.platforms.local.placement import place
from runner.platforms.local.speed import parse_cpu_list, read_steal, reference_speed
from runner.platforms.local.state import CERTIFICATE_DIR, HAND_TESTBED_ID
from runner.platforms.local.testbed import SELECTORS, LocalTestbed, LocustSetup, Ports
from runner.profiles import TlsKey, TrafficProfile
from runner.scenario import LoadSpec, Scenario


class LocalPlatform(LocustPrometheusPlatform):
    """Real Envoy, nginx, Locust and Prometheus processes on loopback, Envoy capped by a cgroup."""

    name = "local"

    def __init__(
        self, scenario: Scenario, run_dir: Path, *, free_ports: bool = False, testbed_id: str | None = None
    ) -> None:
        self.scenario = scenario
        self.owner_pid = os.getpid() if testbed_id is None else 0
        memory_cpu = scenario.memory.cpu_for(scenario.envoy.cpu_cores) if scenario.memory else 0.0
        top = max(max(scenario.envoy.cpu_cores) * max(scenario.envoy.replicas), memory_cpu)  # the largest fleet's CPU
        self.placement = place(top, isolate=scenario.envoy.isolation == "auto")
        self.testbed = LocalTestbed(
            workdir=run_dir / "testbed",
            ports=Ports.free() if free_ports else Ports(),
            testbed_id=testbed_id or f"sweep-{os.getpid()}",
            scrape_interval_s=scenario.prometheus.scrape_interval_s,
            host_header=scenario.load.host_header,
            log_dir=run_dir / "logs",
            placement=self.placement,
            dies_with_runner=testbed_id is None,  # a test bed started by hand outlives its command
        )
        self._locust: LocustMaster | None = None
        self._certificates: dict[TlsKey, CertificateFiles] = {}
        sizes = {p.body_bytes for p in scenario.profiles if p.body_bytes is not None}
        self._body_sizes = tuple(sorted(sizes))
        # prometheus.url: read from another Prometheus (or a proxy to this one); the local one still scrapes
        spec = scenario.prometheus
        url = spec.url or self.testbed.prometheus_url
        self._metrics = Metrics(url, scrape_interval_s=spec.scrape_interval_s, retry_s=spec.retry_s)

    @classmethod
    def for_hand_testbed(cls, scenario: Scenario) -> LocalPlatform:
        """The test bed a person starts by hand: default ports, state in the cache, no owner process."""
        return cls(scenario, cache_dir() / HAND_TESTBED_ID, testbed_id=HAND_TESTBED_ID)

    def start(self) -> None:
        load = self.scenario.load
        self.testbed.check_ports(self.scenario.backend.max_replicas)
        self.testbed.record_state(self.owner_pid)
        self.testbed.start_monitoring()
        options = LocustOptions.from_load(load)
        setup = LocustSetup(load.locustfile, user_class(load), options, load.workers, load.worker_cpu_cores)
        self._locust = self.testbed.start_locust(setup)
        self.testbed.record_state(self.owner_pid)

    def apply(self, config: Configuration, *, fresh: bool = False) -> None:
        backend = self.scenario.backend
        self.testbed.scale_backend(
            config.backend_replicas,
            cpu_cores=backend.cpu_cores,
            memory_bytes=backend.memory_bytes,
            worker_processes=backend.worker_processes,
            response_status=backend.response_status,
            body_sizes=self._body_sizes,  # every profile's, so the backend stays up from one profile to the next
        )
        overload = self.scenario.envoy.overload
        certificate = self._listener_certificate(config.profile)
        self.testbed.start_envoy(
            config.envoy_cpu_cores,
            config.envoy_memory_bytes,
            config.envoy_concurrency,
            certificate=certificate,
            extra_routes=config.extra_routes,
            overload=envoy.Overload(overload.max_connections, overload.max_heap_bytes) if overload else None,
            fresh=fresh,
            replicas=config.envoy_replicas,
        )

    def _listener_certificate(self, profile: TrafficProfile) -> CertificateFiles | None:
        """The TLS listener's certificate: the profile's key type, or for a plain profile the first TLS profile's
        of the scenario, so that plain and TLS configurations share one Envoy (only its limits change between
        them); None when no profile uses TLS."""
        if profile.tls:
            return self._certificate(profile.tls_key)
        tls = next((p for p in self.scenario.profiles if p.tls), None)
        return self._certificate(tls.tls_key) if tls is not None else None

    def _certificate(self, key_type: TlsKey) -> CertificateFiles:
        """The run's certificate for the gateway's host with this key type, made on first use."""
        if key_type not in self._certificates:
            folder = self.testbed.workdir / CERTIFICATE_DIR
            self._certificates[key_type] = write_certificate(folder, self.scenario.load.host_header, key_type)
        return self._certificates[key_type]

    def target(self, profile: TrafficProfile, load: LoadSpec) -> LoadTarget:
        """TLS profiles go to Envoy's TLS listener; the rest as on any platform."""
        if not profile.tls:
            return super().target(profile, load)
        url = self.testbed.gateway_tls_url
        return LoadTarget(
            url, load.host_header, profile.path(load.path), profile.new_connection, profile.accept_encoding
        )

    def stop(self) -> None:
        """Stop the test bed, then remove the run's certificates and private keys (a sweep stops its platform
        when its `with` block ends: also on a failure or a signal; after SIGKILL, `testbed down` does)."""
        try:
            self.testbed.stop()
        finally:
            remove_certificates(self.testbed.workdir / CERTIFICATE_DIR)
            self._certificates.clear()

    def check(self) -> None:
        self.testbed.check()

    def recover(self) -> list[str]:
        return self.testbed.restart_dead()

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
        worker_cores = self.scenario.load.worker_cpu_cores  # unlimited: a worker process uses one core at most
        return Capacities(generator_cores=min(worker_cores or 1.0, 1.0), backend_cores=nginx_cores)

    def machine_speed(self) -> float:
        cpus = parse_cpu_list(self.placement.envoy_cpus) if self.placement.envoy_cpus else None
        return reference_speed(cpus)

    def limit_changes(self) -> str:
        version = self.testbed.cgroups.version
        return (
            f"written into each Envoy pod's cgroup (v{version}) in place; restarted for a new bootstrap only; pods "
            "added or removed for another pod count"
        )

    def cpu_steal(self) -> tuple[float, float] | None:
        return read_steal()

    def describe(self) -> dict[str, Any]:
        placement = self.placement
        isolation = {"envoy_cpus": placement.envoy_cpus, "others_cpus": placement.others_cpus, "note": placement.note}
        return {"versions": binaries.versions(), "cgroup_version": self.testbed.cgroups.version, "isolation": isolation}
