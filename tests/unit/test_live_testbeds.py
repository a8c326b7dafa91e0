"""Which recorded test beds are alive: the basis of the warning two local sweeps on one machine get."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner.platforms.local.state import TestbedRecord, live_testbeds


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_SIZER_CACHE", str(tmp_path))
    return tmp_path


def test_a_record_counts_while_its_owner_runs_and_not_after(cache):
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        TestbedRecord(testbed_id=f"sweep-{owner.pid}", owner_pid=owner.pid).save()
        TestbedRecord(testbed_id="sweep-1", owner_pid=2**22 + 1).save()  # above pid_max: never alive
        assert live_testbeds() == [f"sweep-{owner.pid}"]
    finally:
        owner.kill()
        owner.wait()
    assert live_testbeds() == []


def test_the_hand_started_testbed_counts_and_the_callers_own_record_does_not(cache):
    import os

    TestbedRecord(testbed_id="testbed", owner_pid=0).save()
    TestbedRecord(testbed_id=f"sweep-{os.getpid()}", owner_pid=os.getpid()).save()
    assert live_testbeds() == ["testbed"]
