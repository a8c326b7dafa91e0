"""The local test bed: Envoy's pods (runner.platforms.local.envoy_fleet), nginx replicas, Locust master and workers
(runner.platforms.local.loadgen), Prometheus and the cgroup exporter.

Every process runs in its own cgroup under `gateway-sizer/<testbed-id>/<pod>`, labelled like a
Kubernetes pod (namespace, pod, container). Stopping the test bed removes that whole tree, which also
kills anything a crashed run left behind.
"""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.certificates import CertificateFiles
from runner.errors import PlatformError, UsageError
from runner.locust import LocustMaster
from runner.platforms.local import binaries, envoy, nginx, prometheus
from runner.platforms.local.cgroups import Cgroup, CgroupDriver, Limits, detect_driver
from runner.platforms.local.envoy_fleet import EnvoySpec, LocalEnvoyFleet, is_envoy_pod
from runner.platforms.local.exporter import write_registry
from runner.platforms.local.layout import (
    BACKEND_NAMESPACE,
    EXPORTER_POD,
    LOOPBACK,
    MONITORING_NAMESPACE,
    PROMETHEUS_POD,
    START_TIMEOUT_S,
    Ports,
)
from runner.platforms.local.layout import SELECTORS as SELECTORS
from runner.platforms.local.loadgen import LocalLocust, LocustSetup
from runner.platforms.local.placement import Placement
from runner.platforms.local.processes import ManagedProcess, Supervisor, http_ok, port_is_free, wait_until
from runner.platforms.local.state import TSDB_PREFIX, TestbedRecord, state_file


@dataclass
class _Container:
    namespace: str
    pod: str
    container: str
    cgroup: Cgroup
    process: ManagedProcess | None = None


@dataclass
class LocalTestbed:
    """Starts and stops the local platform's processes; `testbed_id` names its cgroup tree."""

    workdir: Path
    ports: Ports = field(default_factory=Ports)
    testbed_id: str = "testbed"
    scrape_interval_s: float = 1.0
    host_header: str = "external.nginx"
    log_dir: Path | None = None
    placement: Placement = field(default_factory=Placement)
    dies_with_runner: bool = True  # False: the processes outlive this Python process (`testbed up`)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cgroups: CgroupDriver = detect_driver()
        self.supervisor = Supervisor(self.log_dir or self.workdir / "logs", dies_with_runner=self.dies_with_runner)
        self.containers: dict[str, _Container] = {}
        self._registry = self.workdir / "exporter-containers.json"
        self._tsdb: Path | None = None
        self.backend: list[nginx.NginxReplica] = []
        self.envoy_limits: tuple[float, int | None, int] | None = None
        targets = self.workdir / "envoy-targets.json"
        self.envoy = LocalEnvoyFleet(self._run, self._remove, self.containers, self.workdir, targets)
        self._locust: LocalLocust | None = None
        self._backend_options: dict[str, Any] = {}

    # -- URLs -------------------------------------------------------------------------------------
    @property
    def gateway_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.gateway}"

    @property
    def gateway_tls_url(self) -> str:
        return f"https://{LOOPBACK}:{self.ports.gateway_tls}"

    @property
    def locust_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.locust_web}"

    @property
    def prometheus_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports.prometheus}"

    def backend_url(self, replica: int = 0) -> str:
        return f"http://{LOOPBACK}:{self.ports.nginx_base + replica}"

    # -- containers -------------------------------------------------------------------------------
    def _container(self, namespace: str, pod: str, container: str) -> _Container:
        if pod not in self.containers:
            group = self.cgroups.create(f"{self.testbed_id}/{pod}")
            placement = self.placement
            group.set_cpus(placement.envoy_cpus if is_envoy_pod(pod) else placement.others_cpus)
            self.containers[pod] = _Container(namespace, pod, container, group)
        return self.containers[pod]

    def _publish(self) -> None:
        # Envoy's pods publish each thread's CPU too, for their worker threads
        entries = [
            {"namespace": c.namespace, "pod": c.pod, "container": c.container, "cgroup": c.cgroup.spec()}
            | {"threads": is_envoy_pod(c.pod)}
            for c in self.containers.values()
        ]
        write_registry(self._registry, entries)

    def _run(
        self,
        pod: str,
        namespace: str,
        container: str,
        argv: list[str],
        limits: Limits | None = None,
        **kwargs: object,
    ) -> ManagedProcess:
        """Start a process in the pod's cgroup, with `limits` written into it first when given (a pod without
        them keeps its cgroup's, as the exporter and Prometheus do: none)."""
        entry = self._container(namespace, pod, container)
        if limits is not None:
            limits.apply(entry.cgroup)
        entry.process = self.supervisor.start(pod, argv, cgroup=entry.cgroup, **kwargs)  # type: ignore[arg-type]
        self._publish()
        return entry.process

    def _remove(self, pod: str) -> None:
        entry = self.containers.pop(pod, None)
        if entry is None:
            return
        if entry.process is not None:
            self.supervisor.stop(entry.process)
        entry.cgroup.remove()
        self._publish()

    # -- lifecycle --------------------------------------------------------------------------------
    def check_ports(self, replicas: int) -> None:
        for role, port in self.ports.named(replicas).items():
            if not port_is_free(LOOPBACK, port):
                raise UsageError(
                    f"port {port} ({role}) on {LOOPBACK} is already in use",
                    "stop the other test bed with `gateway-sizer testbed down`, or free the port",
                )

    def start_monitoring(self) -> None:
        """The cgroup exporter and Prometheus scraping it and Envoy's admin stats."""
        self._publish()
        self._start_exporter()
        assert self.envoy.targets_file is not None
        self.envoy.publish_targets()  # the pods that run (usually none yet)
        targets = prometheus.ScrapeTargets(self.ports.exporter, self.envoy.targets_file, self.scrape_interval_s)
        prometheus.write_config(targets, self.workdir / "prometheus.yml")
        self._tsdb = Path(tempfile.mkdtemp(prefix=TSDB_PREFIX))
        self._start_prometheus()

    def _start_exporter(self) -> None:
        argv = [sys.executable, "-m", "runner.platforms.local.exporter", "--registry", str(self._registry)]
        exporter = self._run(
            EXPORTER_POD, MONITORING_NAMESPACE, "exporter", [*argv, "--port", str(self.ports.exporter)]
        )
        ready = http_ok(f"http://{LOOPBACK}:{self.ports.exporter}/metrics")
        wait_until(ready, what="cgroup exporter", timeout_s=START_TIMEOUT_S, process=exporter)

    def _start_prometheus(self) -> None:
        assert self._tsdb is not None
        config = self.workdir / "prometheus.yml"
        argv = prometheus.command(binaries.prometheus(), config, self._tsdb, self.ports.prometheus)
        process = self._run(PROMETHEUS_POD, MONITORING_NAMESPACE, "prometheus", argv)
        ready = http_ok(f"{self.prometheus_url}/-/ready")
        wait_until(ready, what="Prometheus", timeout_s=START_TIMEOUT_S, process=process)

    def scale_backend(
        self,
        replicas: int,
        *,
        cpu_cores: float | None = None,
        memory_bytes: int | None = None,
        worker_processes: int = 1,
        response_status: int = 200,
        body_sizes: tuple[int, ...] = (),
    ) -> None:
        """Run exactly `replicas` nginx replicas with these limits, each serving the `body_sizes` files;
        Envoy must be restarted to see them."""
        self._backend_options = {
            "cpu_cores": cpu_cores,
            "memory_bytes": memory_bytes,
            "worker_processes": worker_processes,
            "response_status": response_status,
            "body_sizes": body_sizes,
        }
        wanted = [
            nginx.NginxReplica(i, self.ports.nginx_base + i, worker_processes, response_status, body_sizes=body_sizes)
            for i in range(replicas)
        ]
        for old in self.backend:
            if old not in wanted:
                self._remove(old.name)
        binary = binaries.nginx()
        for replica in wanted:
            if replica in self.backend:
                continue
            prefix = self.workdir / replica.name
            config = nginx.prepare(replica, prefix)
            process = self._run(
                replica.name,
                BACKEND_NAMESPACE,
                "nginx",
                nginx.command(binary, prefix, config),
                Limits(cpu_cores, memory_bytes),
            )
            wait_until(
                http_ok(self.backend_url(replica.index) + "/")
                if response_status == 200
                else _listening(LOOPBACK, replica.port),
                what=replica.name,
                timeout_s=START_TIMEOUT_S,
                process=process,
            )
        self.backend = wanted

    def start_envoy(
        self,
        cpu_cores: float,
        memory_bytes: int | None,
        concurrency: int,
        certificate: CertificateFiles | None = None,
        *,
        extra_routes: int = 0,
        overload: envoy.Overload | None = None,
        idle_timeout_s: float = envoy.IDLE_TIMEOUT_S,
        fresh: bool = False,
        replicas: int = 1,
    ) -> None:
        """Run `replicas` Envoy pods with these limits, each in its own cgroup, all on the gateway's port: limits
        written into their cgroups when they run with the same bootstrap and worker count (as an in-place resize
        changes a pod's limits), else (re)started with them, as a rollout replaces pods; pods added or removed to
        the count. With a certificate, Envoy also terminates TLS on `ports.gateway_tls`; `extra_routes` more
        virtual hosts, `overload` manager settings and the connection idle timeout go into its bootstrap.
        `fresh`: restart them whatever changed."""
        if not self.backend:
            raise PlatformError("start the backend before Envoy")
        tls = None
        if certificate is not None:
            tls = envoy.TlsListener(self.ports.gateway_tls, certificate.certificate, certificate.private_key)
        layout = envoy.EnvoyLayout(
            listen_port=self.ports.gateway,
            admin_port=self.ports.envoy_admin,
            upstream_ports=tuple(r.port for r in self.backend),
            host_header=self.host_header,
            tls=tls,
            extra_routes=extra_routes,
            overload=overload,
            idle_timeout_s=idle_timeout_s,
        )
        self.envoy.apply(EnvoySpec(layout, concurrency, cpu_cores, memory_bytes), replicas, fresh=fresh)
        for port in (self.ports.gateway, *([tls.port] if tls else [])):
            wait_until(_listening(LOOPBACK, port), what="Envoy's listener", timeout_s=START_TIMEOUT_S)
        self.envoy_limits = (cpu_cores, memory_bytes, concurrency)

    def start_locust(self, setup: LocustSetup, timeout_s: float = START_TIMEOUT_S) -> LocustMaster:
        """Locust's master (web UI) and `setup.workers` workers, each worker in its own cgroup; waits up to
        `timeout_s` for them all."""
        targets = (self.gateway_url, self.gateway_tls_url, self.backend_url(0))  # nowhere else (guard extension)
        self._locust = LocalLocust(
            setup,
            self._run,
            self._remove,
            self.gateway_url,
            self.locust_url,
            self.ports.locust_web,
            self.ports.locust_master,
            targets,
        )
        return self._locust.start(timeout_s, on_shortfall=self.check)

    def stop_locust(self) -> None:
        """Stop Locust's master and workers and remove their cgroups (another setup may start after)."""
        if self._locust is not None:
            self._locust.stop()
            self._locust = None

    def restart_dead(self) -> list[str]:
        """Start again every shared part that has died (the exporter, Prometheus, Locust's master and
        workers, nginx replicas); Envoy is restarted by the next configuration anyway. Returns their names."""
        dead = [p.name for p in self.supervisor.processes if not p.alive()]
        for name in dead:
            self._remove(name)
        if EXPORTER_POD in dead:
            self._start_exporter()
        if PROMETHEUS_POD in dead:
            self._start_prometheus()
        if self._locust is not None:
            self._locust.restart(dead, START_TIMEOUT_S, on_shortfall=self.check)
        replicas = [r for r in self.backend if r.name in dead]
        if replicas:
            self.backend = [r for r in self.backend if r not in replicas]
            self.scale_backend(len(self.backend) + len(replicas), **self._backend_options)
        return dead

    def check(self) -> None:
        self.supervisor.check()

    def stop(self) -> None:
        """Stop every process (in reverse start order) and remove the cgroup tree and Prometheus data."""
        try:
            self.supervisor.stop_all()
        finally:
            self.cgroups.remove_tree(self.testbed_id)
            self.containers.clear()
            self.envoy.forget()
            if self._tsdb is not None:
                shutil.rmtree(self._tsdb, ignore_errors=True)
                self._tsdb = None
            state_file(self.testbed_id).unlink(missing_ok=True)

    def record_state(self, owner_pid: int) -> None:
        """Write where this test bed's parts are, so `testbed down` can stop it from another process."""
        record = TestbedRecord(
            testbed_id=self.testbed_id,
            owner_pid=owner_pid,
            workdir=str(self.workdir),
            tsdb=str(self._tsdb) if self._tsdb else None,
            urls={"gateway": self.gateway_url, "locust": self.locust_url, "prometheus": self.prometheus_url},
        )
        record.save()


def _listening(host: str, port: int):
    def probe() -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex((host, port)) == 0

    return probe
