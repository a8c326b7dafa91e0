"""k8s/cluster/build.sh: the interface the API-server fixture relies on."""

from __future__ import annotations

import os

import pytest

from support.cluster import run
from support.project import K8S

pytestmark = pytest.mark.kubernetes


@pytest.mark.timeout(3600)
def test_print_path_prints_only_the_kube_apiserver_path_and_it_reports_v1_34_4():
    proc = run([str(K8S / "cluster/build.sh"), "--print-path", "kube-apiserver"], timeout=3600)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"stdout must carry only the path, got {lines!r}"
    path = lines[0]
    assert path.endswith("/bin/kubernetes-v1.34.4/kube-apiserver")
    assert os.access(path, os.X_OK)
    assert run([path, "--version"], timeout=30).stdout.strip() == "Kubernetes v1.34.4"


def test_contour_module_names_the_crds_file():
    proc = run([str(K8S / "cluster/build.sh"), "--print-path", "contour-module"], timeout=600)
    crds = proc.stdout.strip() + "/examples/contour/01-crds.yaml"
    with open(crds) as f:
        assert "name: httpproxies.projectcontour.io" in f.read()


def test_unknown_component_is_one_clear_line():
    proc = run([str(K8S / "cluster/build.sh"), "kube-nonsense"], timeout=60, check=False)
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].startswith("error: unknown component 'kube-nonsense'")
