"""Checks of a knee against the windows it came from, shared by the end-to-end sweeps (local and cluster)."""

from __future__ import annotations

from runner.model import ConfigResult


def assert_windows_bracket_the_knee(config: ConfigResult, threshold: float = 0.90) -> None:
    """The knee lies where the windows say, not where a fit alone put it: a window below the threshold at a rate
    up to the knee's interval's upper end, and one at or above it from the interval's lower end (the knee itself
    without an interval). With interleaved rounds a slow round reaches the threshold below the run's knee and a
    fast one stays under it above, so the windows bracket the interval, not always the knee's one point."""
    knee = config.knee
    assert knee is not None, config.reason
    low, high = knee.interval or (knee.rps, knee.rps)
    rates = [(s.rps, s.cpu_utilization_mean) for s in config.steps]
    assert any(r <= high and u < threshold for r, u in rates), (knee, rates)
    assert any(r >= low and u >= threshold for r, u in rates), (knee, rates)
