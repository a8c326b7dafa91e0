"""Traffic profiles compared at the same Envoy CPU limit: knee, CPU per request, connection cost. Pure.

At a knee Envoy uses the threshold share of its limit, so the CPU it spends per request there is
`threshold x limit / knee` (runner.model.ConfigResult.knee_cpu_per_request_us). Two profiles that differ only
in opening a new connection per request then give the cost of one connection (and over TLS, of one full
handshake): the difference of their costs per request, divided by the connections each request opened. Both
are read at their own knees, where Envoy batches differently, so a connection's cost carries that much
uncertainty; with rounds, each round's pair of knees gives a cost and the interval comes from their scatter.
Each profile's knee against the first profile's is the headline's ratio (runner.report.headline),
paired round by round when the run had rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from runner.curve import Estimate
from runner.figures import connection_cost
from runner.profiles import TrafficProfile
from runner.report.headline import Headline, traffic
from runner.report.rows import ConfigRow
from runner.report.series import Ratio, group_key

__all__ = ["ConnectionCost", "ProfileComparison", "ProfileRow", "compare_profiles"]

REFERENCE_RPS = 1000.0  # cores are stated per this many RPS of each profile


@dataclass(frozen=True)
class ProfileRow:
    """One profile in one configuration (the same resources and arrivals as the other profiles' rows of
    its `group`), against the first profile's knee in that group."""

    row: ConfigRow
    vs_first: Ratio | None
    connections_per_request: float | None  # median over the windows below the threshold
    headroom: float

    @property
    def group(self) -> str:
        return group_key(self.row.config, "profile")

    @property
    def traffic(self) -> str:
        return traffic(self.row)

    @property
    def cores_per_1k_rps(self) -> float | None:
        """Envoy cores per REFERENCE_RPS with the headroom, at this limit's knee per core."""
        per_core = self.row.config.knee_per_core
        return REFERENCE_RPS * (1 + self.headroom) / per_core if per_core else None


@dataclass(frozen=True)
class ConnectionCost:
    """Envoy's CPU for one new connection (TCP accept, and over TLS a full handshake), at one CPU limit."""

    cpu_cores: float
    kept: str  # the keep-alive profile
    new: str  # the same profile with a connection per request
    tls: bool
    us_per_connection: float
    kept_us_per_request: float  # the keep-alive twin's CPU per request, for scale
    interval: Estimate | None = None  # from the rounds both profiles were measured in (runner.figures)

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

    first: str  # the profile the others are compared with (the sizing profile)
    rows: tuple[ProfileRow, ...]
    connection_costs: tuple[ConnectionCost, ...]
    headroom: float


def _connections_per_request(row: ConfigRow) -> float | None:
    """Below the threshold only: past it a throttled Envoy's scrapes come late (as the guards judge)."""
    values = [
        s.step.connections_per_request
        for s in row.steps
        if s.step.connections_per_request is not None and not s.at_limit
    ]
    return statistics.median(values) if values else None


def _shape(profile: TrafficProfile) -> tuple[bool, str | None, int | None, str | None]:
    """What a profile sends, connection reuse aside."""
    return profile.tls, profile.tls_key if profile.tls else None, profile.body_bytes, profile.accept_encoding


def _connection_costs(rows: Sequence[ProfileRow]) -> list[ConnectionCost]:
    """For each new-connection profile with a keep-alive twin (same TLS, key, body, encoding) in its group."""
    costs = []
    for row in rows:
        profile, cost = row.row.config.profile, row.row.cpu_per_request_us
        if not profile.new_connection or cost is None or not row.connections_per_request:
            continue
        kept = next(
            (
                r
                for r in rows
                if r.group == row.group
                and not r.row.config.profile.new_connection
                and _shape(r.row.config.profile) == _shape(profile)
                and r.row.cpu_per_request_us is not None
            ),
            None,
        )
        if kept is None or kept.row.cpu_per_request_us is None:
            continue
        extra = (cost - kept.row.cpu_per_request_us) / row.connections_per_request
        interval = connection_cost(row.row.config, kept.row.config, row.row.threshold, row.connections_per_request)
        extra = interval.value if interval is not None else extra  # paired: from the rounds both were measured in
        costs.append(
            ConnectionCost(
                row.row.cpu_cores,
                kept.row.profile,
                row.row.profile,
                profile.tls,
                extra,
                kept.row.cpu_per_request_us,
                interval,
            )
        )
    return costs


def compare_profiles(rows: Sequence[ConfigRow], headline: Headline, headroom: float) -> ProfileComparison | None:
    """The comparison, or None when the run measured one profile only."""
    measured = [r for r in rows if r.steps]
    names = list(dict.fromkeys(r.profile for r in measured))
    if len(names) < 2:
        return None
    first = headline.series.profile if headline.series is not None else names[0]
    ratios = {ratio.keys[0]: ratio for ratio in headline.profile_ratios}
    ordered = sorted(measured, key=lambda r: (r.cpu_cores, group_key(r.config, "profile"), names.index(r.profile)))
    profile_rows = [ProfileRow(r, ratios.get(r.config.key), _connections_per_request(r), headroom) for r in ordered]
    return ProfileComparison(first, tuple(profile_rows), tuple(_connection_costs(profile_rows)), headroom)
