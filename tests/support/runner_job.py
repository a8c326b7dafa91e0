"""The runner as a Job on the one-machine cluster (charts/gateway-loadtest `runner`): its image built from this
checkout, helm, the Job's state and its pod, what a release and a run leave in the namespace, and the objects a
run changes, read whole for a before-and-after comparison field by field."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.paths import PROJECT_ROOT
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.objects import MANAGED_BY, label_selector
from runner.platforms.kubernetes.provisioned import PARAMETERS
from runner.platforms.kubernetes.resize import live_pods
from support.cluster import run

NAMESPACE = "gateway-loadtest"
CONTAINERD_SOCK = "/run/gateway-sizer/containerd/containerd.sock"
VOLATILE = ("resourceVersion", "generation", "managedFields", "uid", "creationTimestamp")  # metadata a write moves
ROLLOUT_COUNTERS = ("deployment.kubernetes.io/revision", "deprecated.daemonset.template.generation")  # ditto


def build_runner_image() -> None:
    """The runner image of this checkout, as cluster-up builds it, imported into containerd (unchanged code:
    nothing rebuilt or imported)."""
    run([sys.executable, str(PROJECT_ROOT / "k8s" / "images" / "build_images.py"), "--import", "--address",
         CONTAINERD_SOCK, "runner"], timeout=1200)  # fmt: skip


def helm() -> str:
    out = run([str(PROJECT_ROOT / "k8s" / "cluster" / "build.sh"), "--print-path", "helm"], timeout=900).stdout
    return out.split()[-1]


def install(kubeconfig: Path, release: str, scenario: Path, *values: str) -> list[str]:
    """`helm install` of the chart with only the runner on; returns the helm command line for uninstall."""
    command = [helm(), "--kubeconfig", str(kubeconfig), "--namespace", NAMESPACE]
    run([*command, "install", release, str(PROJECT_ROOT / "charts" / "gateway-loadtest"),
         "--set", "nginx.enabled=false", "--set", "httpProxy.enabled=false", "--set", "runner.enabled=true",
         "--set", "runner.image.pullPolicy=Never", "--set-file", f"runner.scenario={scenario}", *values],
        timeout=120)  # fmt: skip
    return command


def job_done(admin: Cluster, release: str) -> str | None:
    """ "Complete" or "Failed" once the release's Job has ended (with the reason when it failed), else None."""
    job: Any = client.BatchV1Api(admin.api).read_namespaced_job(f"{release}-runner", NAMESPACE)
    for condition in job.status.conditions or []:
        if condition.type in ("Complete", "Failed") and condition.status == "True":
            return str(condition.type) + (f" ({condition.reason})" if condition.type == "Failed" else "")
    return None


def job_pods(admin: Cluster, release: str) -> list[Any]:
    return list(admin.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={release}-runner").items)


def job_logs(admin: Cluster, release: str) -> str:
    return "".join(admin.core.read_namespaced_pod_log(p.metadata.name, NAMESPACE) for p in job_pods(admin, release))


def left(admin: Cluster, release: str) -> list[str]:
    """Anything of the release or of a run still in the namespace."""
    jobs: Any = client.BatchV1Api(admin.api).list_namespaced_job(NAMESPACE)
    configmaps: Any = admin.core.list_namespaced_config_map(NAMESPACE)
    deployments: Any = admin.apps.list_namespaced_deployment(NAMESPACE, label_selector=label_selector(MANAGED_BY))
    found = [f"Job {j.metadata.name}" for j in jobs.items]
    found += [f"Pod {p.metadata.name}" for p in job_pods(admin, release)]
    found += [f"ConfigMap {c.metadata.name}" for c in configmaps.items
              if c.metadata.name.startswith((release, "gateway-sizer-results"))]  # fmt: skip
    found += [f"Deployment {d.metadata.name}" for d in deployments.items]
    return found


def _stable(obj: Any) -> dict[str, Any]:
    """An object's metadata (less what every write moves) and spec."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in VOLATILE}
    annotations = {k: v for k, v in (metadata.pop("annotations", None) or {}).items() if k not in ROLLOUT_COUNTERS}
    return {"metadata": {**metadata, "annotations": annotations}, "spec": obj.get("spec")}


def snapshot(admin: Cluster, mode: str) -> dict[str, Any]:
    """What a run of `mode` (httpproxy, gateway) may change, read whole: the Envoy workload (and in gateway mode
    the ContourDeployment and the Gateway), the nginx Deployment, and the resources Envoy's pods run with."""
    serialize = admin.api.sanitize_for_serialization
    envoy = (workloads.Workload("Deployment", "projectcontour", "envoy-gateway-sizer", "envoy") if mode == "gateway"
             else workloads.Workload("DaemonSet", "projectcontour", "envoy", "envoy"))  # fmt: skip
    taken: dict[str, Any] = {
        "envoy": _stable(serialize(workloads.read(admin, envoy))),
        "nginx": _stable(serialize(admin.apps.read_namespaced_deployment("nginx", NAMESPACE))),
        "envoy pods": sorted(str(c.resources.to_dict()) for p in live_pods(admin, envoy) for c in p.spec.containers),
    }
    if mode == "gateway":
        group, version, plural = PARAMETERS
        taken["contourdeployment"] = _stable(admin.custom.get_namespaced_custom_object(
            group, version, "projectcontour", plural, "gateway-sizer"))  # fmt: skip
        taken["gateway"] = _stable(admin.custom.get_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", "projectcontour", "gateways", "gateway-sizer"))  # fmt: skip
    return taken
