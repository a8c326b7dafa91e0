"""The chart and the manifests validate strictly, and the validation itself rejects a bad HTTPProxy."""

from __future__ import annotations

import base64
import subprocess

import pytest
import yaml

from runner.paths import PROJECT_ROOT
from support.cluster import run
from support.project import CACHE, K8S

pytestmark = pytest.mark.kubernetes

BAD_HTTPPROXY = """\
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata:
  name: nginx
  namespace: gateway-loadtest
spec:
  virtualhost:
    fqdn: external.nginx
  routes:
    - services:
        - name: nginx
          port: 80
          weigth: 10
"""


@pytest.mark.timeout(3600)
def test_chart_lint_passes(built_tools):
    proc = run([str(K8S / "cluster/lint.sh")], timeout=1200)
    assert "chart-lint: all checks passed" in proc.stderr
    assert proc.stderr.count("ok   ") >= 9


@pytest.mark.timeout(1200)
def test_kubeconform_rejects_a_misspelt_httpproxy_field(built_tools):
    run([str(K8S / "cluster/lint.sh")], timeout=1200)  # makes the schemas
    schemas = sorted(CACHE.glob("schemas/kubernetes-*/httpproxy-projectcontour-v1.json"))
    assert schemas, "lint.sh should have written the HTTPProxy schema"
    proc = subprocess.run(
        [
            str(built_tools["kubeconform"]),
            "-strict",
            "-schema-location",
            str(schemas[-1].parent) + "/{{ .ResourceKind }}{{ .KindSuffix }}.json",
            "-",
        ],
        input=BAD_HTTPPROXY,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "weigth" in proc.stdout + proc.stderr


def _essentials(doc: dict) -> tuple[tuple[str, str], dict]:
    """An object without what differs by tooling alone: labels, namespace, the chart's checksum annotation,
    the line breaks kustomize puts into base64 (binaryData compared as bytes)."""
    meta = doc["metadata"]
    meta.pop("labels", None)
    meta.pop("namespace", None)
    doc.get("spec", {}).get("template", {}).get("metadata", {}).pop("annotations", None)
    if "binaryData" in doc:
        doc["binaryData"] = {key: base64.b64decode(value) for key, value in doc["binaryData"].items()}
    return (doc["kind"], meta["name"]), doc


def test_plain_backend_manifests_are_the_chart_with_default_values(built_tools):
    rendered = run(
        [str(built_tools["helm"]), "template", "gateway-loadtest", str(PROJECT_ROOT / "charts/gateway-loadtest")],
        timeout=120,
    ).stdout
    from_chart = dict(_essentials(d) for d in yaml.safe_load_all(rendered) if d)
    plain = run([str(built_tools["kubectl"]), "kustomize", str(K8S / "manifests/backend")], timeout=120).stdout
    from_plain = dict(_essentials(d) for d in yaml.safe_load_all(plain) if d and d["kind"] != "Namespace")
    assert from_plain == from_chart
    bodies = from_plain[("ConfigMap", "nginx-bodies")]["binaryData"]
    assert {key: len(body) for key, body in bodies.items()} == {"body-1024": 1024, "body-16384": 16384,
                                                               "body-262144": 262144}  # fmt: skip
