"""A run with interleaved rounds for the report tests, simulated on the engine's fake platform
(support.simulated): nothing here was measured on a machine.

Two traffic profiles (plain, whose clients ask for gzip, and identity, whose clients ask for no compression and
which the simulated Envoy serves 13% cheaper) x two arrival models (poisson, and uniform at 5% less CPU per
request) x three CPU limits, five rounds with a control window, on a simulated machine that drifts +-4% every
30 s. The recorded runs in tests/report/data predate rounds; a recorded one joins them when it exists.
"""

from __future__ import annotations

import random
from pathlib import Path

from runner.plan import Configuration, plan_sweep
from runner.results import RunStore
from runner.scenario import parse_scenario
from runner.sweep import Sweep
from support.simulated import EPOCH, FakeClock, FakePlatform, SimulatedEnvoy

IDENTITY_SHARE = 0.87  # the simulated Envoy's CPU per request for identity clients, of gzip clients'
UNIFORM_SHARE = 0.95  # ... and for uniform arrivals, of Poisson's
DRIFT, SEGMENT_S = 0.04, 30
SCENARIO = {
    "name": "simulated-rounds",
    "description": "Simulated on the fake platform: not a measurement",
    "envoy": {"cpu": [0.25, 0.5, 1.0]},
    "profiles": ["plain", "identity"],
    "load": {"step_seconds": 10, "warmup_seconds": 4, "settle_seconds": 2, "workers": 1, "rounds": 5, "seed": 3,
             "arrivals": ["poisson", "uniform"]},
}  # fmt: skip


def _envoy(config: Configuration) -> SimulatedEnvoy:
    cost = 200.0
    cost *= IDENTITY_SHARE if config.profile.accept_encoding == "identity" else 1.0
    cost *= UNIFORM_SHARE if config.arrivals == "uniform" else 1.0
    return SimulatedEnvoy(cost_us=cost, limit_cores=config.envoy_cpu_cores, seed=len(config.key) + 1)


def simulate(results_root: Path) -> Path:
    """Runs the simulated sweep into a new folder under `results_root`; returns the run directory."""
    draw = random.Random(3)
    speeds: dict[int, float] = {}

    def speed(second: int) -> float:
        return speeds.setdefault(int((second - EPOCH) // SEGMENT_S), 1 + draw.uniform(-DRIFT, DRIFT))

    scenario = parse_scenario(SCENARIO)
    platform = FakePlatform(FakeClock(), _envoy, speed=speed)
    store = RunStore.create(scenario, results_root)
    Sweep(scenario=scenario, plan=plan_sweep(scenario), platform=platform, store=store, clock=platform.clock).run()
    return store.run_dir
