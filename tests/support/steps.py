"""The one Step factory: a measured window with the figures a test names and plausible others."""

from __future__ import annotations

from runner.model import Step

THROTTLED_AT = 0.97  # utilization from which a binding quota throttles: the factory's steps say so
SPREAD = 0.02  # the utilization's min and max, either side of the mean


def make_step(
    index: int = 0,
    *,
    users: int = 10,
    rps: float = 1000.0,
    utilization: float = 0.5,
    target_rps: float | None = None,
    **fields: object,
) -> Step:
    """Window `index` serving `rps` at `utilization` of the CPU limit (the mean; min and max SPREAD either
    side; as many cores as the utilization, a limit of one core); `fields` replace any figure."""
    step = Step(
        index=index,
        users=users,
        target_rps=target_rps,
        rps=rps,
        envoy_rps=rps,
        cpu_utilization_min=utilization - SPREAD,
        cpu_utilization_mean=utilization,
        cpu_utilization_max=utilization + SPREAD,
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
        throttled_share=0.5 if utilization >= THROTTLED_AT else 0.0,  # a binding quota throttles at its limit
    )
    return step.model_copy(update=fields)
