"""Each validity guard provoked for real on the local platform, and the verdict it leads to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from sizer_testing import run_sizer

pytestmark = pytest.mark.slow


def _sweep(tmp_path: Path, **sections: dict) -> dict:
    load = {"step_seconds": 4, "warmup_seconds": 2, "settle_seconds": 2, "max_steps": 6, **sections.pop("load", {})}
    scenario = {"name": "guard", "envoy": {"cpu": [0.5]}, **sections, "load": load}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = run_sizer("sweep", "--scenario", str(path), "--free-ports", "--results", str(tmp_path / "r"), timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads((tmp_path / "r" / "latest" / "summary.json").read_text())["configs"][0]


def _fired(config: dict) -> set[str]:
    return {g["guard"] for step in config["steps"] for g in step["guards"]}


def test_one_fasthttp_worker_against_a_large_envoy_cap_is_generator_bound(tmp_path):
    config = _sweep(tmp_path, envoy={"cpu": [2]}, load={"client": "fasthttp", "workers": 1, "start_rps": 2000})
    assert config["status"] == "invalid"
    assert _fired(config) & {"generator-saturated", "generator-shortfall"}
    assert "add Locust workers" in config["reason"]


def test_nginx_capped_far_below_envoy_is_backend_bound(tmp_path):
    config = _sweep(tmp_path, backend={"cpu": 0.04}, load={"start_rps": 600})
    assert config["status"] == "invalid"
    assert _fired(config) & {"backend-saturated", "throughput-flat"}
    assert "nginx" in config["reason"] or "backend" in config["reason"]


def test_a_backend_answering_errors_fails_the_failure_guard(tmp_path):
    config = _sweep(tmp_path, backend={"response_status": 503}, load={"start_rps": 200})
    assert config["status"] == "invalid"
    assert "failures" in _fired(config)
    assert config["steps"][0]["fail_ratio"] == 1.0
    assert config["reason"].startswith("100.0% of requests failed")
