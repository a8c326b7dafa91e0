"""Facts about the machine and the components, for the results and the report's environment table."""

from __future__ import annotations

import os
import platform as host
import sys
from pathlib import Path
from typing import Any

from runner import __version__
from runner.model import Environment


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return host.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    return {
        "hostname": host.node(),
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "kernel": host.release(),
        "os": host.platform(terse=True),
        "python": sys.version.split()[0],
        "gateway_sizer": __version__,
    }


def collect(platform_facts: dict[str, Any], overrides: dict[str, str]) -> Environment:
    """The machine running the sweep, the platform's own facts, and the overrides given."""
    return Environment.model_validate({"machine": machine(), **platform_facts, "overrides": overrides})
