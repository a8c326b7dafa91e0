"""Validity guards: was Envoy the bottleneck of a step, or something else? Pure.

A knee only counts when Envoy, not the load generator or the backend, limited the run, failures stayed
low, and the client and Envoy counted the same requests. Each guard is one function from a step (and the
steps before it) to a `Finding` or None; `GUARDS` lists them in the order their findings are reported,
measured causes before inferred ones. `judge` turns a configuration's findings into its verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runner.model import Finding, Step
from runner.profiles import PLAIN_PROFILE, TrafficProfile

GENERATOR_CPU_LIMIT = 0.90  # a Locust worker at or above this share of the CPU it has is saturated
GENERATOR_BUSY = 0.75  # ... and at this share it may fall behind its schedule (calibrate.WORKER_BUSY_TARGET)
GENERATOR_IDLE = 0.25  # ... and a worker behind at under this share was waiting for a CPU, not short of its own
HELD_BACK_GAP_SHARE = 0.5  # p99 over this share of a paced user's gap between requests delays its next one
BACKEND_CPU_LIMIT = 0.90
FAIL_RATIO_LIMIT = 0.01
RPS_MISMATCH = "rps-mismatch"  # the guard's name, as findings carry it
RPS_MISMATCH_LIMIT = 0.05  # client-side vs Envoy-side RPS, at least; short windows allow more (rps_mismatch_limit)
SCRAPE_INTERVAL_S = 1.0  # the scenarios' default Prometheus scrape interval
SCRAPE_STAMP_JITTER_S = 0.25  # how far a scrape's stamp may be from when Envoy answered it
SHORTFALL_LIMIT = 0.05  # achieved below offered by more than this, with Envoy under the threshold ...
CHANCE_SIGMAS = 3.0  # a count is off by chance within this many standard deviations of a Poisson count
FLAT_GROWTH_OFFERED = 0.20  # offered load grew at least this much ...
FLAT_GROWTH_ACHIEVED = 0.05  # ... but throughput grew less than this ...
FLAT_ENVOY_CEILING = 0.80  # ... while Envoy stayed below this utilization
LIMIT_OVERSHOOT = 0.03  # Envoy's CPU may read up to 3% over its limit (sampling); more means no quota binds
THROTTLE_EVIDENCE_FROM = 0.97  # at this utilization a binding CFS quota throttles some periods
NOT_ENFORCED = "the CPU limit is not enforced (kubelet --cpu-cfs-quota=false?)"
NEW_CONNECTION_SHARE = 0.90  # a new-connection profile: at least this share of requests opened one
KEEPALIVE_CHURN_LIMIT = 0.05  # a keep-alive profile: at most this many new connections per request


@dataclass(frozen=True)
class GuardContext:
    """What the guards need beyond the step: the threshold, the sweep's generator size, and the traffic
    profile the configuration runs."""

    threshold: float
    workers: int
    profile: TrafficProfile = PLAIN_PROFILE
    scrape_interval_s: float = SCRAPE_INTERVAL_S  # how often Envoy's counters are scraped (rps_mismatch_limit)


Guard = Callable[[Step, Sequence[Step], GuardContext], Finding | None]


def generator_saturated(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    """A Locust worker used (nearly) all the CPU it has."""
    if step.generator_cpu_max < GENERATOR_CPU_LIMIT:
        return None
    return Finding(
        guard="generator-saturated",
        detail=f"load generator saturated: a Locust worker at {step.generator_cpu_max:.0%} CPU",
        advice=f"add Locust workers (WORKERS={context.workers + 1} or more) or use the lean client",
    )


def backend_saturated(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    """An nginx replica used (nearly) all the CPU it has. Measured, so it comes before the shortfall it causes."""
    if step.backend_cpu_max < BACKEND_CPU_LIMIT:
        return None
    return Finding(
        guard="backend-saturated",
        detail=f"backend saturated: an nginx replica at {step.backend_cpu_max:.0%} of its CPU",
        advice="add nginx replicas (NGINX_REPLICAS) or raise their CPU limit",
    )


def shortfall_limit(step: Step) -> float:
    """How far below the offered rate a window may fall by chance: SHORTFALL_LIMIT plus CHANCE_SIGMAS of
    the relative spread of a Poisson count of the requests offered in the window (1/sqrt(n)): 450 requests
    (150 RPS for 3 s) vary by 4.7%, so a fixed 5% would call every sixth short window a shortfall."""
    expected = (step.target_rps or 0.0) * step.window_s
    return SHORTFALL_LIMIT + (CHANCE_SIGMAS / math.sqrt(expected) if expected > 0 else 0.0)


def held_back_by_envoy(step: Step) -> bool:
    """The generator was not busy, Envoy ran against its quota (the throttled regime) and answered late:
    Envoy, not the generator, cost the shortfall. A paced user sends on one connection, so an answer later
    than half its gap between requests delays its next one, and a quota that throttles Envoy in bursts does
    that while its mean utilization stays below the threshold. Slow answers from an unthrottled Envoy with an
    idle-looking generator are not enough: a generator starved of CPU by another process reads idle too."""
    if step.generator_cpu_max >= GENERATOR_BUSY or not step.target_rps or step.users <= 0:
        return False
    gap_ms = 1000.0 * step.users / step.target_rps
    slow = step.p99_ms is not None and step.p99_ms >= HELD_BACK_GAP_SHARE * gap_ms
    return slow and step.regime == "throttled"


def generator_shortfall(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    """The offered rate was not delivered while Envoy still had room, and the generator is to blame: it was
    busy, or Envoy answered promptly and ran unthrottled. A shortfall with an idle generator behind a slow or
    throttled Envoy is where Envoy breaks (the capacity), not a generator that needs help."""
    offered = step.target_rps
    if (
        not offered
        or step.cpu_utilization_mean >= context.threshold
        or step.rps >= offered * (1 - shortfall_limit(step))
        or held_back_by_envoy(step)
    ):
        return None
    return Finding(
        guard="generator-shortfall",
        detail=f"load not delivered: {step.rps:,.0f} of {offered:,.0f} offered RPS "
        f"({step.rps / offered:.0%}) with Envoy at {step.cpu_utilization_mean:.0%}, the busiest Locust worker "
        f"at {step.generator_cpu_max:.0%} of its CPU",
        advice=_shortfall_advice(step, context),
    )


def _shortfall_advice(step: Step, context: GuardContext) -> str:
    """More generator when it was busy; a busy machine when it was idle but behind (a process starved of CPU by
    others, or by the hypervisor, reads idle: more Locust workers on the same cores would not help)."""
    if step.generator_cpu_max >= GENERATOR_IDLE:
        more = f"WORKERS={context.workers + 1} or more"
        return f"add Locust workers ({more}), use the lean client, or leave the generator more CPU"
    steal = f"steal time {step.steal_share:.1%} in this window" if step.steal_share is not None else "steal not read"
    return (
        "the generator was idle but behind: something else held this machine's CPU (other processes, or the "
        f"hypervisor: {steal}); measure on a quiet machine, more Locust workers would not help"
    )


def throughput_flat(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    """More load offered, no more served, and Envoy far from its limit: something else limits the run."""
    if not previous or step.backend_cpu_max >= BACKEND_CPU_LIMIT or step.cpu_utilization_mean >= context.threshold:
        return None
    last = previous[-1]
    if (
        last.rps > 0
        and step.offered >= last.offered * (1 + FLAT_GROWTH_OFFERED)
        and step.rps < last.rps * (1 + FLAT_GROWTH_ACHIEVED)
        and step.cpu_utilization_mean < FLAT_ENVOY_CEILING
    ):
        return Finding(
            guard="throughput-flat",
            detail=f"throughput flat at {step.rps:,.0f} RPS while offered load grew "
            f"{step.offered / last.offered - 1:.0%} and Envoy stayed at {step.cpu_utilization_mean:.0%}",
            advice="something other than Envoy limits the run: check the backend and the generator",
        )
    return None


def failures(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    if step.fail_ratio <= FAIL_RATIO_LIMIT:
        return None
    return Finding(
        guard="failures",
        detail=f"{step.fail_ratio:.1%} of requests failed (limit {FAIL_RATIO_LIMIT:.0%})",
        advice="check the backend's answers and the Locust errors in the run's logs",
    )


def rps_mismatch_limit(step: Step, scrape_interval_s: float) -> float:
    """How far apart the client's and Envoy's rates may fall by chance. The client counts the whole window,
    Envoy from its first to its last scrape in it, up to a scrape interval less: the requests of that unshared
    span move the two rates apart by a Poisson count's spread (3 s at 200 RPS with 1 s scrapes: 2.9%, 15 s at
    2,000 RPS: 0.2%), and each scrape's stamp may be SCRAPE_STAMP_JITTER_S off (0.25 s of 3 s: 8%). The two
    add as independent errors, CHANCE_SIGMAS of the first; never below RPS_MISMATCH_LIMIT. A CI run read 9%
    at 204 RPS over 3 s, all of it chance (the same configuration read 1-5% in other runs)."""
    window = max(step.window_s, 1.0)
    unshared = min(scrape_interval_s, window / 2)
    counted = step.rps * window * (window - unshared)
    spread = CHANCE_SIGMAS * math.sqrt(unshared / counted) if counted > 0 else 0.0
    return max(RPS_MISMATCH_LIMIT, math.hypot(spread, SCRAPE_STAMP_JITTER_S / window))


def rps_mismatch(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    """Client and Envoy counted different loads: foreign load, or requests failing before Envoy.

    Judged below the threshold only: past it Envoy is throttled, its admin endpoint with it, so a scrape
    stamped at t reads the counter some time later and over a short window the two counts drift apart.
    """
    if step.cpu_utilization_mean >= context.threshold or step.rps <= 0:
        return None
    gap = abs(step.envoy_rps - step.rps) / step.rps
    if gap <= rps_mismatch_limit(step, context.scrape_interval_s):
        return None
    return Finding(
        guard=RPS_MISMATCH,
        detail=f"client counted {step.rps:,.0f} RPS but Envoy {step.envoy_rps:,.0f} ({gap:.0%} apart)",
        advice="make sure only this load reaches Envoy and that requests are not failing before it",
    )


def cpu_limit_exceeded(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    """An Envoy pod used more CPU than its own limit allows: the quota does not bind. Judged per pod (the step's
    utilization is its busiest pod's): a fleet's CPU summed over its pods is no pod's."""
    if step.cpu_utilization_max <= 1 + LIMIT_OVERSHOOT:
        return None
    over = max(step.pods, key=lambda p: p.cpu_utilization_max) if len(step.pods) > 1 else None
    who = f"Envoy pod {over.pod}" if over is not None else "Envoy"
    return Finding(
        guard="cpu-limit-not-enforced",
        detail=f"{who} used {step.cpu_utilization_max:.0%} of its CPU limit",
        advice=f"{NOT_ENFORCED}: a knee means nothing where the limit does not hold",
    )


def worker_at_wall(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    """An Envoy worker thread ran at its wall (all of one core) while its pod, limited to more than one core, stayed
    under the threshold: the pod's capacity is that thread's, not its CPU limit's (one connection-heavy worker, or
    fewer threads than cores), and its utilization reads low while it is full.

    Not judged under a limit of one core or less: there a thread's wall is the limit, a thread at it is the pod at
    it, and a thread reading a little over its own pod near the threshold (91% against 89%) is the two readings'
    timing, not a pod full early."""
    hot = [p for p in step.pods if p.thread_can_fill_early and (p.hottest_worker_share or 0.0) >= context.threshold]
    pod = next((p for p in hot if p.cpu_utilization_mean < context.threshold), None)
    if pod is None:
        return None
    spread = f", {pod.worker_spread:.1f}x the mean worker" if pod.worker_spread is not None else ""
    return Finding(
        guard="worker-at-wall",
        detail=f"a worker thread of {pod.pod} at {pod.hottest_worker_share:.0%} of what one thread can use{spread}, "
        f"the pod at {pod.cpu_utilization_mean:.0%} of its CPU limit",
        advice="the pod is full before its CPU limit: more worker threads (envoy.concurrency) or more pods",
    )


def connections_off_profile(step: Step, previous: Sequence[Step], context: GuardContext) -> Finding | None:
    """Envoy saw other connection reuse than the profile asks for: a new-connection profile whose requests
    shared connections, or keep-alive connections closed and reopened. Judged below the threshold, as the
    RPS comparison is (a throttled Envoy's scrapes come late)."""
    per_request = step.connections_per_request
    if per_request is None or step.cpu_utilization_mean >= context.threshold:
        return None
    profile = context.profile
    if profile.new_connection and per_request < NEW_CONNECTION_SHARE:
        detail = f"only {per_request:.0%} of requests opened a new connection, profile {profile.name} asks for all"
    elif not profile.new_connection and per_request > KEEPALIVE_CHURN_LIMIT:
        detail = f"{per_request:.0%} of requests opened a new connection on a keep-alive profile"
    else:
        return None
    return Finding(
        guard="connections-off-profile",
        detail=detail,
        advice="check that the lean client runs (load.client: lean) and what closes connections (idle timeouts)",
    )


GUARDS: tuple[Guard, ...] = (
    cpu_limit_exceeded,
    worker_at_wall,
    generator_saturated,
    backend_saturated,
    generator_shortfall,
    throughput_flat,
    failures,
    rps_mismatch,
    connections_off_profile,
)


def check_step(step: Step, previous: Sequence[Step], context: GuardContext) -> list[Finding]:
    """Every guard that fires for `step` (given the steps measured before it in its configuration)."""
    return [finding for guard in GUARDS if (finding := guard(step, previous, context)) is not None]


def first_finding(steps: Sequence[Step], up_to_rps: float | None = None) -> Finding | None:
    """The first guard that fired on steps that delivered at most `up_to_rps` (all steps when None).
    Delivered RPS, not offered load: it is in the knee's units in both modes, and a window that fell
    short of its offered rate still counts where it landed."""
    for step in steps:
        if up_to_rps is not None and step.rps > up_to_rps:
            continue
        if step.guards:
            return step.guards[0]
    return None


def limit_enforced(steps: Sequence[Step]) -> Finding | None:
    """The configuration's proof that the CPU limit bound: no window over it (see cpu_limit_exceeded), and
    CFS throttling in the windows where Envoy ran at its limit. None when nothing contradicts it."""
    exceeded = next((f for s in steps for f in s.guards if f.guard == "cpu-limit-not-enforced"), None)
    if exceeded is not None:
        return exceeded
    # throttled_share None: the platform published no throttling counter, which is no evidence either way
    at_limit = [s for s in steps if s.cpu_utilization_mean >= THROTTLE_EVIDENCE_FROM and s.throttled_share is not None]
    if at_limit and not any(s.throttled_share for s in at_limit):
        peak = max(s.cpu_utilization_mean for s in at_limit)
        return Finding(
            guard="cpu-limit-not-enforced",
            detail=f"no CFS throttling seen with Envoy at {peak:.0%} of its CPU limit",
            advice=f"{NOT_ENFORCED}: a knee means nothing where the limit does not hold",
        )
    return None


def judge(steps: Sequence[Step], knee_up_to: float | None, reason: str | None) -> tuple[str, str | None]:
    """The verdict: the CPU limit must be shown to bind (`limit_enforced`); then a knee counts only if no
    guard fired on a window that delivered up to `knee_up_to` RPS (KneeResult.judged_up_to); without a
    knee, a guard that fired says why, else `reason` (why there is none)."""
    unenforced = limit_enforced(steps)
    if unenforced is not None:
        return "invalid", unenforced.message
    if knee_up_to is not None:
        finding = first_finding(steps, up_to_rps=knee_up_to)
        return ("invalid", finding.message) if finding else ("saturated", None)
    finding = first_finding(steps)
    return ("invalid", finding.message) if finding else ("not-saturated", reason)
