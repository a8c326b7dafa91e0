"""kubeconform -strict against the schemas of the cluster's Kubernetes and Contour (k8s/cluster/schemas.sh), as
k8s/cluster/lint.sh runs it: for tests that check the manifests the product writes."""

from __future__ import annotations

import subprocess

from support.apiserver import built
from support.project import K8S


def schemas() -> str:
    """The schema folder (made on the first call from the cached Go modules)."""
    out = subprocess.run([str(K8S / "cluster" / "schemas.sh")], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"k8s/cluster/schemas.sh failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def kubeconform(documents: str) -> subprocess.CompletedProcess:
    """Validate multi-document YAML strictly (unknown fields and missing required ones are errors)."""
    location = schemas() + "/{{ .ResourceKind }}{{ .KindSuffix }}.json"
    command = [str(built("kubeconform")), "-strict", "-summary", "-output", "text", "-schema-location", location, "-"]
    return subprocess.run(command, input=documents, capture_output=True, text=True, timeout=60, check=False)
