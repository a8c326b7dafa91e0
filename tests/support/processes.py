"""The CLI as a user runs it and the one clear line it fails with; processes and cgroups left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from runner.paths import PROJECT_ROOT
from runner.platforms.local.cgroups import ROOT_NAME, detect_driver

SIZER = [sys.executable, "-m", "runner"]


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


def one_line(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """The CLI's error as a user sees it: exit 2 and one line on stderr, no traceback, holding every fragment."""
    assert result.returncode == 2, (result.stdout[-1500:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def alive(pids: list[int]) -> list[int]:
    """The pids still running (a zombie waiting for its parent, this test process, is not running)."""
    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.NoSuchProcess:
            continue
    return left


def cgroup_tree(testbed_id: str) -> list[Path]:
    """Folders of a test bed's cgroup tree that still exist, in every hierarchy."""
    driver = detect_driver()
    return [m / ROOT_NAME / testbed_id for m in set(driver.mounts.values()) if (m / ROOT_NAME / testbed_id).exists()]
