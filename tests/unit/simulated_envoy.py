"""A simulated Envoy for the pure knee and search tests: CPU grows linearly with RPS up to a limit.

Only the search and knee logic is under test here; the real components are exercised in tests/local.
"""

from __future__ import annotations

import random

from runner.model import LoadLevel, Step


def make_step(
    index: int, *, users: int, rps: float, utilization: float, target_rps: float | None = None, **fields: object
) -> Step:
    """A step with these figures and plausible others; `fields` replace any of them."""
    step = Step(
        index=index,
        users=users,
        target_rps=target_rps,
        rps=rps,
        envoy_rps=rps,
        cpu_utilization_min=utilization - 0.02,
        cpu_utilization_mean=utilization,
        cpu_utilization_max=utilization + 0.02,
        envoy_cpu_cores=utilization,
        envoy_memory_bytes=1e7,
        p50_ms=1.0,
        p95_ms=2.0,
        p99_ms=3.0,
        fail_ratio=0.0,
        requests=int(rps * 10),
        failures=0,
        generator_cpu_max=0.3,
        backend_cpu_cores=0.05,
        started_at=0.0,
        window_s=10.0,
        throttled_share=0.5 if utilization >= 0.97 else 0.0,  # a binding quota throttles at its limit
    )
    return step.model_copy(update=fields)


class SimulatedEnvoy:
    """Capacity `capacity_rps` at 100% CPU, an idle floor, and optional noise on utilization."""

    def __init__(self, capacity_rps: float, idle: float = 0.01, noise: float = 0.0, seed: int = 1) -> None:
        self.capacity = capacity_rps
        self.idle = idle
        self.noise = noise
        self.random = random.Random(seed)

    def run(self, index: int, level: LoadLevel, rps_per_user_closed: float = 400.0) -> Step:
        offered = level.target_rps if level.target_rps is not None else level.users * rps_per_user_closed
        rps = min(offered, self.capacity)
        utilization = self.idle + (1 - self.idle) * rps / self.capacity
        utilization = min(1.0, utilization + self.random.uniform(-self.noise, self.noise))
        return make_step(index, users=level.users, rps=rps, utilization=utilization, target_rps=level.target_rps)
