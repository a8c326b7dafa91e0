"""WORKERS=auto: Locust workers sized from the saved calibration for the plan's largest fleet.

workers = ceil(Envoy's knee per core x the largest fleet's CPU (its largest pod's limit x its most pods) x 1.1 /
(RPS per worker core x 0.75)) (`Calibration.workers_needed`): enough to offer ~10% more than the biggest fleet's
knee with every worker below 75% busy, under the 90% generator guard. Envoy's knee per core comes from its CPU per
request measured through it (runner.calibrate), a worker's rate from its own CPU per request. The scenario is read
and validated once; the count then replaces its `load.workers`, checked against the same bounds as any WORKERS
value.
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
    top = calibrate.largest_fleet_cores(scenario)
    needed = found.workers_needed(top)
    envoy, per_worker = scenario.envoy, found.rps_per_worker_core * calibrate.WORKER_BUSY_TARGET
    pods = max(envoy.replicas)
    fleet = f"Envoy at {top:g} CPU" if pods == 1 else f"the largest fleet, {pods} pods x {max(envoy.cpu_cores):g} CPU"
    cost = found.envoy_cpu_per_request_us
    knee = f"Envoy's {cost:,.0f} us of CPU per request" if cost else "recalibrate for Envoy's CPU per request"
    generator = found.generator_cpu_per_request_us
    why = (
        f"WORKERS=auto: {needed} worker(s) = ceil({found.offered_rps(top):,.0f} RPS ({fleet} x "
        f"{found.knee_per_core:,.0f} RPS per core at the knee ({knee}) x {calibrate.HEADROOM:g}) / "
        f"{per_worker:,.0f} RPS per worker (a worker's {generator:,.0f} us of CPU per request, "
        f"{calibrate.WORKER_BUSY_TARGET:g} busy)), from the saved {client} calibration on {platform}"
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
