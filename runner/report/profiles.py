"""Traffic profiles compared at the same Envoy CPU limit: knee, CPU per request, connection cost. Pure.

At a knee Envoy uses the threshold share of its limit, so the CPU it spends per request there is
`threshold x limit / knee` (as the knee table states it). Two profiles that differ only in opening a new
connection per request then give the cost of one connection (and over TLS, of one full handshake): the
difference of their costs per request, divided by the connections each request opened. Both are read at
their own knees, where Envoy batches differently, so a connection's cost carries that much uncertainty.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from runner.model import ConfigResult, RunSummary
from runner.profiles import TrafficProfile
from runner.report.sizing import sizing_profile

__all__ = ["ConnectionCost", "ProfileComparison", "ProfileRow", "compare_profiles"]

REFERENCE_RPS = 1000.0  # cores are stated per this many RPS of each profile


@dataclass(frozen=True)
class ProfileRow:
    """One profile in one configuration (the same resources and arrivals as the other profiles' rows of
    its `group`)."""

    group: str  # the configuration's key without its profile
    profile: str
    description: str
    cpu_cores: float
    status: str
    knee_rps: float | None
    knee_low: float | None
    knee_high: float | None
    cpu_per_request_us: float | None  # at the knee
    connections_per_request: float | None  # median over the windows below the threshold
    vs_first: float | None  # knee / the first profile's knee at this limit
    cores_per_1k_rps: float | None  # Envoy cores per 1,000 RPS with the headroom, at this limit's rate per core

    @property
    def interval(self) -> str:
        """ "1,150-1,230" or "-" """
        if self.knee_low is None or self.knee_high is None:
            return "-"
        return f"{self.knee_low:,.0f}-{self.knee_high:,.0f}"


@dataclass(frozen=True)
class ConnectionCost:
    """Envoy's CPU for one new connection (TCP accept, and over TLS a full handshake), at one CPU limit."""

    group: str
    cpu_cores: float
    kept: str  # the keep-alive profile
    new: str  # the same profile with a connection per request
    tls: bool
    us_per_connection: float
    kept_us_per_request: float  # the keep-alive twin's CPU per request, for scale

    @property
    def what(self) -> str:
        return "a full TLS handshake and TCP accept" if self.tls else "a TCP accept"

    @property
    def requests_equivalent(self) -> float:
        """How many keep-alive requests of the twin one new connection costs as much as."""
        return self.us_per_connection / self.kept_us_per_request if self.kept_us_per_request > 0 else 0.0


@dataclass(frozen=True)
class ProfileComparison:
    """The profiles a run measured, side by side at each CPU limit."""

    first: str  # the profile the others are compared with (the scenario's first)
    rows: tuple[ProfileRow, ...]
    connection_costs: tuple[ConnectionCost, ...]
    headroom: float


def _median(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _connections_per_request(config: ConfigResult, threshold: float) -> float | None:
    """Below the threshold only: past it a throttled Envoy's scrapes come late (as the guards judge)."""
    values = [
        s.connections_per_request
        for s in config.steps
        if s.connections_per_request is not None and s.cpu_utilization_mean < threshold
    ]
    return _median(values)


def _group(config: ConfigResult) -> str:
    return re.sub(r",profile=[^,]*", "", config.key)


def _row(config: ConfigResult, threshold: float, first_knee: float | None, headroom: float) -> ProfileRow:
    knee = config.valid_knee
    cores = config.envoy.cpu_cores
    return ProfileRow(
        group=_group(config),
        profile=config.profile.name,
        description=config.profile.description,
        cpu_cores=cores,
        status=config.status,
        knee_rps=knee.rps if knee else None,
        knee_low=knee.low if knee else None,
        knee_high=knee.high if knee else None,
        cpu_per_request_us=threshold * cores / knee.rps * 1e6 if knee else None,
        connections_per_request=_connections_per_request(config, threshold),
        vs_first=knee.rps / first_knee if knee and first_knee else None,
        cores_per_1k_rps=REFERENCE_RPS * (1 + headroom) * cores / knee.rps if knee else None,
    )


def _shape(profile: TrafficProfile) -> tuple[bool, str | None, int | None]:
    """What a profile sends, connection reuse aside."""
    return profile.tls, profile.tls_key if profile.tls else None, profile.body_bytes


def _connection_costs(configs: Sequence[ConfigResult], rows: Sequence[ProfileRow]) -> list[ConnectionCost]:
    """For each new-connection profile with a keep-alive twin (same TLS, key and body) in the same group."""
    costs = []
    for config, row in zip(configs, rows, strict=True):
        if not config.profile.new_connection or row.cpu_per_request_us is None or not row.connections_per_request:
            continue
        twins = [
            r
            for c, r in zip(configs, rows, strict=True)
            if r.group == row.group and not c.profile.new_connection and _shape(c.profile) == _shape(config.profile)
        ]
        kept = next((r for r in twins if r.cpu_per_request_us is not None), None)
        if kept is None or kept.cpu_per_request_us is None:
            continue
        extra = (row.cpu_per_request_us - kept.cpu_per_request_us) / row.connections_per_request
        costs.append(
            ConnectionCost(
                row.group, row.cpu_cores, kept.profile, row.profile, config.profile.tls, extra, kept.cpu_per_request_us
            )
        )
    return costs


def compare_profiles(summary: RunSummary, headroom: float) -> ProfileComparison | None:
    """The comparison, or None when the run measured one profile only."""
    configs = [c for c in summary.configs if c.steps]
    names = list(dict.fromkeys(c.profile.name for c in configs))
    if len(names) < 2:
        return None
    first = sizing_profile(summary)
    first_knees = {_group(c): c.valid_knee.rps for c in configs if c.profile.name == first and c.valid_knee}
    ordered = sorted(configs, key=lambda c: (c.envoy.cpu_cores, _group(c), names.index(c.profile.name)))
    rows = [_row(c, summary.threshold, first_knees.get(_group(c)), headroom) for c in ordered]
    return ProfileComparison(first, tuple(rows), tuple(_connection_costs(ordered, rows)), headroom)
