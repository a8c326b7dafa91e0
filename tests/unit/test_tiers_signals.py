"""tests/tiers.py signalled alone (a CI runner cancelling its job, `kill <pid>`): the running tier's pytest tears down
and ends, and the run ends with 128 + the signal's number and a table naming the tier interrupted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from runner.paths import PROJECT_ROOT
from support.processes import alive

TIERS = PROJECT_ROOT / "tests" / "tiers.py"
# the tier whose pytest runs the sleeper: tests/report's `slow` tests, one at a time, all deselected here by -k
TIER = "browser"
SLEEPER = """
import os
import time
from pathlib import Path

import pytest


@pytest.fixture
def teardown_marker():
    yield
    Path({torn_down!r}).write_text("torn down")


@pytest.mark.slow
def test_sleeper_until_signalled(teardown_marker):
    Path({started!r}).write_text(str(os.getpid()))
    time.sleep(60)
"""


def _wait_for(path: Path, tiers: subprocess.Popen[bytes], log: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert tiers.poll() is None, f"tests/tiers.py ended (exit {tiers.returncode}) first:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def test_sigterm_to_tiers_alone_tears_the_running_tier_down_and_marks_it_interrupted(tmp_path: Path):
    started, torn_down, log = tmp_path / "started", tmp_path / "torn-down", tmp_path / "tiers.log"
    sleeper = tmp_path / "test_sleeper.py"
    sleeper.write_text(SLEEPER.format(started=str(started), torn_down=str(torn_down)))
    pytest_args = [str(sleeper), "-k", "sleeper_until_signalled", f"--basetemp={tmp_path / 'inner'}"]
    argv = [sys.executable, str(TIERS), "--tier", TIER, "--", *pytest_args, "-p", "no:cacheprovider"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this session's xdist worker
    with log.open("wb") as out:  # its own session: a signal to this test's group does not reach it twice
        tiers = subprocess.Popen(
            argv, cwd=PROJECT_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    pid = 0
    try:
        _wait_for(started, tiers, log, seconds=300)  # a tier's pytest at nice 19 beside the faults starts slowly
        pid = int(started.read_text())
        os.kill(tiers.pid, signal.SIGTERM)  # tests/tiers.py alone, not its group
        code = tiers.wait(timeout=90)  # the teardown takes a moment; the SIGKILL would come only after 120 s
        text = log.read_text()
        assert code == 128 + signal.SIGTERM, text[-3000:]
        assert not alive([pid]), f"the tier's pytest {pid} outlived tests/tiers.py"
        assert torn_down.read_text() == "torn down", "the tier's pytest was not torn down"
        assert re.search(rf"^{TIER}\s+interrupted \(exit 2\)", text, re.M), text[-3000:]
        assert "stopped by SIGTERM" in text
    finally:  # on a failure: nothing left running
        if tiers.poll() is None:
            os.killpg(tiers.pid, signal.SIGKILL)
            tiers.wait()
        for left in alive([pid] if pid else []):
            os.kill(left, signal.SIGKILL)
