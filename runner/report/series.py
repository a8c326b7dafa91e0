"""What sizing reads from a run, pure: each measured CPU limit's rate, how the rate per core changes with the
limit, and ratios between configurations measured in the same run, each with its interval or a plain
statement that it has none.

A limit's rate is its valid knee, or its capacity where latency broke below the knee (Envoy broke before its
CPU reached the threshold: the knee is then not a rate it serves). Ratios and the growth come from
runner.figures, paired round by round so that the machine's drift during the run cancels in them; a run of one
pass (before interleaved rounds) has no interval for any of them, and says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from runner.errors import UsageError
from runner.figures import Growth, growth, knee_ratio, per_core_ratio
from runner.model import ConfigResult, RunSummary
from runner.profiles import PLAIN
from runner.report import formatting as fmt

__all__ = [
    "SWEEP_HINT",
    "Rate",
    "Ratio",
    "Scaling",
    "Series",
    "build_series",
    "group_key",
    "ratio_of",
    "require_series",
    "sizing_profile",
]

SWEEP_HINT = "sweep two or more Envoy CPU limits, e.g. make sweep ENVOY_CPUS=0.15,0.3"
PREFERRED_ARRIVALS = "poisson"  # many independent clients: the realistic arrival model, sized from when measured
Trend = Literal["faster", "slower", "proportional"]


def group_key(config: ConfigResult, axis: str) -> str:
    """The configuration's key without one axis (`envoy`: its CPU limit; `profile`; `arrivals`): the
    configurations that differ only in that axis share it."""
    if axis == "envoy":
        return re.sub(r"^envoy=[^/]*/", "envoy=/", config.key)
    return re.sub(rf",{axis}=[^,]*", "", config.key)


def _one_pass(a: ConfigResult, b: ConfigResult) -> bool:
    return len({s.round for s in a.steps} & {s.round for s in b.steps}) <= 1


@dataclass(frozen=True)
class Ratio:
    """A ratio of two configurations measured in the same run, with its 95% interval from the rounds both
    were measured in (None: one pass, or too few shared rounds)."""

    label: str  # "knee per core, 500m / 250m"
    compared: str  # what differs between the two
    keys: tuple[str, str]  # the two configurations' keys, numerator first
    value: float
    low: float | None = None
    high: float | None = None
    rounds: int | None = None
    one_pass: bool = True

    @property
    def interval(self) -> tuple[float, float] | None:
        return (self.low, self.high) if self.low is not None and self.high is not None else None

    @property
    def source(self) -> str:
        """ "paired over 5 rounds", or why there is no interval."""
        if self.interval is not None:
            return f"paired over {self.rounds} rounds"
        return "one pass: no interval" if self.one_pass else "no interval: fewer than 3 rounds in common"

    @property
    def text(self) -> str:
        """ "1.19x, 95% CI 1.17-1.21 paired over 5 rounds" or "1.72x, one pass: no interval" """
        if self.interval is not None:
            return f"{fmt.times(self.value)}, 95% CI {fmt.interval(self.low, self.high)} {self.source}"
        return f"{fmt.times(self.value)}, {self.source}"

    @property
    def side(self) -> Trend | None:
        """Where the interval lies against 1: `faster` above, `slower` below, `proportional` across it; None
        without an interval."""
        if self.low is None or self.high is None:
            return None
        return "faster" if self.low > 1 else "slower" if self.high < 1 else "proportional"


def ratio_of(
    a: ConfigResult, b: ConfigResult, threshold: float, *, per_core: bool, label: str, compared: str
) -> Ratio | None:
    """knee(a) / knee(b) (or of their knees per core), paired round by round; None unless both knees count."""
    if a.valid_knee is None or b.valid_knee is None or a.knee_per_core is None or b.knee_per_core is None:
        return None
    estimate = (per_core_ratio if per_core else knee_ratio)(a, b, threshold)
    one_pass, keys = _one_pass(a, b), (a.key, b.key)
    if estimate is None:
        value = a.knee_per_core / b.knee_per_core if per_core else a.valid_knee.rps / b.valid_knee.rps
        return Ratio(label, compared, keys, value, one_pass=one_pass)
    return Ratio(label, compared, keys, estimate.value, estimate.low, estimate.high, estimate.rounds, one_pass)


@dataclass(frozen=True)
class Rate:
    """What one measured configuration serves, for sizing: its valid knee, or its capacity where latency broke
    below the knee (then its interval is the capacity's bracket: served at `low`, broken at `high`)."""

    config: ConfigResult
    source: Literal["knee", "capacity"]
    rps: float
    low: float | None
    high: float | None

    @property
    def cores(self) -> float:
        return self.config.envoy.cpu_cores

    @property
    def per_core(self) -> float:
        if self.source == "knee" and self.config.knee_per_core is not None:
            return self.config.knee_per_core
        return self.rps / self.cores  # the capacity per core

    @property
    def per_core_interval(self) -> tuple[float, float] | None:
        if self.source == "knee":
            return self.config.knee_per_core_interval
        return (self.low / self.cores, self.high / self.cores) if self.low and self.high else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return (self.low, self.high) if self.low is not None and self.high is not None else None

    @property
    def where(self) -> str:
        """ "the knee of Envoy 500m CPU" or "the capacity of Envoy 500m CPU" """
        return f"the {self.source} of Envoy {fmt.cpu(self.cores)} CPU"

    @property
    def source_text(self) -> str:
        """How far the figure is known: the knee's interval and where it comes from, or the capacity's bracket."""
        knee = self.config.valid_knee
        assert knee is not None
        if self.source == "knee":
            return fmt.knee_from(knee)
        capacity = self.config.capacity
        broken_at = capacity.broken_at if capacity is not None else None
        broke = f"broke at {fmt.rps(broken_at)}" if broken_at else "no rate measured broke it"
        rounds = capacity.rounds if capacity is not None and capacity.interval else None
        ci = f" (95% CI {fmt.interval(self.low, self.high)} over {rounds} rounds)" if rounds else ""
        return (
            f"latency broke before the CPU threshold: served in full up to {fmt.rps(self.rps)} RPS{ci}, {broke}, "
            f"below the knee of {fmt.rps(knee.rps)}"
        )

    @property
    def interval_source(self) -> str:
        """ "5 interleaved rounds", "no interval: one pass, ...", or the capacity's bracket."""
        knee = self.config.valid_knee
        return fmt.interval_source(knee) if self.source == "knee" and knee is not None else self.source_text

    @property
    def text(self) -> str:
        """ "4,658 RPS per core (95% CI 4,590-4,726) at the knee of Envoy 250m CPU (1,164 RPS; 95% CI
        1,148-1,181 RPS, 5 interleaved rounds)" """
        per_core = self.per_core_interval if self.source == "knee" else None
        ci = f" (95% CI {fmt.interval(*per_core)})" if per_core else ""
        return (
            f"{fmt.rps(self.per_core)} RPS per core{ci} at {self.where} ({fmt.rps(self.rps)} RPS; {self.source_text})"
        )


def rate_of(config: ConfigResult) -> Rate | None:
    """The configuration's rate for sizing; None without a valid knee."""
    knee = config.valid_knee
    if knee is None:
        return None
    below, capacity = config.capacity_over_knee, config.capacity
    if below is not None and below < 0 and capacity is not None:
        low, high = capacity.interval or (capacity.rps, capacity.broken_at)  # the rounds', or the bracket
        return Rate(config, "capacity", capacity.rps, low, high)
    return Rate(config, "knee", knee.rps, knee.low, knee.high)


@dataclass(frozen=True)
class Scaling:
    """How the knee per core changes with the CPU limit: each limit against the smallest, paired round by
    round, and with three limits or more the growth knee ~ cores^g with g's interval (runner.figures)."""

    limits: tuple[float, ...]
    per_core: tuple[tuple[float, Ratio], ...]  # each larger limit and its knee per core over the smallest's
    growth: Growth | None

    @property
    def trend(self) -> Trend | None:
        """`faster` (each added core serves more than the one before), `slower` or `proportional`, when an
        interval says so; None when no interval does."""
        if self.growth is not None:
            exponent = self.growth.exponent
            return "faster" if exponent.low > 1 else "slower" if exponent.high < 1 else "proportional"
        return self.per_core[-1][1].side if self.per_core else None

    @property
    def figure(self) -> str:
        """ "knee ~ cores^1.25, 95% CI 1.23-1.27 over 5 rounds" or the per-core ratios."""
        if self.growth is not None:
            g = self.growth.exponent
            return f"knee ~ cores^{g.value:.2f}, 95% CI {g.low:.2f}-{g.high:.2f} over {g.rounds} rounds"
        smallest = fmt.cpu(self.limits[0]) if self.limits else "-"
        ratios = "; ".join(f"{fmt.cpu(cores)} {ratio.text}" for cores, ratio in self.per_core)
        return f"knee per core against {smallest}: {ratios}"

    @property
    def text(self) -> str:
        """What the limits say of how the knee grows with the CPU limit, and what would settle the rest."""
        if len(self.limits) < 2:
            return (
                f"One CPU limit ({fmt.cpu(self.limits[0]) if self.limits else '-'}): how the knee per core changes "
                "with the limit is not measured; sweep two more limits (three fit a growth with its interval)."
            )
        span = f"{fmt.cpu(self.limits[0])}-{fmt.cpu(self.limits[-1])}"
        trend = self.trend
        phrase, consequence = _TRENDS[trend or "proportional"]
        if self.growth is not None:
            return f"Over {span} the knee grows {phrase} ({self.figure}): {consequence}."
        if len(self.limits) > 2:
            return (
                f"{len(self.limits)} CPU limits in one pass ({self.figure}): the growth's exponent needs interleaved "
                "rounds for an interval (runs with rounds fit it)."
            )
        third = self.limits[-1] * 2
        listed = ",".join(f"{c:g}" for c in (*self.limits, third))
        settle = (
            f"a third limit ({fmt.cpu(third)}: make sweep ENVOY_CPUS={listed}) would fit the growth knee ~ cores^g "
            "with its interval"
        )
        if trend is None:
            return (
                f"Two CPU limits ({self.figure}) show how the knee per core moved, not with what certainty: {settle}."
            )
        return f"Between {span} the knee grows {phrase} ({self.figure}): {consequence}; {settle}."


_TRENDS: dict[str, tuple[str, str]] = {
    "faster": ("faster than the CPU limit", "each added core serves more than the one before"),
    "slower": ("slower than the CPU limit", "each added core serves less than the one before"),
    "proportional": ("in proportion to the CPU limit", "within the interval, each core serves as much as the last"),
}


@dataclass(frozen=True)
class Series:
    """The configurations sizing reads: one per measured CPU limit (ascending), of one traffic profile and one
    arrival model, with how their knee per core changes with the limit."""

    profile: str
    arrivals: str
    rates: tuple[Rate, ...]
    scaling: Scaling
    compression: str  # what the profile's clients asked for

    @property
    def traffic(self) -> str:
        """ "plain traffic (plain HTTP, keep-alive), poisson arrivals; clients ask for compression (...)" """
        description = self.largest.config.profile.description
        return f"{self.profile} traffic ({description}), {self.arrivals} arrivals; {self.compression}"

    @property
    def smallest(self) -> Rate:
        return self.rates[0]

    @property
    def largest(self) -> Rate:
        return self.rates[-1]

    @property
    def cores_range(self) -> tuple[float, float]:
        return self.smallest.cores, self.largest.cores

    def basis_for(self, cores: float) -> Rate:
        """The rate whose per-core figure sizes `cores`: the largest measured limit at or below it (the
        smallest when `cores` lies below them all)."""
        below = [r for r in self.rates if r.cores <= cores + 1e-9]
        return below[-1] if below else self.smallest

    def rate_at(self, cores: float) -> Rate | None:
        """The measured rate at exactly `cores`, if the run measured that limit."""
        return next((r for r in self.rates if abs(r.cores - cores) < 1e-9), None)

    @property
    def peak_memory_bytes(self) -> float:
        return max((s.envoy_memory_bytes for r in self.rates for s in r.config.steps), default=0.0)

    @property
    def peak_rps(self) -> float:
        return max((s.rps for r in self.rates for s in r.config.steps), default=0.0)


def sizing_profile(summary: RunSummary) -> str:
    """The traffic profile sizing is for by default: the scenario's first (plain when it named none)."""
    return summary.configs[0].profile.name if summary.configs else PLAIN


def _limits_against_smallest(configs: Sequence[ConfigResult], threshold: float) -> tuple[tuple[float, Ratio], ...]:
    smallest, pairs = configs[0], []
    for config in configs[1:]:
        label = f"knee per core, {fmt.cpu(config.envoy.cpu_cores)} / {fmt.cpu(smallest.envoy.cpu_cores)}"
        ratio = ratio_of(config, smallest, threshold, per_core=True, label=label, compared="the CPU limit")
        if ratio is not None:
            pairs.append((config.envoy.cpu_cores, ratio))
    return tuple(pairs)


def build_series(summary: RunSummary, profile: str | None = None) -> Series | None:
    """The series of one traffic profile (default: `sizing_profile`): its valid knees of one Envoy pod with the
    preferred arrival model, in the resources of the first of them, one per CPU limit; None without a valid knee
    of one pod (a fleet's knee is its pods' together: runner.report.fleet)."""
    name = profile or sizing_profile(summary)
    valid = [
        c for c in summary.configs if c.profile.name == name and c.valid_knee is not None and c.envoy.replicas == 1
    ]
    if not valid:
        return None
    arrivals = PREFERRED_ARRIVALS if any(c.arrivals == PREFERRED_ARRIVALS for c in valid) else valid[0].arrivals
    group = group_key(next(c for c in valid if c.arrivals == arrivals), "envoy")
    by_limit: dict[float, ConfigResult] = {}
    for config in valid:
        if group_key(config, "envoy") == group:
            by_limit.setdefault(config.envoy.cpu_cores, config)
    configs = [by_limit[c] for c in sorted(by_limit)]
    rates = tuple(rate for c in configs if (rate := rate_of(c)) is not None)
    scaling = Scaling(
        tuple(sorted(by_limit)),
        _limits_against_smallest(configs, summary.threshold),
        growth(configs, summary.threshold),
    )
    return Series(name, arrivals, rates, scaling, fmt.compression(configs[0].accept_encoding))


def require_series(summary: RunSummary, profile: str | None = None) -> Series:
    """The run's series for a traffic profile, or a UsageError saying why there is none and what to run."""
    measured = list(dict.fromkeys(c.profile.name for c in summary.configs))
    if profile is not None and profile not in measured:
        raise UsageError(
            f"run {summary.run_id} measured no traffic profile {profile!r}",
            f"use one it measured: {', '.join(measured) or 'none'}",
        )
    series = build_series(summary, profile)
    if series is None:
        configs = [c for c in summary.configs if c.profile.name == (profile or sizing_profile(summary))]
        if configs and all(c.envoy.replicas > 1 for c in configs):
            raise UsageError(
                f"run {summary.run_id} measured fleets of several Envoy pods only; sizing reads one pod's knee",
                "sweep one pod too, e.g. make sweep ENVOY_REPLICAS=1,2",
            )
        why = "; ".join(f"{c.label}: {c.status}" + (f" ({c.reason})" if c.reason else "") for c in configs)
        raise UsageError(f"run {summary.run_id} has no valid knee ({why or 'no configuration'})", SWEEP_HINT)
    return series
