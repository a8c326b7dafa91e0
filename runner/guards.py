"""Validity guards: was Envoy the bottleneck of a step, or something else? Pure.

A knee only counts when Envoy, not the load generator or the backend, limited the run, failures stayed
low, and the client and Envoy counted the same requests. Each guard that fires names what it saw and
what to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.measure import Step

GENERATOR_CPU_LIMIT = 0.90  # a Locust worker at or above this share of the CPU it has is saturated
BACKEND_CPU_LIMIT = 0.90
FAIL_RATIO_LIMIT = 0.01
RPS_MISMATCH_LIMIT = 0.05  # client-side vs Envoy-side RPS
SHORTFALL_LIMIT = 0.05  # achieved below offered by more than this, with Envoy under the threshold
FLAT_GROWTH_OFFERED = 0.20  # offered load grew at least this much ...
FLAT_GROWTH_ACHIEVED = 0.05  # ... but throughput grew less than this ...
FLAT_ENVOY_CEILING = 0.80  # ... while Envoy stayed below this utilization


@dataclass(frozen=True)
class Finding:
    """A guard that fired: its name, what it saw, and what to change."""

    guard: str
    detail: str
    advice: str

    @property
    def message(self) -> str:
        return f"{self.detail}: {self.advice}"


@dataclass(frozen=True)
class GuardContext:
    """What the guards need beyond the step: the threshold and the sweep's generator size."""

    threshold: float
    workers: int


def _offered(step: Step) -> float | None:
    return step.target_rps


def check_step(step: Step, previous: Sequence[Step], context: GuardContext) -> list[Finding]:
    """Every guard that fires for `step` (given the steps measured before it in its configuration)."""
    findings: list[Finding] = []
    below_threshold = step.cpu_utilization_mean < context.threshold
    if step.generator_cpu_max >= GENERATOR_CPU_LIMIT:
        findings.append(
            Finding(
                "generator-saturated",
                f"load generator saturated: a Locust worker at {step.generator_cpu_max:.0%} CPU",
                f"add Locust workers (WORKERS={context.workers + 1} or more) or use the lean client",
            )
        )
    offered = _offered(step)
    # Measured saturation comes before inferred: a saturated backend also explains a shortfall.
    if step.backend_cpu_max >= BACKEND_CPU_LIMIT:
        findings.append(
            Finding(
                "backend-saturated",
                f"backend saturated: an nginx replica at {step.backend_cpu_max:.0%} of its CPU",
                "add nginx replicas (NGINX_REPLICAS) or raise their CPU limit",
            )
        )
    if offered and below_threshold and step.rps < offered * (1 - SHORTFALL_LIMIT):
        findings.append(
            Finding(
                "generator-shortfall",
                f"load not delivered: {step.rps:,.0f} of {offered:,.0f} offered RPS "
                f"({step.rps / offered:.0%}) with Envoy at {step.cpu_utilization_mean:.0%}",
                f"add Locust workers (WORKERS={context.workers + 1} or more), use the lean client, "
                "or leave the generator more CPU",
            )
        )
    if step.backend_cpu_max < BACKEND_CPU_LIMIT and previous and below_threshold:
        last = previous[-1]
        last_offered, this_offered = _offered(last) or last.users, offered or step.users
        if (
            last.rps > 0
            and this_offered >= last_offered * (1 + FLAT_GROWTH_OFFERED)
            and step.rps < last.rps * (1 + FLAT_GROWTH_ACHIEVED)
            and step.cpu_utilization_mean < FLAT_ENVOY_CEILING
        ):
            findings.append(
                Finding(
                    "throughput-flat",
                    f"throughput flat at {step.rps:,.0f} RPS while offered load grew "
                    f"{this_offered / last_offered - 1:.0%} and Envoy stayed at {step.cpu_utilization_mean:.0%}",
                    "something other than Envoy limits the run: check the backend and the generator",
                )
            )
    if step.fail_ratio > FAIL_RATIO_LIMIT:
        findings.append(
            Finding(
                "failures",
                f"{step.fail_ratio:.1%} of requests failed (limit {FAIL_RATIO_LIMIT:.0%})",
                "check the backend's answers and the Locust errors in the run's logs",
            )
        )
    # Past the threshold Envoy is throttled, its admin endpoint with it: a scrape stamped at t reads the
    # counter some time later, so over a short window the two counts drift apart without foreign load.
    if below_threshold and step.rps > 0 and abs(step.envoy_rps - step.rps) > RPS_MISMATCH_LIMIT * step.rps:
        findings.append(
            Finding(
                "rps-mismatch",
                f"client counted {step.rps:,.0f} RPS but Envoy {step.envoy_rps:,.0f} "
                f"({abs(step.envoy_rps - step.rps) / step.rps:.0%} apart)",
                "make sure only this load reaches Envoy and that requests are not failing before it",
            )
        )
    return findings


def first_finding(steps: Sequence[Step], up_to_offered: float | None = None) -> Finding | None:
    """The first guard that fired on steps offered at most `up_to_offered` (all steps when None)."""
    for step in steps:
        offered = _offered(step) if step.target_rps is not None else float(step.users)
        if up_to_offered is not None and offered is not None and offered > up_to_offered:
            continue
        if step.guards:
            return Finding(**step.guards[0])
    return None
