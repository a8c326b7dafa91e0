"""What a sweep's windows say, shared by the end-to-end sweeps (local and cluster): a knee checked against the
windows it came from and the rounds it fitted."""

from __future__ import annotations

from runner.knee import fit_windows
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


def assert_knee_says_how_it_was_found(config: ConfigResult, threshold: float, planned: int) -> None:
    """The knee counts the rounds its fit used, and the search line says how it was found. A round whose windows
    all fall outside what the fit takes (runner.knee.fit_windows: guarded, clipped, or below ROUNDS_FLOOR of the
    threshold) drops out of it. A rounds knee is "from N rounds", N the rounds its windows came from; where the
    rounds give no fit in range (a machine whose speed moved between rounds), one pass's fit or the two windows
    either side give the knee, and the search line says which."""
    knee, search = config.knee, config.search or ""
    assert knee is not None, config.reason
    fitted = {s.round for s in fit_windows(config.steps, threshold)}
    windows = [(s.round, round(s.rps), round(s.cpu_utilization_mean, 3)) for s in config.steps]
    assert fitted <= set(range(1, planned + 1)), (fitted, windows)
    if knee.method == "rounds":
        assert knee.rounds == len(fitted) >= 2, (knee, fitted, windows)
        assert f"from {knee.rounds} rounds" in search, search
    elif knee.method == "power-fit":
        scatter = f"fitted to {knee.windows} windows that scatter too much"
        said = "from one pass" if knee.half_width is not None else scatter
        assert knee.rounds is None and said in search, search
    else:
        assert knee.method == "interpolated" and "knee interpolated between the 2 windows" in search, search
