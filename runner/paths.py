"""Folders outside the repository: the cache for built tools and the state of running testbeds."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$GATEWAY_SIZER_CACHE`, else ~/.cache/gateway-sizer (the Makefile uses the same default)."""
    return Path(os.environ.get("GATEWAY_SIZER_CACHE") or Path.home() / ".cache" / "gateway-sizer")


def state_dir() -> Path:
    """Records of running testbeds, so `testbed down` can stop what another process started."""
    path = cache_dir() / "state"
    path.mkdir(parents=True, exist_ok=True)
    return path
