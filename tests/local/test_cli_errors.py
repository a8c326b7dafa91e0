"""Bad input gets one clear line naming the problem and the fix, exit code 2, no traceback."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from sizer_testing import run_sizer


def _one_clear_line(result, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_envoy_cpus_abc(tmp_path: Path):
    result = run_sizer("sweep", "--envoy-cpus", "abc", "--results", str(tmp_path))
    _one_clear_line(result, "ENVOY_CPUS='abc'", "1..6")
    assert not list(tmp_path.iterdir()), "a rejected sweep must not create a run directory"


def test_unknown_scenario_key(tmp_path: Path):
    scenario = tmp_path / "typo.yaml"
    scenario.write_text("name: typo\nenvoy:\n  cpu: [0.1]\nload:\n  worker: 2\n")
    _one_clear_line(run_sizer("sweep", "--scenario", str(scenario)), "load.worker: unknown field", "workers")


def test_missing_locustfile(tmp_path: Path):
    scenario = tmp_path / "nofile.yaml"
    scenario.write_text("name: nofile\nenvoy:\n  cpu: [0.1]\nload:\n  locustfile: locustfiles/none.py\n")
    _one_clear_line(run_sizer("plan", "--scenario", str(scenario)), "locustfiles/none.py", "does not exist")


def test_unknown_platform():
    _one_clear_line(run_sizer("plan", "--platform", "mars"), "platform", "local")


@pytest.mark.slow
def test_port_in_use_names_the_port_and_how_to_free_it(tmp_path: Path):
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", 8089))
        except OSError:
            pytest.skip("port 8089 is already taken by something else")
        holder.listen()
        result = run_sizer("sweep", "--envoy-cpus", "0.1", "--results", str(tmp_path))
    _one_clear_line(result, "port 8089", "testbed down")
