"""A scenario's measuring windows sized from how often its Prometheus scrapes (prometheus.scrape_interval_seconds).

A window is read from the counters Prometheus scraped inside it: with kube-prometheus-stack's 30 s kubelet scrape,
the default 10 s window holds no scrape at all, and the meter's growing of a short window (runner/measure.py,
MAX_WINDOW_FACTOR) only makes each window cost many times what was planned. So, unless the scenario sets them:
- load.step_seconds is at least MIN_SCRAPES_PER_WINDOW scrape intervals (the meter's MIN_CPU_SAMPLES samples
  land in every window whatever the scrapes' phase): 90 s at a 30 s scrape, 10 s (the default) at 1-3 s;
- load.max_seconds_per_config, the time a configuration may spend measuring, is WINDOWS_PER_CONFIG windows: 600 s
  at the default 10 s windows, as before.
A step_seconds the scenario sets below one scrape interval is refused: no window could hold a scrape.
"""

from __future__ import annotations

from collections.abc import Set

from runner.scenario.limits import MAX_SECONDS_PER_CONFIG, MAX_STEP_SECONDS

MIN_SCRAPES_PER_WINDOW = 3  # runner.metrics.MIN_CPU_SAMPLES
WINDOWS_PER_CONFIG = 60


def sized_to_scrapes(step_s: float, max_config_s: float, given: Set[str], scrape_interval_s: float) -> dict[str, float]:
    """The load fields (`step_s`, `max_config_s`) to change so that those the scenario leaves unset (not in
    `given`) are sized to the scrape interval; ValueError (one line with the fix) for a window it sets shorter
    than one scrape interval."""
    update: dict[str, float] = {}
    if "step_s" not in given:
        update["step_s"] = min(MAX_STEP_SECONDS, max(step_s, MIN_SCRAPES_PER_WINDOW * scrape_interval_s))
    elif step_s < scrape_interval_s:
        raise ValueError(
            f"load.step_seconds {step_s:g} is shorter than prometheus.scrape_interval_seconds "
            f"{scrape_interval_s:g}: no window would hold a scrape; set it to at least "
            f"{MIN_SCRAPES_PER_WINDOW * scrape_interval_s:g}, or leave it out to have it sized to the scrapes"
        )
    step_s = update.get("step_s", step_s)
    if "max_config_s" not in given:
        update["max_config_s"] = min(MAX_SECONDS_PER_CONFIG, max(max_config_s, WINDOWS_PER_CONFIG * step_s))
    return update
