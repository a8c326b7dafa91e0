"""Generator sizing: how many requests per second one Locust worker delivers, and how many a sweep needs.

`gateway-sizer calibrate` measures, on the scenario's platform and with its client:
1. the generator alone: closed-loop users straight at the backend (no gateway), so the workers' CPU is the
   limit; RPS per worker core = RPS / (workers x the busiest worker's CPU share): the generator's CPU per request;
2. the gateway: the same load through Envoy at the sweep's largest CPU limit, for Envoy's CPU per request. The
   rate the closed-loop users reach through Envoy is bound by the generator as often as by Envoy, so it is no
   saturated rate: Envoy's knee per core is read from its CPU per request instead (the threshold of a core over
   it), or from that rate when Envoy did reach its limit, whichever is higher.
Workers are then sized for the plan's largest fleet (its pods' CPU limits together) at that knee per core. The
result is kept in the cache, per platform and client, and a sweep warns before it starts when its workers look
too few for the load it will need.
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
KNEE_THRESHOLD = 0.90  # the share of a core Envoy uses at its knee (the sweep's default threshold)


@dataclass(frozen=True)
class Calibration:
    """RPS per Locust worker core (the generator's CPU per request) and Envoy's knee per core, on one platform with
    one client. `envoy_rps_per_core` is the rate the calibration's users reached through Envoy per core of its
    limit; `envoy_cpu_per_request_us` Envoy's CPU per request in that window (None: a calibration saved before it
    was read)."""

    platform: str
    client: str
    workers: int
    generator_rps: float
    generator_cpu_share: float  # the busiest worker's share of its core
    rps_per_worker_core: float
    envoy_cpu_cores: float
    envoy_rps: float
    envoy_rps_per_core: float
    envoy_cpu_per_request_us: float | None = None

    @property
    def generator_cpu_per_request_us(self) -> float:
        """A worker's CPU time per request it sends, in microseconds."""
        return 1e6 / self.rps_per_worker_core

    @property
    def knee_per_core(self) -> float:
        """Envoy's RPS per core at its knee: KNEE_THRESHOLD of a core over its CPU per request, or the rate the
        calibration reached per core when that is higher (Envoy at its limit)."""
        by_cost = KNEE_THRESHOLD * 1e6 / self.envoy_cpu_per_request_us if self.envoy_cpu_per_request_us else 0.0
        return max(by_cost, self.envoy_rps_per_core)

    def offered_rps(self, fleet_cpu_cores: float) -> float:
        """The most a sweep offers a fleet of `fleet_cpu_cores` (its pods' limits together): HEADROOM over its knee."""
        return self.knee_per_core * fleet_cpu_cores * HEADROOM

    def workers_needed(self, fleet_cpu_cores: float) -> int:
        """Workers to offer `offered_rps(fleet_cpu_cores)`, each kept below its busy target."""
        return max(1, math.ceil(self.offered_rps(fleet_cpu_cores) / (self.rps_per_worker_core * WORKER_BUSY_TARGET)))


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
        envoy_cpu_per_request_us=gateway.cpu_per_request_us,
    )


def calibration_level(scenario: Scenario) -> LoadLevel:
    return LoadLevel(users=USERS_PER_WORKER * scenario.load.workers)


def largest(plan: Plan) -> Configuration:
    """The configuration with the largest Envoy pod (what calibration measures through)."""
    return max(plan.configurations, key=lambda c: c.envoy_cpu_cores)


def largest_fleet_cores(scenario: Scenario) -> float:
    """The CPU limit of the plan's largest fleet: its largest pod times its most pods."""
    return max(scenario.envoy.cpu_cores) * max(scenario.envoy.replicas)


def provisioning_warning(scenario: Scenario, plan: Plan) -> str | None:
    """A sentence when a saved calibration says the sweep's workers are too few, else None."""
    calibration = load(scenario.platform, scenario.load.client)
    if calibration is None or not plan.configurations:
        return None
    top = max(c.fleet_cpu_cores for c in plan.configurations)
    needed = calibration.workers_needed(top)
    if needed <= scenario.load.workers:
        return None
    return (
        f"WORKERS={scenario.load.workers} may saturate the load generator: Envoy's largest fleet ({top:g} CPU) "
        f"takes about {calibration.knee_per_core * top:,.0f} RPS at its knee and one {calibration.client} worker "
        f"delivers about {calibration.rps_per_worker_core:,.0f} RPS per core (calibrated); use WORKERS={needed}"
    )
