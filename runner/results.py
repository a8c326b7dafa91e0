"""The results model (one run: configurations, their steps and knees) and the store that saves it.

Everything is written as it is measured: `summary.json` is rewritten atomically after every step and
`steps.csv` grows by one flushed line per step, so a crash loses at most the step in flight.
"""

from __future__ import annotations

import csv
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from runner.errors import UsageError
from runner.knee import KneeResult
from runner.measure import Step
from runner.plan import Configuration
from runner.quantities import format_cpu, format_memory
from runner.scenario import PROJECT_ROOT, Scenario

RESULTS_ROOT = PROJECT_ROOT / "results"
LATEST = "latest"
STEP_FIELDS = list(Step.__dataclass_fields__)
ConfigStatus = Literal["running", "saturated", "not-saturated", "invalid", "failed"]
FINISHED: tuple[str, ...] = ("saturated", "not-saturated", "invalid")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EnvoyResources(_Model):
    cpu: float
    memory: str
    concurrency: int


class BackendResources(_Model):
    replicas: int


class ContourResources(_Model):
    cpu: float | None
    memory: str | None


class KneeModel(_Model):
    rps: float
    cpu_utilization: float
    users: float


class ConfigResult(_Model):
    """One configuration's outcome. `status` is `running` until it ends."""

    key: str
    label: str
    envoy: EnvoyResources
    backend: BackendResources
    contour: ContourResources | None
    status: ConfigStatus = "running"
    reason: str | None = None
    knee: KneeModel | None = None
    steps: list[dict[str, Any]] = []
    started_at: str | None = None
    finished_at: str | None = None

    @classmethod
    def start(cls, config: Configuration) -> ConfigResult:
        contour = None
        if config.contour is not None:
            memory = config.contour.memory_bytes
            contour = ContourResources(cpu=config.contour.cpu_cores, memory=format_memory(memory) if memory else None)
        return cls(
            key=config.key,
            label=config.label,
            envoy=EnvoyResources(
                cpu=config.envoy_cpu_cores,
                memory=format_memory(config.envoy_memory_bytes),
                concurrency=config.envoy_concurrency,
            ),
            backend=BackendResources(replicas=config.backend_replicas),
            contour=contour,
            started_at=utc_now(),
        )

    def finish(self, outcome: KneeResult, status: str | None = None, reason: str | None = None) -> None:
        """Record the knee (kept even when a guard makes it `invalid`, for inspection) and the verdict."""
        knee = outcome.knee
        self.knee = KneeModel(rps=knee.rps, cpu_utilization=knee.cpu_utilization, users=knee.users) if knee else None
        self.status = status or ("saturated" if knee else "not-saturated")  # type: ignore[assignment]
        self.reason = reason if status is not None else outcome.reason
        self.finished_at = utc_now()

    def fail(self, reason: str) -> None:
        self.status, self.reason, self.finished_at = "failed", reason, utc_now()

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


class BaselineResult(_Model):
    """The backend directly vs through the gateway, same generator and closed-loop users."""

    users: int
    envoy_cpu: float
    direct: dict[str, Any]
    gateway: dict[str, Any]

    @property
    def overhead(self) -> float:
        """Share of direct throughput lost by going through the gateway (0.2 = 20%)."""
        direct = float(self.direct["rps"])
        return 1 - float(self.gateway["rps"]) / direct if direct > 0 else 0.0

    @property
    def gateway_share(self) -> float:
        """Throughput through the gateway as a share of direct (the reference's "over 80%")."""
        return 1 - self.overhead


class RunSummary(_Model):
    """One run of the sweep: what ran where, and every configuration's result."""

    run_id: str
    platform: str
    scenario: str
    status: Literal["running", "complete", "interrupted", "failed"] = "running"
    reason: str | None = None
    threshold: float
    started_at: str
    finished_at: str | None = None
    environment: dict[str, Any] = {}
    configs: list[ConfigResult] = []
    baseline: BaselineResult | None = None

    def config(self, key: str) -> ConfigResult | None:
        return next((c for c in self.configs if c.key == key), None)


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
        run_id = _run_id(scenario.name)
        run_dir = results_root / run_id
        suffix = 1
        while run_dir.exists():
            suffix += 1
            run_dir = results_root / f"{run_id}-{suffix}"
        run_dir.mkdir(parents=True)
        summary = RunSummary(
            run_id=run_dir.name,
            platform=scenario.platform,
            scenario=scenario.name,
            threshold=scenario.threshold,
            started_at=utc_now(),
        )
        store = cls(run_dir, summary)
        (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario.dump(), sort_keys=False))
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
        tmp = self.run_dir.parent / f".{LATEST}.tmp"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(self.run_dir.name)
        os.replace(tmp, link)

    def save(self) -> None:
        path = self.run_dir / "summary.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.summary.model_dump_json(indent=2))
        os.replace(tmp, path)

    def set_environment(self, environment: dict[str, Any]) -> None:
        self.summary.environment = environment
        (self.run_dir / "environment.json").write_text(json.dumps(environment, indent=2))
        self.save()

    def begin(self, config: Configuration) -> ConfigResult:
        """A fresh result for `config`, replacing an unfinished one from an interrupted attempt."""
        self.summary.configs = [c for c in self.summary.configs if c.key != config.key]
        result = ConfigResult.start(config)
        self.summary.configs.append(result)
        self.save()
        return result

    def add_step(self, result: ConfigResult, step: Step) -> None:
        result.steps.append(step.as_dict())
        path = self.run_dir / "steps.csv"
        new = not path.exists()
        with path.open("a", newline="") as handle:
            writer = csv.writer(handle)
            if new:
                writer.writerow(["config", "envoy_cpu", "envoy_memory", "backend_replicas", *STEP_FIELDS])
            row = step.as_dict()
            row["guards"] = "; ".join(f"{g['guard']}: {g['detail']}" for g in step.guards)
            writer.writerow(
                [
                    result.key,
                    format_cpu(result.envoy.cpu),
                    result.envoy.memory,
                    result.backend.replicas,
                    *(row[f] for f in STEP_FIELDS),
                ]
            )
            handle.flush()
        self.save()

    def finish(self, status: Literal["complete", "interrupted", "failed"], reason: str | None = None) -> None:
        self.summary.status, self.summary.reason, self.summary.finished_at = status, reason, utc_now()
        self.save()


def load_summary(run_dir: Path) -> RunSummary:
    """Read a run's summary.json; UsageError names the path when it is missing or malformed."""
    path = run_dir / "summary.json"
    try:
        return RunSummary.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{run_dir} is not a run directory (no summary.json)", "pass results/<run-id>") from None
    except ValidationError as error:
        raise UsageError(f"{path} is not a gateway-sizer summary: {error.errors()[0]['msg']}") from None


def resolve_run(name: str | None, results_root: Path = RESULTS_ROOT) -> Path:
    """A run directory from a path, a run id, or None for results/latest."""
    candidates = [Path(name)] if name else []
    candidates += [results_root / (name or LATEST)]
    for candidate in candidates:
        if (candidate / "summary.json").is_file():
            return candidate.resolve()
    raise UsageError(f"no run found at {name or results_root / LATEST}", "run `make sweep` first or pass a run dir")
