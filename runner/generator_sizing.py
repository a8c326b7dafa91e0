"""WORKERS=auto: Locust workers sized from the saved calibration for the plan's largest configuration.

workers = ceil(Envoy's saturated RPS per core x the largest Envoy CPU limit x 1.1 / (RPS per worker core x 0.75))
(`Calibration.workers_needed`): enough to offer ~10% more than the biggest knee with every worker below 75% busy,
under the 90% generator guard. The scenario is read and validated once; the count then replaces its
`load.workers`, checked against the same bounds as any WORKERS value.
"""

from __future__ import annotations

from runner import calibrate
from runner.errors import UsageError
from runner.scenario import (
    AUTO,
    Overrides,
    Scenario,
    ScenarioFile,
    is_auto,
    parse_scenario,
    read_scenario,
    replace_option,
)

__all__ = ["AUTO", "is_auto", "load_sized", "workers_for"]


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


def load_sized(scenario: str | ScenarioFile, overrides: Overrides) -> tuple[Scenario, str | None]:
    """`load_scenario` (of a name, a path or a file already read), with WORKERS=auto replaced by the calibrated
    count, and the note saying how."""
    file = read_scenario(scenario) if isinstance(scenario, str) else scenario
    if overrides.value("workers") != AUTO:
        return parse_scenario(file.raw, overrides, source=file.source), None
    loaded = parse_scenario(file.raw, overrides.without("workers"), source=file.source)
    needed, why = workers_for(loaded)
    return replace_option(loaded, "workers", needed, source=file.source), why
