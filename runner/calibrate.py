"""Generator sizing: how many requests per second one Locust worker delivers, and how many a sweep needs.

`gateway-sizer calibrate` measures, on the scenario's platform and with its client:
1. the generator alone: closed-loop users straight at the backend (no gateway), so the workers' CPU is the
   limit; RPS per worker core = RPS / (workers x the busiest worker's CPU share);
2. the gateway: the same load through Envoy at the sweep's largest CPU limit, for an estimate of Envoy's
   RPS per core when saturated (an upper bound of what the sweep will offer).
The result is kept in the cache, per platform and client, and a sweep warns before it starts when its
workers look too few for the load it will need.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner.files import write_atomic
from runner.model import LoadLevel, Step
from runner.paths import cache_dir
from runner.plan import Configuration, Plan
from runner.scenario import Scenario

if TYPE_CHECKING:
    from runner.sweep import Sweep

USERS_PER_WORKER = 16  # closed-loop users per worker: enough to keep a worker's event loop busy
WORKER_BUSY_TARGET = 0.75  # plan workers to run at most this busy, below the 90% generator guard
HEADROOM = 1.1  # the sweep offers up to ~10% more than the knee


@dataclass(frozen=True)
class Calibration:
    """RPS per Locust worker core and Envoy's saturated RPS per core, on one platform with one client."""

    platform: str
    client: str
    workers: int
    generator_rps: float
    generator_cpu_share: float  # the busiest worker's share of its core
    rps_per_worker_core: float
    envoy_cpu_cores: float
    envoy_rps: float
    envoy_rps_per_core: float

    def workers_needed(self, envoy_cpu_cores: float) -> int:
        """Workers to deliver Envoy's saturated RPS at `envoy_cpu_cores`, each kept below its busy target."""
        needed_rps = self.envoy_rps_per_core * envoy_cpu_cores * HEADROOM
        return max(1, math.ceil(needed_rps / (self.rps_per_worker_core * WORKER_BUSY_TARGET)))


def calibration_path(platform: str, client: str) -> Path:
    return cache_dir() / f"calibration-{platform}-{client}.json"


def save(calibration: Calibration) -> Path:
    path = calibration_path(calibration.platform, calibration.client)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(asdict(calibration), indent=1))
    return path


def load(platform: str, client: str) -> Calibration | None:
    try:
        return Calibration(**json.loads(calibration_path(platform, client).read_text()))
    except (FileNotFoundError, TypeError, ValueError):
        return None


def run(sweep: Sweep) -> Calibration:
    """Start the platform and measure the generator alone and through Envoy at the plan's largest limit."""
    with sweep.platform:
        sweep.platform.metrics.check()
        top = largest(sweep.plan).envoy_cpu_cores
        measured = sweep.direct_and_through(calibration_level(sweep.scenario).users, top)
        worker_cores = sweep.platform.capacities().generator_cores
    return from_steps(sweep.scenario, measured.direct, measured.gateway, top, worker_cores)


def from_steps(
    scenario: Scenario, direct: Step, gateway: Step, envoy_cpu: float, worker_cores: float = 1.0
) -> Calibration:
    """The calibration from the generator's window alone and its window through Envoy; `worker_cores` is the CPU
    a worker has (its share of it is what `generator_cpu_max` reads)."""
    workers = scenario.load.workers
    busy = max(direct.generator_cpu_max, 0.05) * worker_cores
    return Calibration(
        platform=scenario.platform,
        client=scenario.load.client,
        workers=workers,
        generator_rps=direct.rps,
        generator_cpu_share=direct.generator_cpu_max,
        rps_per_worker_core=direct.rps / (workers * busy),
        envoy_cpu_cores=envoy_cpu,
        envoy_rps=gateway.rps,
        envoy_rps_per_core=gateway.rps / envoy_cpu,
    )


def calibration_level(scenario: Scenario) -> LoadLevel:
    return LoadLevel(users=USERS_PER_WORKER * scenario.load.workers)


def largest(plan: Plan) -> Configuration:
    return max(plan.configurations, key=lambda c: c.envoy_cpu_cores)


def provisioning_warning(scenario: Scenario, plan: Plan) -> str | None:
    """A sentence when a saved calibration says the sweep's workers are too few, else None."""
    calibration = load(scenario.platform, scenario.load.client)
    if calibration is None:
        return None
    top = largest(plan).envoy_cpu_cores
    needed = calibration.workers_needed(top)
    if needed <= scenario.load.workers:
        return None
    return (
        f"WORKERS={scenario.load.workers} may saturate the load generator: Envoy at {top:g} CPU takes about "
        f"{calibration.envoy_rps_per_core * top:,.0f} RPS and one {calibration.client} worker delivers about "
        f"{calibration.rps_per_worker_core:,.0f} RPS per core (calibrated); use WORKERS={needed}"
    )
