"""What the sweep is doing now, as plain data: the configuration, the phase and load, each window measured
and the knee and capacity so far. The runner sends it to the Locust master with every heartbeat, where
the web UI's gateway-sizer tab shows it to a person watching the run."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from runner.assess import assess
from runner.observer import SweepObserver

if TYPE_CHECKING:
    from runner.model import ConfigResult, LoadLevel, MemoryPoint, Step
    from runner.plan import Configuration, Plan
    from runner.platforms.base import Endpoints
    from runner.results import RunStore

MAX_WINDOWS = 60  # windows shown per configuration (the most recent)


def _window(step: Step) -> dict[str, Any]:
    return {
        "index": step.index + 1,
        "offered_rps": step.target_rps,
        "users": step.users,
        "rps": round(step.rps, 1),
        "envoy_rps": round(step.envoy_rps, 1),
        "cpu": [
            round(step.cpu_utilization_min, 4),
            round(step.cpu_utilization_mean, 4),
            round(step.cpu_utilization_max, 4),
        ],
        "p99_ms": step.p99_ms,
        "round": step.round,
        "regime": step.regime,
        "guards": [f"{g.guard}: {g.detail}" for g in step.guards],
    }


class LiveState(SweepObserver):
    """An observer that keeps the sweep's current state; `snapshot()` is safe to call from another thread."""

    def __init__(self, threshold: float, latency_slo_ms: float) -> None:
        self.threshold = threshold
        self.latency_slo_ms = latency_slo_ms
        self._lock = threading.Lock()
        self._data: dict[str, Any] = {"threshold": threshold, "phase": "starting"}
        self._steps: list[Step] = []
        self._store: RunStore | None = None

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {**self._data, "sent_at": time.time()}

    def _update(self, **fields: Any) -> None:
        with self._lock:
            self._data.update(fields)

    def run_started(self, store: RunStore, endpoints: Endpoints, plan: Plan) -> None:
        self._store = store
        self._update(run_id=store.summary.run_id, configurations=len(plan), results=str(store.run_dir))

    def round_started(self, number: int, planned: int, order: list[Configuration]) -> None:
        self._update(round=number, rounds=planned)

    def config_started(self, position: int, total: int, config: Configuration) -> None:
        result = self._store.summary.config(config.key) if self._store is not None else None
        self._steps = list(result.steps) if result is not None else []  # its windows of the earlier rounds
        self._update(
            position=position,
            configuration=config.label,
            envoy_cpu_cores=config.envoy_cpu_cores,
            arrivals=config.arrivals,
            windows=[_window(s) for s in self._steps][-MAX_WINDOWS:],
            status="running",
            **self._figures(),
        )

    def _figures(self) -> dict[str, Any]:
        """The knee (only one the guards let stand) and capacity of the windows so far."""
        if not self._steps:
            return {"knee": None, "capacity": None}
        assessment = assess(self._steps, self.threshold, self.latency_slo_ms)
        knee, capacity = assessment.valid_knee, assessment.capacity
        return {
            "knee": {"rps": knee.rps, "low": knee.low, "high": knee.high} if knee else None,
            "capacity": {"rps": capacity.rps, "broken_at": capacity.broken_at} if capacity else None,
        }

    def load_changed(self, level: LoadLevel, phase: str, seconds: float) -> None:
        self._update(
            phase=phase,
            offered_rps=level.target_rps,
            users=level.users,
            phase_seconds=seconds,
            phase_started_at=time.time(),
        )

    def step_measured(self, config: Configuration, step: Step) -> None:
        self._steps.append(step)
        figures = self._figures()
        with self._lock:
            windows = [*self._data.get("windows", []), _window(step)][-MAX_WINDOWS:]
            self._data.update(windows=windows, **figures)

    def config_finished(self, result: ConfigResult) -> None:
        self._update(status=result.status, reason=result.reason, phase="done")

    def memory_point_started(self, position: int, total: int, label: str) -> None:
        self._steps = []
        self._update(
            position=f"memory {position}",
            configurations=total,
            configuration=label,
            windows=[],
            knee=None,
            capacity=None,
            status="running",
        )

    def memory_point_measured(self, point: MemoryPoint) -> None:
        working_set = f", working set {point.working_set_bytes / 2**20:,.0f} MiB" if point.working_set_bytes else ""
        self._update(status=point.status, reason=point.reason or f"held {point.held:,}{working_set}", phase="done")
