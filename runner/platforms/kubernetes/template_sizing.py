"""Sizing one Envoy DaemonSet or Deployment whose pod template the run writes (the classic install: production's
own when live, the run's clone of it for a sizing fleet): the template's resources, Envoy's args and the
replicas by one patch (a rollout), the running pods' CPU and memory in place (pods/resize) where only those
change.

For Guaranteed QoS every container gets limits equal to its requests: Envoy the configuration's, the sidecars
(Contour's shutdown-manager) their own requests (at least workloads.SIDECAR_MINIMUM), and the init container
(Contour's bootstrap) Envoy's, since it runs before Envoy: the pod requests no more, and a 10m init container
would start the pod slowly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.plan import Configuration
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.fleet import EnvoyFleet
from runner.platforms.kubernetes.resize import (
    ResizeUnsupported,
    live_pods,
    resize_in_place,
    running_resources,
    runs_with,
)
from runner.platforms.kubernetes.workloads import Workload
from runner.scenario.threads import ENVOY_DEFAULT_CONCURRENCY, PRODUCTION_CONCURRENCY


def args_for(base: list[str] | None, concurrency: int) -> list[str] | None:
    """Envoy's args for a configuration's worker threads: production's `base` as they are (PRODUCTION_CONCURRENCY),
    without any `--concurrency` (Envoy's default: its own count, the node's CPUs or fewer under a CPU limit), or
    with `--concurrency N`."""
    if concurrency == PRODUCTION_CONCURRENCY:
        return list(base) if base else None
    if concurrency == ENVOY_DEFAULT_CONCURRENCY:
        return workloads.without_concurrency(base) or None
    return workloads.with_concurrency(base, concurrency)


@dataclass
class TemplateSizing:
    """How one workload is sized: its container resources and Envoy's args as production has them (`base_*`),
    whether its pods are made Guaranteed, and `before_change(resources, args, replicas, pods)`, called with what is
    about to change before each patch or resize in place (the live shape records it and annotates production with
    the run)."""

    workload: Workload
    base_resources: dict[str, dict[str, Any] | None]
    base_args: list[str] | None
    init_containers: set[str]
    guaranteed: bool
    before_change: Callable[[bool, bool, bool, bool], None]

    def resources(self, config: Configuration) -> dict[str, dict[str, Any] | None]:
        """Every container's resources in the template for `config`."""
        sized = workloads.resources_for(config.envoy_cpu_cores, config.envoy_memory_bytes, guaranteed=self.guaranteed)
        wanted: dict[str, dict[str, Any] | None] = {self.workload.container: sized}
        if self.guaranteed:
            for name, resources in self.base_resources.items():
                if name != self.workload.container:
                    wanted[name] = sized if name in self.init_containers else workloads.guaranteed(resources)
        return wanted

    def envoy_resources(self, config: Configuration) -> dict[str, Any]:
        return self.resources(config)[self.workload.container] or {}

    def args(self, config: Configuration) -> list[str] | None:
        return args_for(self.base_args, config.envoy_concurrency)

    def patch(self, cluster: Cluster, config: Configuration, replicas: int | None) -> bool:
        """Give the template `config`'s resources and args (and a Deployment `replicas`, when given) in one patch;
        False when it has them already (no rollout)."""
        wanted = self.resources(config)
        current = workloads.get_pod_resources(cluster, self.workload)
        new_resources = any(current.get(name) != value for name, value in wanted.items())
        args = self.args(config)
        new_args = workloads.get_args(cluster, self.workload) != args
        new_replicas = replicas is not None and workloads.replicas(cluster, self.workload) != replicas
        if not (new_resources or new_args or new_replicas):
            return False
        self.before_change(new_resources, new_args, new_replicas, False)
        argv = {self.workload.container: args} if new_args else None
        workloads.set_pod_resources(cluster, self.workload, wanted if new_resources else {}, argv, replicas=replicas)
        return True

    def resize(self, cluster: Cluster, config: Configuration, timeout_s: float) -> int:
        """Give the running pods that differ `config`'s CPU and memory in place; returns how many. ResizeUnsupported
        when the cluster cannot."""
        sized = self.envoy_resources(config)
        pods = live_pods(cluster, self.workload)
        differing = [p for p in pods if not runs_with(running_resources(cluster, p, self.workload.container), sized)]
        if differing:
            self.before_change(False, False, False, True)
            resize_in_place(cluster, self.workload, sized, timeout_s)
        return len(differing)


class TemplateFleet(EnvoyFleet):
    """A fleet whose pod template the run writes (the classic install's, live or cloned), sized by one
    TemplateSizing made at claim."""

    _sizing: TemplateSizing | None = None

    def _size(self, cluster: Cluster, config: Configuration, *, fresh: bool, replicas: int | None) -> bool:
        """Size the workload for `config`: in place when only CPU and memory change from what the pods run (and the
        cluster resizes in place), else by a patch and its rollout; the pods a patch left as they were are resized
        in place to it. Returns whether new pods came. The first refusal to resize in place is kept (rollouts from
        then on)."""
        sizing = self._sizing
        assert sizing is not None, "claimed first"
        before, timeout_s = self.applied, self.scenario.kubernetes.rollout_timeout_s
        same_shape = before is not None and (before.envoy_concurrency, before.envoy_replicas) == (
            config.envoy_concurrency,
            config.envoy_replicas,
        )
        if same_shape and self.resize_refused is None and not fresh and self._resize(cluster, config):
            return False
        if sizing.patch(cluster, config, replicas):
            workloads.wait_rolled_out(cluster, sizing.workload, timeout_s)
            return True
        if self.resize_refused is None:  # the template has `config` already: pods resized before come back to it
            self._resize(cluster, config)
        return False

    def _resize(self, cluster: Cluster, config: Configuration) -> bool:
        assert self._sizing is not None, "claimed first"
        try:
            self._sizing.resize(cluster, config, self.scenario.kubernetes.rollout_timeout_s)
            return True
        except ResizeUnsupported as error:
            self.resize_refused = str(error)
            return False

    def threads_flag(self, config: Configuration) -> int | bool | None:
        assert self._sizing is not None, "claimed first"
        return workloads.concurrency_in(self._sizing.args(config))
