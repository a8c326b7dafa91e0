"""What a sweep's windows say, shared by the end-to-end sweeps (local and cluster): a knee checked against the
windows it came from, and what one more request costs Envoy."""

from __future__ import annotations

from collections.abc import Sequence

from runner.knee import fit_windows
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


def assert_knee_counts_the_rounds_it_fitted(config: ConfigResult, threshold: float, planned: int) -> None:
    """The knee counts the rounds the fit used, and the search line says how it was found. A round whose windows all
    fall outside what the fit takes (runner.knee.fit_windows: guarded, clipped, or below ROUNDS_FLOOR of the
    threshold) drops out of the knee: at most one of `planned`. With two or more rounds left the knee is the rounds
    fit's, "from N rounds"; with one, one pass's or interpolated, and the search line says which."""
    knee, search = config.knee, config.search or ""
    assert knee is not None, config.reason
    fitted = {s.round for s in fit_windows(config.steps, threshold)}
    windows = [(s.round, round(s.rps), s.cpu_utilization_mean) for s in config.steps]
    assert planned - 1 <= len(fitted) <= planned, (fitted, windows)
    if len(fitted) >= 2:
        assert knee.method == "rounds" and knee.rounds == len(fitted), (knee, fitted)
        assert f"from {knee.rounds} rounds" in search, search
    else:
        assert knee.method in ("power-fit", "interpolated") and knee.rounds is None, knee
        assert "from one pass" in search or "interpolated" in search, search
