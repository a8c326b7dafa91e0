"""`recommend --output yaml` server-side applied to a real kube-apiserver, which validates every document."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from runner.paths import PROJECT_ROOT
from runner.report.manifests import FIELD_MANAGER
from runner.results import load_summary
from support.k8s import create, workload
from support.processes import run_sizer

pytestmark = pytest.mark.kubernetes
RUN = PROJECT_ROOT / "tests" / "report" / "data" / "local-150m-300m"  # 4 x 300m for 5,000 RPS, N+1 = 5, HPA 69%
ORIGINAL = {"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}


def _kubernetes_run(tmp_path: Path, namespace: str) -> Path:
    """The recorded local run, as if it had swept the Envoy Deployment `envoy` in `namespace`."""
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    summary = load_summary(run_dir).model_copy(update={"platform": "kubernetes"})
    (run_dir / "summary.json").write_text(summary.to_json())
    scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    scenario["envoy"]["workload"] = {"namespace": namespace, "name": "envoy", "container": "envoy", "kind": "auto"}
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    return run_dir


def _apply(dynamic: DynamicClient, doc: dict, force: bool = False) -> None:
    """kubectl apply --server-side [--force-conflicts], as the YAML's header says."""
    resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    name, namespace = doc["metadata"]["name"], doc["metadata"]["namespace"]
    resource.server_side_apply(
        body=doc, name=name, namespace=namespace, field_manager=FIELD_MANAGER, force_conflicts=force
    )


def test_recommend_yaml_applies_and_reads_back(admin, namespace, tmp_path):
    create(admin, workload("Deployment", namespace, "envoy", {"shutdown-manager": {}, "envoy": ORIGINAL}, replicas=2))
    run_dir = _kubernetes_run(tmp_path, namespace)
    out = run_sizer("recommend", "--target-rps=5000", "--output=yaml", "--run", str(run_dir))
    assert out.returncode == 0, out.stderr
    docs = list(yaml.safe_load_all(out.stdout))
    assert [d["kind"] for d in docs] == ["Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget"]
    dynamic = DynamicClient(admin.api)
    # The installer (here: this test's create) owns the envoy container's resources: a plain apply conflicts on
    # them, as the header warns, and --force-conflicts takes them over.
    with pytest.raises(ApiException) as conflict:
        _apply(dynamic, docs[0])
    assert conflict.value.status == 409 and 'containers[name=\\"envoy\\"].resources' in conflict.value.body
    assert "--force-conflicts" in out.stdout
    _apply(dynamic, docs[0], force=True)
    for doc in docs[1:]:
        _apply(dynamic, doc)

    deployment = admin.apps.read_namespaced_deployment("envoy", namespace)
    containers = {c.name: c for c in deployment.spec.template.spec.containers}
    assert containers["envoy"].resources.limits == {"cpu": "300m", "memory": "64Mi"}
    assert containers["envoy"].resources.requests == {"cpu": "300m", "memory": "64Mi"}
    assert containers["envoy"].image == "example/none:1"  # the apply merged into the live object
    assert containers["shutdown-manager"].resources.limits is None
    assert deployment.spec.replicas == 2  # left to the HPA

    hpa = client.AutoscalingV2Api(admin.api).read_namespaced_horizontal_pod_autoscaler("envoy", namespace)
    assert (hpa.spec.min_replicas, hpa.spec.max_replicas) == (5, 10)
    assert hpa.spec.scale_target_ref.kind == "Deployment" and hpa.spec.scale_target_ref.name == "envoy"
    (metric,) = hpa.spec.metrics
    assert metric.type == "ContainerResource"
    assert (metric.container_resource.container, metric.container_resource.name) == ("envoy", "cpu")
    assert metric.container_resource.target.type == "Utilization"
    assert metric.container_resource.target.average_utilization == 69

    pdb = client.PolicyV1Api(admin.api).read_namespaced_pod_disruption_budget("envoy", namespace)
    assert pdb.spec.max_unavailable == 1 and pdb.spec.selector.match_labels == {"app": "envoy"}
    assert deployment.spec.selector.match_labels == pdb.spec.selector.match_labels  # the PDB counts envoy's pods

    # The server validates what it was given: the same HPA with a utilization of 0 is refused.
    broken = docs[1]
    broken["spec"]["metrics"][0]["containerResource"]["target"]["averageUtilization"] = 0
    with pytest.raises(ApiException) as error:
        _apply(dynamic, broken)
    assert error.value.status == 422 and "averageUtilization" in error.value.body
