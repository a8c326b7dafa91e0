"""Scenario files the local end-to-end tests write: the default local scenario, changed for one test."""

from __future__ import annotations

from pathlib import Path

import yaml

from runner.paths import SCENARIO_DIR

CONNECTIONS = [0, 500, 2000]  # three points: the fewest that give the connection slope a 95% interval
ROUTES = [0, 1000]


def memory_scenario(tmp_path: Path, **memory: object) -> Path:
    """The default local scenario, memory model only, small and short."""
    scenario = yaml.safe_load((SCENARIO_DIR / "local.yaml").read_text())
    scenario.update(name="memory-test")
    scenario["envoy"].update(cpu=[0.5], memory="512Mi")
    scenario["memory"] = {
        "only": True,
        "connections": CONNECTIONS,
        "routes": ROUTES,
        "rps": 20,
        "hold_seconds": 6,
        "settle_seconds": 3,
        "refresh_seconds": 20,
        **memory,
    }
    path = tmp_path / "memory-test.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def fixed_schedule_scenario(tmp_path: Path, cpus: list[float], levels: list[int], *, replicas: int = 1) -> Path:
    """The default local scenario on a fixed schedule of `levels` (RPS) at Envoy `cpus`, `replicas` pods each: one
    round, one short window per level (about 6 s each)."""
    scenario = yaml.safe_load((SCENARIO_DIR / "local.yaml").read_text())
    scenario["name"] = "interrupt"
    scenario["envoy"].update(cpu=cpus, replicas=[replicas])
    scenario["load"].update(search="fixed", rps=levels, step_seconds=3, warmup_seconds=2, settle_seconds=1, rounds=1)
    path = tmp_path / "interrupt.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path
