"""The tools the tests of k8s/ run (built once by k8s/cluster/build.sh); the scripts run for real, from the
repository root (support.cluster.run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cluster import run
from support.project import K8S


@pytest.fixture(scope="session")
def built_tools() -> dict[str, Path]:
    """helm, kubeconform, crd2jsonschema and kubectl from k8s/cluster/build.sh (cached after the first run)."""
    names = ["helm", "kubeconform", "crd2jsonschema", "kubectl"]
    out = run([str(K8S / "cluster/build.sh"), "--print-path", *names], timeout=3600).stdout.split()
    return dict(zip(names, map(Path, out), strict=True))
