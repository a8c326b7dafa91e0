"""Helpers shared by the test suites: the CLI as a user runs it, leftover checks, property tests' example counts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runner.platforms.local.cgroups import ROOT_NAME, detect_driver

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SIZER = [sys.executable, "-m", "runner"]
FUZZ_SCALE = max(1, int(os.environ.get("GATEWAY_SIZER_FUZZ") or 1))  # `make fuzz`: examples x this, drawn afresh


def examples(count: int) -> int:
    """A property test's number of examples: `count` in the gate (a fixed set, see conftest.py), times
    GATEWAY_SIZER_FUZZ under `make fuzz`."""
    return count * FUZZ_SCALE


def cgroup_tree(testbed_id: str) -> list[Path]:
    """Folders of a test bed's cgroup tree that still exist, in every hierarchy."""
    driver = detect_driver()
    return [m / ROOT_NAME / testbed_id for m in set(driver.mounts.values()) if (m / ROOT_NAME / testbed_id).exists()]


def alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(") ")[1].startswith("Z"):
            continue  # a zombie waiting for its parent (this test process) is not running
        left.append(pid)
    return left


def run_sizer(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI as a user would, capturing its output."""
    return subprocess.run(
        [*SIZER, *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
