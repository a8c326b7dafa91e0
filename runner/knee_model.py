"""The knee's records: the knee with its interval, and the knee per pod of a fleet. Pure data (runner.model
imports them; runner.records says how every record saves and loads)."""

from __future__ import annotations

from runner.records import Frozen

PLATEAU_EXPONENT = 0.35  # utilization ~ RPS^b with b below this: flat near the threshold, not a sharp knee


class Knee(Frozen):
    """The RPS at which Envoy's CPU reaches the threshold, with its 95% confidence interval: of a fleet of
    several pods, the fleet's RPS when its busiest pod reaches it.

    `method` says how it was found: `rounds` (a power law of utilization against RPS with one exponent and
    an intercept per round; the interval from the scatter between `rounds` rounds, so the machine's drift
    during the run is inside it), `power-fit` (one power law over the windows around the threshold, its
    interval from their scatter in one pass) or `interpolated` (between the two bracketing windows, when too
    few windows allow a fit; no interval then). `windows` is how many windows the estimate rests on;
    `exponent` is the fit's (utilization grows as RPS^exponent).
    """

    rps: float
    low: float | None = None
    high: float | None = None
    users: float | None = None
    method: str = "interpolated"
    windows: int = 2
    exponent: float | None = None  # of the power law utilization ~ RPS^exponent (below 1: cost falls)
    rounds: int | None = None  # rounds whose scatter gave the interval (method `rounds`)

    @property
    def interval(self) -> tuple[float, float] | None:
        return (self.low, self.high) if self.low is not None and self.high is not None else None

    def per_core(self, cores: float) -> float:
        """Knee RPS per core of a CPU limit of `cores`."""
        return self.rps / cores

    @property
    def plateau(self) -> bool:
        """Utilization flat near the threshold (the fit's exponent below PLATEAU_EXPONENT): not a sharp knee."""
        return self.exponent is not None and self.exponent < PLATEAU_EXPONENT

    @property
    def half_width(self) -> float | None:
        """The interval's larger side as a share of the knee (0.03 = +-3%), None without an interval."""
        if self.low is None or self.high is None or self.rps <= 0:
            return None
        return max(self.rps - self.low, self.high - self.rps) / self.rps


class PodKnee(Frozen):
    """The knee per pod: the RPS one Envoy pod serves when its CPU reaches the threshold, fitted from every
    pod's own windows as the fleet's knee is from the fleet's (with its interval the same way), beside the
    fleet it was measured in: how many pods, and how unevenly they shared the load near the knee (the busiest
    pod's RPS over the mean pod's, the median over those windows; 1.0 for one pod)."""

    knee: Knee
    pods: int
    imbalance: float | None = None
