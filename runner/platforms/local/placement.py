"""Where the local platform's processes run: Envoy alone on its own CPUs, everything else on the rest.

On a shared machine Envoy's CPU per request depends on what else runs on its cores (cache, wake-ups,
the scheduler). Pinning it apart from Locust, nginx and Prometheus (a cpuset beside its CFS quota, as a
kubelet's static CPU manager pins a Guaranteed pod) takes that noise out of the knee.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    """CPU lists ("1", "0-2") for Envoy and for every other process; None: not pinned."""

    envoy_cpus: str | None = None
    others_cpus: str | None = None
    note: str = "not isolated"

    @property
    def isolated(self) -> bool:
        return self.envoy_cpus is not None


def cpu_list(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    parts: list[str] = []
    for cpu in sorted(cpus):
        if parts and "-" not in parts[-1].split(",")[-1] and int(parts[-1]) == cpu - 1:
            parts[-1] = f"{parts[-1]}-{cpu}"
        elif parts and "-" in parts[-1] and int(parts[-1].split("-")[1]) == cpu - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{cpu}"
        else:
            parts.append(str(cpu))
    return ",".join(parts)


def usable_cpus() -> list[int]:
    """The CPUs this process may run on."""
    return sorted(os.sched_getaffinity(0))


def place(envoy_cpu_limit: float, *, isolate: bool, cpus: list[int] | None = None) -> Placement:
    """Envoy on the last ceil(limit) CPUs and the rest on the others, when there are enough of them."""
    if not isolate:
        return Placement(note="not isolated (envoy.isolation: off): Envoy shares every CPU")
    cpus = usable_cpus() if cpus is None else cpus
    needed = max(1, math.ceil(envoy_cpu_limit))
    if len(cpus) < needed + 1:
        return Placement(
            note=f"not isolated: {len(cpus)} CPU(s), Envoy's {envoy_cpu_limit:g}-core limit needs {needed} "
            "and Locust, nginx and Prometheus at least 1"
        )
    envoy, others = cpu_list(cpus[-needed:]), cpu_list(cpus[:-needed])
    return Placement(envoy, others, f"Envoy alone on CPU {envoy}; Locust, nginx and Prometheus on CPU {others}")
