"""The report tests' runs: the recorded ones in data/, and one simulated with interleaved rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.rounds import simulate


@pytest.fixture(scope="session")
def simulated_rounds_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulated rounds run's directory (made once per session; copy it before changing it)."""
    return simulate(tmp_path_factory.mktemp("simulated"))
