"""The chart and the manifests validate strictly, and the validation itself rejects a bad HTTPProxy."""

from __future__ import annotations

import subprocess

import pytest

from .conftest import CACHE, K8S, run

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
