"""The local test bed's Envoy fleet: N Envoy processes, the pods `envoy-local`, `envoy-local-1`, ..., each in a cgroup
of its own with the configuration's limits, all listening on the gateway's port through SO_REUSEPORT (the kernel
spreads new connections over their listening sockets, as a Service spreads them over pods), each with its own admin
port that Prometheus scrapes as its own pod (a file of scrape targets Prometheus watches).

Hot restart is off in every pod (`--disable-hot-restart`): no shared memory region, so no base id to keep apart
between the pods. Limits change in place while the bootstrap and the worker count stay (an in-place resize); a new
bootstrap or worker count replaces every pod, as a rollout does; another pod count adds or removes pods, as a
Deployment scales.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import requests

from runner.errors import PlatformError
from runner.files import write_atomic
from runner.platforms.local import binaries, envoy
from runner.platforms.local.cgroups import Cgroup, Limits
from runner.platforms.local.layout import ENVOY_CONTAINER, ENVOY_NAMESPACE, ENVOY_POD, LOOPBACK, NOFILE, START_TIMEOUT_S
from runner.platforms.local.processes import ManagedProcess, free_port, http_ok, nofile_limit, wait_until

LISTENERS_ACTIVE = "listener_manager.total_listeners_active"


def envoy_pod(index: int) -> str:
    """The name of the fleet's pod `index`: the first keeps the one-pod name."""
    return ENVOY_POD if index == 0 else f"{ENVOY_POD}-{index}"


def is_envoy_pod(name: str) -> bool:
    return name == ENVOY_POD or name.startswith(f"{ENVOY_POD}-")


class Pod(Protocol):
    """A pod of the test bed as the fleet sees it: its cgroup and its process."""

    cgroup: Cgroup
    process: ManagedProcess | None


@dataclass(frozen=True)
class EnvoySpec:
    """What every pod of the fleet runs: its bootstrap's layout (the first pod's admin port), worker threads and
    limits."""

    layout: envoy.EnvoyLayout
    concurrency: int
    cpu_cores: float
    memory_bytes: int | None


def scrape_targets(admin_ports: Mapping[str, int]) -> list[dict[str, object]]:
    """Prometheus' file-based service discovery entries: each pod's admin endpoint, labelled as its pod."""
    return [
        {
            "targets": [f"{LOOPBACK}:{port}"],
            "labels": {"namespace": ENVOY_NAMESPACE, "pod": pod, "container": ENVOY_CONTAINER},
        }
        for pod, port in admin_ports.items()
    ]


@dataclass
class LocalEnvoyFleet:
    """The Envoy pods of one test bed. `run(pod, namespace, container, argv, limits, **options)` starts a process in
    the pod's cgroup and `remove(pod)` stops it and removes the cgroup; `pods` are the test bed's running pods;
    `targets_file` is the scrape targets file Prometheus watches (None: nothing scrapes Envoy)."""

    run: Callable[..., ManagedProcess]
    remove: Callable[[str], None]
    pods: Mapping[str, Pod]
    workdir: Path
    targets_file: Path | None
    running: dict[int, tuple[envoy.EnvoyLayout, int]] = field(default_factory=dict)  # each pod's layout, workers
    admin_ports: dict[int, int] = field(default_factory=dict)

    def apply(self, spec: EnvoySpec, replicas: int, *, fresh: bool = False) -> None:
        """Run exactly `replicas` pods of `spec`, each serving: limits written in place where the running pods keep
        their bootstrap and workers, else every pod replaced; pods added or removed to the count."""
        if replicas < 1:
            raise PlatformError(f"an Envoy fleet needs at least one pod, not {replicas}")
        if fresh or not self._resize(spec):
            self.stop()
        for index in sorted(i for i in self.running if i >= replicas):
            self._stop_pod(index)
        for index in range(replicas):
            if index not in self.running:
                self._start_pod(index, spec)
        self.publish_targets()

    def _layout(self, index: int, spec: EnvoySpec) -> envoy.EnvoyLayout:
        if index == 0:
            self.admin_ports[0] = spec.layout.admin_port
        elif index not in self.admin_ports:
            self.admin_ports[index] = free_port(LOOPBACK)
        return replace(spec.layout, admin_port=self.admin_ports[index])

    def _resize(self, spec: EnvoySpec) -> bool:
        """Write the limits into every running pod's cgroup when each runs alive with the spec's bootstrap and
        workers; False when they must be replaced (one is not, or one's memory use is above the new limit)."""
        for index, started in self.running.items():
            pod = self.pods.get(envoy_pod(index))
            alive = pod is not None and pod.process is not None and pod.process.alive()
            if not alive or started != (self._layout(index, spec), spec.concurrency):
                return False
        try:
            for index in self.running:
                self.pods[envoy_pod(index)].cgroup.set_memory_limit(spec.memory_bytes)
        except PlatformError:  # cgroup v1 refuses a limit below the usage (EBUSY): replace, as a rollout would
            return False
        for index in self.running:
            self.pods[envoy_pod(index)].cgroup.set_cpu_limit(spec.cpu_cores)
        return True

    def _start_pod(self, index: int, spec: EnvoySpec) -> None:
        """Start pod `index` and wait until it is ready and its listeners are active."""
        name = envoy_pod(index)
        self.remove(name)
        layout = self._layout(index, spec)
        bootstrap = envoy.write_bootstrap(layout, self.workdir / ("envoy.yaml" if index == 0 else f"{name}.yaml"))
        argv = envoy.command(binaries.envoy(), bootstrap, spec.concurrency)
        limits = Limits(spec.cpu_cores, spec.memory_bytes)
        process = self.run(name, ENVOY_NAMESPACE, ENVOY_CONTAINER, argv, limits, nofile=nofile_limit(NOFILE))
        admin = f"http://{LOOPBACK}:{layout.admin_port}"
        wait_until(http_ok(f"{admin}/ready"), what=name, timeout_s=START_TIMEOUT_S, process=process)
        active = _listeners_active(admin, 1 + (layout.tls is not None))
        wait_until(active, what=f"{name}'s listeners", timeout_s=START_TIMEOUT_S, process=process)
        self.running[index] = (layout, spec.concurrency)

    def _stop_pod(self, index: int) -> None:
        self.remove(envoy_pod(index))
        self.running.pop(index, None)

    def stop(self) -> None:
        """Stop every pod of the fleet."""
        for index in sorted(self.running, reverse=True):
            self._stop_pod(index)

    def forget(self) -> None:
        """The test bed stopped every process: nothing of the fleet runs any more."""
        self.running.clear()

    def publish_targets(self) -> None:
        """Write the running pods' admin endpoints into the scrape targets file."""
        if self.targets_file is not None:
            ports = {envoy_pod(i): self.admin_ports[i] for i in sorted(self.running)}
            write_atomic(self.targets_file, json.dumps(scrape_targets(ports), indent=1))


def _listeners_active(admin_url: str, wanted: int) -> Callable[[], bool]:
    """A readiness probe: the pod's admin counts `wanted` active listeners (its sockets bound: it takes connections)."""

    def probe() -> bool:
        try:
            text = requests.get(f"{admin_url}/stats", params={"filter": f"^{LISTENERS_ACTIVE}$"}, timeout=1).text
        except requests.RequestException:
            return False
        values = [line.split(":", 1)[1] for line in text.splitlines() if line.startswith(LISTENERS_ACTIVE)]
        return bool(values) and int(values[0]) >= wanted

    return probe
