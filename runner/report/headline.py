"""What the report says first, pure: the figure sizing reads with its honest interval, the ratios between
configurations measured in the same run, how the knee grows with the CPU limit (or what a third limit would
settle), the machine's own drift during the run, and what the clients asked for.

Every figure here carries where its interval comes from, or says that it has none: never a slope between two
knees without one, never a straight line with a negative intercept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.figures import ControlDrift, control_drift
from runner.model import RunSummary
from runner.report import formatting as fmt
from runner.report.fleet import build_fleet
from runner.report.rows import ConfigRow
from runner.report.series import Ratio, Series, group_key, ratio_of

__all__ = ["Headline", "build_headline", "traffic"]

PREFERRED_ARRIVALS = "poisson"


def _parts(row: ConfigRow) -> list[str]:
    profile = row.config.profile
    return [*profile.description.split(", "), *([row.compression] if profile.accept_encoding is None else [])]


def traffic(row: ConfigRow) -> str:
    """ "plain HTTP, keep-alive, clients ask for compression (Accept-Encoding: gzip, deflate, br)" """
    return ", ".join(_parts(row))


def difference(a: ConfigRow, b: ConfigRow) -> str:
    """What a's traffic has that b's has not, against the reverse: "TLS (rsa-2048) vs plain HTTP"."""
    parts_a, parts_b = _parts(a), _parts(b)
    only_a = [p for p in parts_a if p not in parts_b] or [a.profile]
    only_b = [p for p in parts_b if p not in parts_a] or [b.profile]
    return f"{', '.join(only_a)} vs {', '.join(only_b)}"


@dataclass(frozen=True)
class Headline:
    """The report's first screen: `lead` is its first sentence."""

    lead: str
    series: Series | None
    profile_ratios: tuple[Ratio, ...]  # each profile's knee over the sizing profile's, at one CPU limit
    arrival_ratios: tuple[Ratio, ...]  # each arrival model's knee over Poisson's, at one CPU limit
    scaling: str  # how the knee grows with the limit, or what another limit would settle
    noise: str  # the machine's own drift during the run (the control window), or that it was not measured
    drift: ControlDrift | None
    compression: str  # what each profile's clients asked for
    speed_moved: float | None = None  # how far the reference loop before each configuration moved between them
    fleet: str = ""  # with several Envoy pods: the pods, the knee per pod, the fleet's knee, the scale-out efficiency

    @property
    def ratios(self) -> tuple[Ratio, ...]:
        """The profiles' and the arrival models' ratios (the limits' are the series')."""
        return (*self.profile_ratios, *self.arrival_ratios)


def _valid(rows: Sequence[ConfigRow]) -> list[ConfigRow]:
    return [r for r in rows if r.knee is not None]


def _profile_ratios(rows: Sequence[ConfigRow], first: str, threshold: float) -> list[Ratio]:
    """Each other profile's knee over the sizing profile's, at the same limit and arrivals."""
    bases = {group_key(r.config, "profile"): r for r in _valid(rows) if r.profile == first}
    ratios = []
    for row in _valid(rows):
        base = bases.get(group_key(row.config, "profile"))
        if base is None or row is base:
            continue
        label = f"{row.profile} / {base.profile}, knee at {fmt.cpu(row.cpu_cores)}, {row.config.arrivals} arrivals"
        compared = difference(row, base)
        ratio = ratio_of(row.config, base.config, threshold, per_core=False, label=label, compared=compared)
        ratios += [ratio] if ratio is not None else []
    return ratios


def _arrival_ratios(rows: Sequence[ConfigRow], threshold: float) -> list[Ratio]:
    """Each other arrival model's knee over Poisson's (or the first measured), same resources and profile."""
    groups: dict[str, list[ConfigRow]] = {}
    for row in _valid(rows):
        groups.setdefault(group_key(row.config, "arrivals"), []).append(row)
    ratios = []
    for members in groups.values():
        base = next((r for r in members if r.config.arrivals == PREFERRED_ARRIVALS), members[0])
        for row in members:
            if row is base:
                continue
            arrivals = f"{row.config.arrivals} / {base.config.arrivals} arrivals"
            label = f"{arrivals}, knee at {fmt.cpu(row.cpu_cores)}, {row.profile}"
            compared = f"{row.config.arrivals} vs {base.config.arrivals} arrivals"
            ratio = ratio_of(row.config, base.config, threshold, per_core=False, label=label, compared=compared)
            ratios += [ratio] if ratio is not None else []
    return ratios


def _compression(rows: Sequence[ConfigRow]) -> str:
    """What clients asked for, per profile when the profiles differ in it."""
    asked = dict.fromkeys((r.profile, r.compression) for r in rows)
    texts = {text for _, text in asked}
    if len(texts) == 1:
        return texts.pop()
    return "; ".join(f"{profile}: {text}" for profile, text in asked)


def _sent_without_windows(summary: RunSummary) -> str | None:
    """What the clients of a run without a measured window asked for: the memory model's light load's, else its
    first configuration's (None: not recorded)."""
    if summary.memory is not None:
        return summary.memory.accept_encoding
    return summary.configs[0].accept_encoding if summary.configs else None


def _lead(series: Series | None, rows: Sequence[ConfigRow], memory: bool) -> str:
    if series is not None:
        return f"{series.largest.text}; {series.traffic}."
    if not rows:
        return (
            "This run measured Envoy's memory model only (memory.only), no knee: its fits are under Memory."
            if memory
            else "No configuration was measured."
        )
    if all(r.config.envoy.replicas > 1 for r in rows):
        return (
            "This run measured fleets of several Envoy pods only, and sizing reads one pod's knee: sweep one pod too "
            "(ENVOY_REPLICAS=1,2); the fleets' figures are under Fleet."
        )
    why = "; ".join(
        f"{r.label}: {r.config.status}" + (f" ({r.config.reason})" if r.config.reason else "") for r in rows
    )
    return f"No valid knee, so no figure to size from: {why}."


def build_headline(summary: RunSummary, rows: Sequence[ConfigRow], series: Series | None) -> Headline:
    """The headline of one run's report."""
    measured = [r for r in rows if r.steps]
    first = series.profile if series is not None else (measured[0].profile if measured else "")
    drift = control_drift(summary)
    speeds = [r.config.machine_speed for r in measured if r.config.machine_speed]
    moved = max(speeds) / min(speeds) - 1 if len(speeds) > 1 else None
    noise = fmt.drift_text(drift, summary.rounds)
    if moved is not None:
        noise += f"; a reference loop before each configuration ran up to {moved:.0%} faster at one than at another"
    return Headline(
        lead=_lead(series, measured, summary.memory is not None),
        series=series,
        profile_ratios=tuple(_profile_ratios(measured, first, summary.threshold)),
        arrival_ratios=tuple(_arrival_ratios(measured, summary.threshold)),
        scaling=series.scaling.text if series is not None else "",
        noise=noise,
        drift=drift,
        compression=_compression(measured) if measured else fmt.compression(_sent_without_windows(summary)),
        speed_moved=moved,
        fleet=fleet.headline if (fleet := build_fleet(summary, [r.config for r in measured])) is not None else "",
    )
