"""Shared fixtures: a real local test bed on free ports, and a check that nothing is left behind."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sizer_testing import alive, cgroup_tree

from runner.platforms.local.testbed import LocalTestbed, Ports

_ids = itertools.count()


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
