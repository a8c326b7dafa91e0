"""The run directory: the store that saves a run's results as they are measured, and reading them back.

Everything is written as it is measured: `summary.json` is replaced atomically after every step and
`steps.csv` grows by one flushed line per step, so a crash loses at most the step in flight. The types
saved are those of runner.model.
"""

from __future__ import annotations

import csv
import io
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import yaml
from pydantic import ValidationError

from runner.errors import UsageError
from runner.files import SaveError, is_file, write_atomic
from runner.knee import KneeResult
from runner.model import (
    BackendResources,
    Capacity,
    ConfigResult,
    ContourResources,
    Environment,
    EnvoyResources,
    MemoryPoint,
    PodKnee,
    RunStatus,
    RunSummary,
    Step,
    utc_now,
)
from runner.paths import RESULTS_ROOT
from runner.plan import Configuration
from runner.quantities import format_cpu, format_memory, short_repr
from runner.scenario import Scenario

LATEST = "latest"
STEP_FIELDS = [name for name in Step.model_fields if name not in ("guards", "pods")]
CSV_HEADER = ["config", "envoy_cpu", "envoy_memory", "backend_replicas", *STEP_FIELDS, "guards", "pods"]


def _csv_row(result: ConfigResult, step: Step) -> list[object]:
    row = step.model_dump()
    guards = "; ".join(f"{g.guard}: {g.detail}" for g in step.guards)
    pods = "; ".join(f"{p.pod}: {p.cpu_utilization_mean:.3f} {p.rps:.1f}" for p in step.pods)  # utilization, RPS
    resources = [result.key, format_cpu(result.envoy.cpu_cores), result.envoy.memory, result.backend.replicas]
    return [*resources, *(row[f] for f in STEP_FIELDS), guards, pods]


def start_result(config: Configuration) -> ConfigResult:
    """A fresh `running` result for a configuration of the plan."""
    contour = None
    if config.contour is not None:
        memory = config.contour.memory_bytes
        contour = ContourResources(cpu_cores=config.contour.cpu_cores, memory=format_memory(memory) if memory else None)
    return ConfigResult(
        key=config.key,
        label=config.label,
        envoy=EnvoyResources(
            cpu_cores=config.envoy_cpu_cores,
            memory=format_memory(config.envoy_memory_bytes),
            concurrency=config.envoy_concurrency,
            replicas=config.envoy_replicas,
        ),
        backend=BackendResources(replicas=config.backend_replicas),
        contour=contour,
        arrivals=config.arrivals,
        profile=config.profile,
        started_at=utc_now(),
    )


def finish_result(
    result: ConfigResult,
    outcome: KneeResult,
    status: str,
    reason: str | None,
    capacity: Capacity | None = None,
    search: str | None = None,
    pod_knee: PodKnee | None = None,
) -> None:
    """Record the knee (kept even when a guard makes it `invalid`, for inspection), the knee per pod, capacity and
    verdict."""
    result.knee = outcome.knee
    result.pod_knee = pod_knee
    result.capacity = capacity
    result.search = search
    result.status = status  # type: ignore[assignment]  # one of ConfigStatus, checked on assignment
    result.reason = reason
    result.finished_at = utc_now()


def _run_id(scenario: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', scenario)}"


class RunStore:
    """A run directory: summary.json, steps.csv, scenario.yaml, environment.json, logs/."""

    def __init__(self, run_dir: Path, summary: RunSummary) -> None:
        self.run_dir = run_dir
        self.summary = summary

    @classmethod
    def create(cls, scenario: Scenario, results_root: Path = RESULTS_ROOT) -> RunStore:
        run_dir = _new_run_dir(results_root, _run_id(scenario.name))
        summary = RunSummary(
            run_id=run_dir.name,
            platform=scenario.platform,
            scenario=scenario.name,
            threshold=scenario.threshold,
            started_at=utc_now(),
        )
        store = cls(run_dir, summary)
        write_atomic(run_dir / "scenario.yaml", yaml.safe_dump(scenario.dump(), sort_keys=False))
        store.save()
        store.point_latest()
        return store

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        return cls(run_dir, load_summary(run_dir))

    @property
    def logs_dir(self) -> Path:
        return self.run_dir / "logs"

    def point_latest(self) -> None:
        link = self.run_dir.parent / LATEST
        tmp = self.run_dir.parent / f".{LATEST}.{os.getpid()}.tmp"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(self.run_dir.name)
        os.replace(tmp, link)

    def save(self) -> None:
        write_atomic(self.run_dir / "summary.json", self.summary.to_json())

    def set_environment(self, environment: Environment) -> None:
        self.summary.environment = environment
        write_atomic(self.run_dir / "environment.json", environment.model_dump_json(indent=2, by_alias=True))
        self.save()

    def begin(self, config: Configuration, order: list[str] | None = None) -> ConfigResult:
        """A fresh result for `config`, replacing one that failed in an earlier attempt (whose lines leave
        steps.csv too, so it keeps agreeing with summary.json); results are kept in `order` (the plan's
        keys) when given, else in the order they began."""
        abandoned = [c for c in self.summary.configs if c.key == config.key]
        self.summary.configs = [c for c in self.summary.configs if c.key != config.key]
        result = start_result(config)
        self.summary.configs.append(result)
        if order is not None:
            rank = {key: i for i, key in enumerate(order)}
            self.summary.configs.sort(key=lambda c: rank.get(c.key, len(rank)))
        if any(c.steps for c in abandoned):
            self._rewrite_csv()
        self.save()
        return result

    def add_step(self, result: ConfigResult, step: Step) -> None:
        result.steps.append(step)
        try:
            self._append_csv(result, step)
        except OSError as error:
            raise SaveError(f"cannot save {self.run_dir / 'steps.csv'}: {error.strerror or error}") from None
        self.save()

    def _append_csv(self, result: ConfigResult, step: Step) -> None:
        path = self.run_dir / "steps.csv"
        new = not path.exists()
        if not new and _header_of(path) != CSV_HEADER:  # a run resumed by a version with other columns
            self._rewrite_csv()
            return
        with path.open("a", newline="") as handle:
            writer = csv.writer(handle)
            if new:
                writer.writerow(CSV_HEADER)
            writer.writerow(_csv_row(result, step))
            handle.flush()

    def _rewrite_csv(self) -> None:
        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer)
        writer.writerow(CSV_HEADER)
        writer.writerows(_csv_row(c, s) for c in self.summary.configs for s in c.steps)
        write_atomic(self.run_dir / "steps.csv", buffer.getvalue())

    def add_memory_point(self, point: MemoryPoint) -> None:
        """Save a memory point as soon as it is measured (or failed), replacing an earlier attempt."""
        if self.summary.memory is None:
            raise ValueError("start the memory result before adding points")
        self.summary.memory.record(point)
        self.save()

    def finish(self, status: RunStatus, reason: str | None = None) -> None:
        self.summary.status, self.summary.reason, self.summary.finished_at = status, reason, utc_now()
        self.save()


def _header_of(path: Path) -> list[str]:
    with path.open(newline="") as handle:
        return next(csv.reader(handle), [])


def load_summary(run_dir: Path) -> RunSummary:
    """Read a run's summary.json; UsageError names the path when it is missing or malformed."""
    path = run_dir / "summary.json"
    try:
        return RunSummary.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{run_dir} is not a run directory (no summary.json)", "pass results/<run-id>") from None
    except ValidationError as error:
        raise UsageError(f"{path} is not a gateway-sizer summary: {error.errors()[0]['msg']}") from None


def _new_run_dir(results_root: Path, run_id: str) -> Path:
    """A new folder for the run in `results_root` (made if missing); UsageError when it cannot be made there."""
    run_dir = results_root / run_id
    suffix = 1
    try:
        results_root.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                run_dir.mkdir()  # atomic: two runs started in the same second get different folders
                return run_dir
            except FileExistsError:
                suffix += 1
                run_dir = results_root / f"{run_id}-{suffix}"
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path
        raise UsageError(
            f"cannot make a run folder in {short_repr(str(results_root), 80)} ({type(error).__name__})",
            "choose a folder that can be written to (sweep --results)",
        ) from None


def resolve_run(name: str | None, results_root: Path = RESULTS_ROOT) -> Path:
    """A run directory from a path, a run id, or None for results/latest."""
    candidates = [Path(name)] if name else []
    candidates += [results_root / (name or LATEST)]
    for candidate in candidates:
        if is_file(candidate / "summary.json"):
            return candidate.resolve()
    raise UsageError(f"no run found at {name or results_root / LATEST}", "run `make sweep` first or pass a run dir")
