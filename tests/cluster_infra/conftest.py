"""Helpers for the tests of k8s/: the scripts run for real, from the repository root."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
CACHE = Path(os.environ.get("GATEWAY_SIZER_CACHE") or Path.home() / ".cache" / "gateway-sizer")


def run(
    cmd: list[str], timeout: float, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """Run a command from the repository root, capturing text output; fail with its stderr tail."""
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def built_tools() -> dict[str, Path]:
    """helm, kubeconform, crd2jsonschema and kubectl from k8s/cluster/build.sh (cached after the first run)."""
    names = ["helm", "kubeconform", "crd2jsonschema", "kubectl"]
    out = run([str(K8S / "cluster/build.sh"), "--print-path", *names], timeout=3600).stdout.split()
    return dict(zip(names, map(Path, out), strict=True))
