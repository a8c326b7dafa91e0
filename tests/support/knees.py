"""What a sweep's windows say, shared by the end-to-end sweeps (local and cluster): a knee checked against the
windows it came from, and what one more request costs Envoy."""

from __future__ import annotations

from collections.abc import Sequence

from runner.model import ConfigResult, Step


def added_us_per_request(steps: Sequence[Step]) -> float:
    """Envoy's CPU one more request per second adds (microseconds), from the lowest and the highest window: the
    slope between them, in which Envoy's CPU with no load (stats, timers, scrapes), the same at both, cancels."""
    low, high = min(steps, key=lambda s: s.envoy_rps), max(steps, key=lambda s: s.envoy_rps)
    return 1e6 * (high.envoy_cpu_cores - low.envoy_cpu_cores) / (high.envoy_rps - low.envoy_rps)


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
