"""`recommend --output yaml` in the install's shape: each document valid for `kubeconform -strict` against the
cluster's schemas, and server-side applied to a real kube-apiserver, which validates it again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from runner.model import EnvoyWorkload
from runner.paths import PROJECT_ROOT
from runner.report.manifests import FIELD_MANAGER
from runner.results import load_summary
from support.k8s import create, workload
from support.kubeconform import kubeconform
from support.processes import run_sizer

pytestmark = pytest.mark.kubernetes
DATA = PROJECT_ROOT / "tests" / "report" / "data"
RUN = DATA / "local-150m-300m"  # 4 x 300m for 5,000 RPS, N+1 = 5, HPA 69%
ROUNDS_RUN = DATA / "local-rounds"  # 250m and 500m in 5 rounds: at p99 <= 10 ms latency binds below both knees
ORIGINAL = {"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}


def _kubernetes_run(tmp_path: Path, namespace: str, kind: str = "Deployment", run: Path = RUN, pods: int = 2) -> Path:
    """A recorded local run, as if it had swept the Envoy `kind` `envoy` in `namespace` with envoy.workload.kind
    auto: what a run records of the workload it found (runner.model.EnvoyWorkload), its kind among it."""
    run_dir = tmp_path / "run"
    shutil.copytree(run, run_dir)
    summary = load_summary(run_dir)
    found = EnvoyWorkload(kind=kind, namespace=namespace, name="envoy", container="envoy",  # type: ignore[arg-type]
                          selector={"app": "envoy"}, pods=pods)  # fmt: skip
    environment = summary.environment.model_copy(update={"envoy_workload": found})
    summary = summary.model_copy(update={"platform": "kubernetes", "environment": environment})
    (run_dir / "summary.json").write_text(summary.to_json())
    scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    scenario["envoy"]["workload"] = {"namespace": namespace, "name": "envoy", "container": "envoy", "kind": "auto"}
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    return run_dir


def _valid(documents: str) -> None:
    checked = kubeconform(documents)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    count = documents.count("\napiVersion: ")
    assert f"Valid: {count}, Invalid: 0, Errors: 0, Skipped: 0" in checked.stdout, checked.stdout


def test_a_daemonset_install_gets_nodes_and_cores_per_pod_valid_with_its_threads_and_where_the_slo_bound(
    admin, namespace, tmp_path
):
    run_dir = _kubernetes_run(tmp_path, namespace, "DaemonSet", ROUNDS_RUN, pods=3)
    args = ["recommend", "--target-rps=5000", "--slo-p99-ms=10", "--run", str(run_dir)]
    text = run_sizer(*args)
    assert text.returncode == 0, text.stderr
    assert f"Shape: DaemonSet {namespace}/envoy, container envoy (run " in text.stdout
    assert "the kind as the run found it" in text.stdout
    assert (
        "  at 250m: bound before the 90% CPU threshold: capacity 816 RPS (broke at 922: p99 50 ms at 922 RPS, over "
        "the 10 ms SLO; 95% CI 764-922 over 5 rounds)" in text.stdout
    )
    assert "  on 3 nodes (the 3 it ran on in run " in text.stdout and "N+1:         " in text.stdout
    # 3,250 RPS a pod at 2,000 RPS per core (the 500m capacity at 10 ms): 1700m, and by the run's rule 2 threads
    assert "set --concurrency 2 in the envoy container's args for 1700m per pod" in text.stdout
    assert "2 threads at 1700m were not measured (1 at 500m)" in text.stdout
    assert "HPA" not in text.stdout.replace("no HorizontalPodAutoscaler", "").replace("an HPA cannot", "")

    out = run_sizer(*args, "--output=yaml")
    assert out.returncode == 0, out.stderr
    docs = list(yaml.safe_load_all(out.stdout))
    assert [d["kind"] for d in docs] == ["DaemonSet"]  # never an HPA or a PDB for a DaemonSet
    assert "#   set --concurrency 2 in the envoy container's args" in out.stdout
    assert "#   at 250m: bound before the 90% CPU threshold" in out.stdout
    _valid(out.stdout)

    create(admin, workload("DaemonSet", namespace, "envoy", {"shutdown-manager": {}, "envoy": ORIGINAL}))
    _apply(DynamicClient(admin.api), docs[0], force=True)
    [envoy] = [c for c in admin.apps.read_namespaced_daemon_set("envoy", namespace).spec.template.spec.containers
               if c.name == "envoy"]  # fmt: skip
    limits = docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert envoy.resources.limits == envoy.resources.requests == limits


def test_a_deployment_install_gets_replicas_an_hpa_and_a_pdb_valid_with_its_threads_and_where_the_slo_bound(
    tmp_path,
):
    run_dir = _kubernetes_run(tmp_path, "edge", "Deployment", ROUNDS_RUN)
    args = ["recommend", "--target-rps=5000", "--slo-p99-ms=10", "--run", str(run_dir)]
    text = run_sizer(*args)
    assert text.returncode == 0, text.stderr
    assert "Shape: Deployment edge/envoy, container envoy" in text.stdout
    assert "  at 500m: bound before the 90% CPU threshold" in text.stdout
    assert "  HPA target:  67% CPU utilization = floor(100 x 0.872 / (1 + 0.3))" in text.stdout  # at the capacity
    assert "set --concurrency 1 in the envoy container's args for 250m per pod" in text.stdout

    out = run_sizer(*args, "--output=yaml")
    assert out.returncode == 0, out.stderr
    docs = list(yaml.safe_load_all(out.stdout))
    assert [d["kind"] for d in docs] == ["Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget"]
    assert "#   set --concurrency 1 in the envoy container's args" in out.stdout
    assert "#   at 500m: bound before the 90% CPU threshold" in out.stdout
    _valid(out.stdout)


def test_kubeconform_refuses_the_workload_recommend_wrote_without_a_selector(tmp_path):
    """What `recommend` wrote until 2026-11: a partial Deployment with no selector, which the schema requires."""
    run_dir = _kubernetes_run(tmp_path, "edge", "Deployment")
    out = run_sizer("recommend", "--target-rps=5000", "--output=yaml", "--run", str(run_dir))
    first = next(yaml.safe_load_all(out.stdout))
    del first["spec"]["selector"]
    checked = kubeconform(yaml.safe_dump(first))
    assert checked.returncode != 0 and "missing property 'selector'" in checked.stdout, checked.stdout


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
