"""tests/tiers.py reads each tier's counts from pytest's own closing line, decorated or under -q."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiers import closing_counts

TWO_PASS_ONE_FAIL = """
def test_one():
    pass

def test_two():
    pass

def test_three():
    assert False
"""


@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["default", "quiet"])
def test_the_counts_of_a_real_pytest_run_are_read_with_or_without_q(tmp_path: Path, quiet: list[str]):
    (tmp_path / "test_three.py").write_text(TWO_PASS_ONE_FAIL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this session's xdist worker
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path), "-p", "no:cacheprovider", *quiet],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:]
    assert closing_counts(done.stdout) == {"passed": 2, "failed": 1}, done.stdout[-2000:]


def test_output_without_a_closing_line_has_no_counts():
    assert closing_counts("collected 0 items\n\n==== no tests ran in 0.01s ====\n") == {}
