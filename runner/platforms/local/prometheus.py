"""Prometheus (Debian's package) for the local platform: scrapes the exporter and the admin stats of each Envoy pod
(listed in a file the test bed rewrites as the fleet changes; Prometheus watches it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner.platforms.local.envoy import SCRAPE_FILTER

RETENTION = "2h"


@dataclass(frozen=True)
class ScrapeTargets:
    """What the local Prometheus scrapes: the exporter, and the Envoy pods listed in `envoy_targets_file` (each
    labelled as Kubernetes would label its pod: runner.platforms.local.envoy_fleet.scrape_targets)."""

    exporter_port: int
    envoy_targets_file: Path
    interval_s: float = 1.0


def config(targets: ScrapeTargets) -> dict[str, Any]:
    interval = f"{max(1, round(targets.interval_s * 1000))}ms"
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [
            {
                "job_name": "cadvisor",
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{targets.exporter_port}"]}],
            },
            {
                "job_name": "envoy-stats",
                "metrics_path": "/stats/prometheus",
                "params": {"usedonly": [""], "filter": [SCRAPE_FILTER]},
                "file_sd_configs": [{"files": [str(targets.envoy_targets_file)]}],
            },
        ],
    }


def write_config(targets: ScrapeTargets, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config(targets), sort_keys=False))
    return path


def command(binary: Path, config_path: Path, data_dir: Path, port: int) -> list[str]:
    return [
        str(binary),
        f"--config.file={config_path}",
        f"--storage.tsdb.path={data_dir}",
        f"--storage.tsdb.retention.time={RETENTION}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
