"""Bad input gets one clear line naming the problem and the fix, exit code 2, no traceback."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from runner.paths import PROJECT_ROOT
from runner.scenario import SWEEP_OPTIONS
from support.processes import one_line, run_sizer

pytestmark = pytest.mark.parallel_safe  # one-line errors and exit codes


def test_envoy_cpus_abc(tmp_path: Path):
    result = run_sizer("sweep", "--envoy-cpus", "abc", "--results", str(tmp_path))
    one_line(result, "ENVOY_CPUS='abc'", "1..6")
    assert not list(tmp_path.iterdir()), "a rejected sweep must not create a run directory"


def test_a_send_timer_the_workers_do_not_know_is_one_line_before_anything_starts(tmp_path: Path):
    result = run_sizer("sweep", "--results", str(tmp_path), env={"GATEWAY_SIZER_TIMER": "fast"})
    one_line(result, "GATEWAY_SIZER_TIMER='fast' is not a send timer", "fine or gevent")
    assert not list(tmp_path.iterdir()), "a rejected sweep must not create a run directory"


def test_unknown_scenario_key(tmp_path: Path):
    scenario = tmp_path / "typo.yaml"
    scenario.write_text("name: typo\nenvoy:\n  cpu: [0.1]\nload:\n  worker: 2\n")
    one_line(run_sizer("sweep", "--scenario", str(scenario)), "load.worker: unknown field", "workers")


def test_missing_locustfile(tmp_path: Path):
    scenario = tmp_path / "nofile.yaml"
    scenario.write_text("name: nofile\nenvoy:\n  cpu: [0.1]\nload:\n  locustfile: locustfiles/none.py\n")
    one_line(run_sizer("plan", "--scenario", str(scenario)), "locustfiles/none.py", "does not exist")


def test_unknown_platform():
    one_line(run_sizer("plan", "--platform", "mars"), "platform", "local")


@pytest.mark.slow
def test_port_in_use_names_the_port_and_how_to_free_it(tmp_path: Path):
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", 8089))
        except OSError:
            pytest.fail("port 8089 is taken by something else (a test bed? `gateway-sizer testbed down`): free it")
        holder.listen()
        result = run_sizer("sweep", "--envoy-cpus", "0.1", "--results", str(tmp_path))
    one_line(result, "port 8089", "testbed down")


# Make variables reach the CLI through the environment: no value can run as shell or make code.
MAKE_VARIABLES = {option.variable for option in SWEEP_OPTIONS}
MAKE_VARIABLES |= {"RUN", "TARGET_RPS", "HEADROOM", "CORES_PER_REPLICA", "OUTPUT", "PROFILE", "A", "B", "THRESHOLD_PCT"}
# Set when this test runs under `make test` (as in CI): a sub-make then calls itself make[1] in its messages.
MAKE_CONTEXT = {"MAKELEVEL", "MAKEFLAGS", "MFLAGS"}
MAKE_FAILED = re.compile(r"make(\[\d+\])?: \*\*\* ")  # make's own "recipe failed" line, at any level
RUN_DIR = PROJECT_ROOT / "tests" / "report" / "data" / "local-100m-200m-300m"


def _make(*args: str) -> subprocess.CompletedProcess:
    """make in the project, with none of the sweep's variables inherited from this environment."""
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k not in MAKE_VARIABLES | MAKE_CONTEXT},
    )


@pytest.fixture
def venv_ready() -> None:
    """make's targets below need only the project's .venv (`make test` sets it up first)."""
    if shutil.which("make") is None or _make("-q", ".venv/.installed").returncode != 0:
        pytest.fail("needs make and an up-to-date .venv: run `make setup` (make test does)")


@pytest.mark.usefixtures("venv_ready")
@pytest.mark.parametrize(
    ("target", "variable", "others", "named"),
    [
        ("plan", "ENVOY_CPUS", {}, "ENVOY_CPUS="),
        ("report", "RUN", {}, "no run found at 0.1'"),
        ("recommend", "TARGET_RPS", {"RUN": str(RUN_DIR)}, "--target-rps must be a number"),
        ("recommend", "CORES_PER_REPLICA", {"TARGET_RPS": "5000", "RUN": str(RUN_DIR)}, "--cores-per-replica must be"),
        ("recommend", "OUTPUT", {"TARGET_RPS": "5000", "RUN": str(RUN_DIR)}, "--output must be text or yaml"),
        ("compare", "A", {"B": str(RUN_DIR)}, "no run found at 0.1'"),
        ("compare", "B", {"A": str(RUN_DIR)}, "no run found at 0.1'"),
    ],
)
def test_make_variables_cannot_inject_shell_or_make_code(tmp_path: Path, target, variable, others, named):
    pwned = tmp_path / "pwned"
    value = f"0.1'; touch {pwned}; '\"; touch {pwned}; \"$(shell touch {pwned})`touch {pwned}`$$(touch {pwned})"
    result = _make(target, f"{variable}={value}", *(f"{k}={v}" for k, v in others.items()))
    assert not pwned.exists(), "a make variable ran as code"
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if not MAKE_FAILED.match(line)]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("gateway-sizer") and named in lines[0], lines[0]


@pytest.mark.usefixtures("venv_ready")
def test_make_plan_only_runs_the_cli():
    dry = _make("-n", "plan", "ENVOY_CPUS=0.25,0.5")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.split() == [".venv/bin/gateway-sizer", "plan", '--envoy-cpus="$ENVOY_CPUS"'], dry.stdout
    result = _make("plan", "ENVOY_CPUS=0.25,0.5", "WORKERS=1")
    assert result.returncode == 0, result.stderr
    assert "2 configuration(s)" in result.stdout and "1 worker(s)" in result.stdout, result.stdout
