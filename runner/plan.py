"""The sweep plan: the cross product of what a scenario varies. Pure: no I/O."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from runner.profiles import PLAIN_PROFILE, TrafficProfile
from runner.quantities import format_cpu, format_memory
from runner.scenario import Resources, Scenario
from runner.scenario.threads import ENVOY_DEFAULT_CONCURRENCY, PRODUCTION_CONCURRENCY


def threads_label(concurrency: int) -> str:
    """A configuration's worker threads as a person reads them: `2 threads`, `Envoy's default threads` (one per CPU
    of the node), `production's threads` (what the production gateway runs)."""
    if concurrency == ENVOY_DEFAULT_CONCURRENCY:
        return "Envoy's default threads"
    if concurrency == PRODUCTION_CONCURRENCY:
        return "production's threads"
    return f"{concurrency} thread{'s' if concurrency != 1 else ''}"


@dataclass(frozen=True)
class Configuration:
    """One point of the sweep: the resources of Envoy, Contour and the backend, how requests arrive and how
    they travel (the traffic profile)."""

    envoy_cpu_cores: float
    envoy_memory_bytes: int
    envoy_concurrency: int
    backend_replicas: int
    contour: Resources | None = None
    arrivals: str = "poisson"
    profile: TrafficProfile = PLAIN_PROFILE
    extra_routes: int = 0  # more virtual hosts in Envoy's routes (the memory model; local: in its bootstrap)
    envoy_replicas: int = 1  # Envoy pods, each with the limits above

    @property
    def fleet_cpu_cores(self) -> float:
        """The CPU limit of all the configuration's Envoy pods together."""
        return self.envoy_cpu_cores * self.envoy_replicas

    @property
    def threads_chosen(self) -> bool:
        """Whether the worker threads are other than one per started core of the limit (the local default, which
        keys and labels leave out, as before threads were an axis)."""
        return self.envoy_concurrency != max(1, math.ceil(self.envoy_cpu_cores))

    @property
    def key(self) -> str:
        """A stable identity used to match results across runs and to resume a sweep."""
        contour = "-"
        if self.contour is not None:
            cpu = format_cpu(self.contour.cpu_cores) if self.contour.cpu_cores else "none"
            memory = format_memory(self.contour.memory_bytes) if self.contour.memory_bytes else "none"
            contour = f"{cpu}/{memory}"
        profile = "" if self.profile.is_plain else f",profile={self.profile.name}"  # keys of plain runs as before
        routes = f",routes={self.extra_routes}" if self.extra_routes else ""
        pods = f"x{self.envoy_replicas}" if self.envoy_replicas != 1 else ""  # keys of one-pod runs as before
        threads = f",threads={self.envoy_concurrency}" if self.threads_chosen else ""
        return (
            f"envoy={format_cpu(self.envoy_cpu_cores)}/{format_memory(self.envoy_memory_bytes)}{pods}{threads}"
            f",contour={contour},nginx={self.backend_replicas},arrivals={self.arrivals}{profile}{routes}"
        )

    @property
    def label(self) -> str:
        """How a person reads it: "Envoy 150m CPU / 512Mi, nginx x1"."""
        text = f"Envoy {format_cpu(self.envoy_cpu_cores)} CPU / {format_memory(self.envoy_memory_bytes)}"
        text += f" x{self.envoy_replicas} pods" if self.envoy_replicas != 1 else ""
        text += f", {threads_label(self.envoy_concurrency)}" if self.threads_chosen else ""
        if self.contour is not None:
            text += f", Contour {format_cpu(self.contour.cpu_cores or 0)} CPU"
        text += f", nginx x{self.backend_replicas}, {self.arrivals} arrivals"
        text += f", {self.extra_routes:,} extra routes" if self.extra_routes else ""
        return text if self.profile.is_plain else f"{text}, {self.profile.name} traffic"


@dataclass(frozen=True)
class Plan:
    """The configurations of a sweep, in the order they run."""

    configurations: tuple[Configuration, ...]

    def __len__(self) -> int:
        return len(self.configurations)


def plan_sweep(scenario: Scenario) -> Plan:
    """Every combination of Envoy CPU, memory, replicas and worker threads, Contour resources, backend replicas,
    arrival model and traffic profile (each profile's CPU limits run one after another, so profiles compare at each
    limit); none when the scenario asks for the memory model only (`memory.only`)."""
    if scenario.memory is not None and scenario.memory.only:
        return Plan(())
    contours: tuple[Resources | None, ...] = scenario.contour.resources or (None,)
    configurations = tuple(
        Configuration(
            envoy_cpu_cores=cpu,
            envoy_memory_bytes=memory,
            envoy_concurrency=scenario.envoy.concurrency_for(cpu, threads),
            backend_replicas=replicas,
            contour=contour,
            arrivals=arrivals,
            profile=profile,
            envoy_replicas=pods,
        )
        for contour, replicas, profile, memory, pods, threads, cpu, arrivals in itertools.product(
            contours,
            scenario.backend.replicas,
            scenario.profiles,
            scenario.envoy.memory_bytes,
            scenario.envoy.replicas,
            scenario.envoy.concurrency,
            scenario.envoy.cpu_cores,
            scenario.load.arrivals,
        )
    )
    return Plan(configurations)
