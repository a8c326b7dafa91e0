"""Shared fixtures: a real local test bed on free ports, and a check that nothing is left behind."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.platforms.local.cgroups import ROOT_NAME, detect_driver
from runner.platforms.local.testbed import LocalTestbed, Ports

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SIZER = [sys.executable, "-m", "runner"]
_ids = itertools.count()


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


@pytest.fixture
def testbed_factory(tmp_path: Path) -> Iterator:
    """Builds LocalTestbeds on free ports; on teardown stops them and checks nothing is left."""
    made: list[LocalTestbed] = []

    def make(**kwargs: object) -> LocalTestbed:
        testbed = LocalTestbed(
            workdir=tmp_path / f"testbed-{len(made)}",
            ports=Ports.free(),
            testbed_id=f"test-{os.getpid()}-{next(_ids)}",
            **kwargs,  # type: ignore[arg-type]
        )
        made.append(testbed)
        return testbed

    yield make
    for testbed in made:
        pids = [p.pid for p in testbed.supervisor.processes]
        testbed.stop()
        assert not alive(pids), f"processes left after stop: {alive(pids)}"
        assert not cgroup_tree(testbed.testbed_id), "cgroup tree left after stop"


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
