"""Where things are: the project's own folders, the cache for built tools, the state of running test beds."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SCENARIO_DIR = PROJECT_ROOT / "scenarios"
LOCUSTFILE_DIR = PROJECT_ROOT / "locustfiles"
RESULTS_ROOT = PROJECT_ROOT / "results"


def cache_dir() -> Path:
    """`$GATEWAY_SIZER_CACHE`, else ~/.cache/gateway-sizer (the Makefile uses the same default)."""
    return Path(os.environ.get("GATEWAY_SIZER_CACHE") or Path.home() / ".cache" / "gateway-sizer")


def state_dir() -> Path:
    """Records of running testbeds, so `testbed down` can stop what another process started."""
    path = cache_dir() / "state"
    path.mkdir(parents=True, exist_ok=True)
    return path
