"""Shared fixtures: a real local test bed on free ports, and a check that nothing is left behind; the order in
which the suite's parts run; how the property tests draw their examples."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from runner.platforms.local.testbed import LocalTestbed, Ports
from support.examples import FUZZ_SCALE
from support.processes import alive, cgroup_tree

_ids = itertools.count()

# Property tests (hypothesis): `make test` and `make test-fast` run each on a fixed, derandomized set of examples,
# the same on every run and machine, so a landing never fails on an example first drawn that day; with the
# @example()s each keeps, the inputs that once failed. `make fuzz` (GATEWAY_SIZER_FUZZ=N) draws N times as many
# fresh examples instead: a bench that looks for new bugs (bench/README.md).
settings.register_profile("gate", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("fuzz", derandomize=False, database=None, deadline=None, print_blob=True)
settings.load_profile("fuzz" if FUZZ_SCALE > 1 else "gate")

# The parts of the suite in the order they run. The ones that measure CPU on the local platform go first, on a
# quiet machine: the session's kube-apiserver and etcd (tests/kubernetes) and the one-machine cluster
# (tests/cluster, taken down again by tests/cluster_infra) would otherwise run beside them until the session ends.
# The API server's tests go last, so that it does not run beside the cluster's sweeps either.
ORDER = ("local", "locustfile", "bench", "unit", "engine", "report", "cluster", "cluster_infra", "kubernetes")
TESTS = Path(__file__).resolve().parent


def _part(item: pytest.Item) -> int:
    path = item.path.resolve()
    if not path.is_relative_to(TESTS):  # a test written for the occasion (tests/unit/test_tiers_signals.py's)
        return len(ORDER)
    parts = path.relative_to(TESTS).parts
    return ORDER.index(parts[0]) if len(parts) > 1 and parts[0] in ORDER else len(ORDER)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_part)  # stable: each part keeps its files' and tests' order


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
