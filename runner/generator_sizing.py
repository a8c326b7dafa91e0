"""WORKERS=auto: Locust workers sized from the saved calibration for the plan's largest configuration.

workers = ceil(Envoy's saturated RPS per core x the largest Envoy CPU limit x 1.1 / (RPS per worker core x 0.75))
(`Calibration.workers_needed`): enough to offer ~10% more than the biggest knee with every worker below 75% busy,
under the 90% generator guard. The scenario is then loaded again with that count, so the usual bounds apply.
"""

from __future__ import annotations

from dataclasses import replace

from runner import calibrate
from runner.errors import UsageError
from runner.scenario import Overrides, Scenario, load_scenario

__all__ = ["AUTO", "is_auto", "load_sized", "workers_for"]

AUTO = "auto"


def is_auto(text: str | None) -> bool:
    return text is not None and text.strip().lower() == AUTO


def workers_for(scenario: Scenario) -> tuple[int, str]:
    """The workers the largest configuration of `scenario` needs, and how that was reached; UsageError without
    a calibration for the scenario's platform and client."""
    platform, client = scenario.platform, scenario.load.client
    found = calibrate.load(platform, client)
    if found is None:
        raise UsageError(
            f"WORKERS=auto needs a calibration of the {client} client on {platform}, and there is none",
            f"run `gateway-sizer calibrate --platform {platform} --client {client} --workers 2` first",
        )
    top = max(scenario.envoy.cpu_cores)  # the plan's largest configuration
    needed = found.workers_needed(top)
    offered = found.envoy_rps_per_core * top * calibrate.HEADROOM
    per_worker = found.rps_per_worker_core * calibrate.WORKER_BUSY_TARGET
    why = (
        f"WORKERS=auto: {needed} worker(s) = ceil({offered:,.0f} RPS (Envoy at {top:g} CPU x "
        f"{found.envoy_rps_per_core:,.0f} RPS per core x {calibrate.HEADROOM:g}) / {per_worker:,.0f} RPS per worker "
        f"({found.rps_per_worker_core:,.0f} per core x {calibrate.WORKER_BUSY_TARGET:g} busy)), from the saved "
        f"{client} calibration on {platform}"
    )
    return needed, why


def load_sized(name: str, overrides: Overrides) -> tuple[Scenario, str | None]:
    """`load_scenario`, with WORKERS=auto replaced by the calibrated count (and the note saying how)."""
    if not is_auto(overrides.workers):
        return load_scenario(name, overrides), None
    needed, why = workers_for(load_scenario(name, replace(overrides, workers=None)))
    return load_scenario(name, replace(overrides, workers=str(needed))), why
