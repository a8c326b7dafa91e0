"""Autoscalers that would fight the run over the Envoy workload it sizes, read before any change.

A HorizontalPodAutoscaler (autoscaling/v2) or a KEDA ScaledObject (keda.sh, read only where its CRD is served)
whose scaleTargetRef is the workload changes its pod count under the sweep's load, mid-window: the knee would be
measured over a pod count nobody chose (and Contour's provisioner resets the replicas at every reconcile, which
the run's changes cause). Each is refused in one line with the fix: a ScaledObject is paused with KEDA's
`autoscaling.keda.sh/paused` annotation (a paused one is let through); an HPA cannot be paused, so it is taken out
for the run and applied again after. The HPA that KEDA makes for a ScaledObject is judged as its ScaledObject.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from runner.platforms.kubernetes.connection import Cluster, call
from runner.platforms.kubernetes.findings import Finding
from runner.platforms.kubernetes.workloads import Workload

KEDA = ("keda.sh", "v1alpha1", "scaledobjects")
KEDA_PAUSED = ("autoscaling.keda.sh/paused", "autoscaling.keda.sh/paused-replicas")
AUTOSCALER_DOCS = "docs/kubernetes.md#autoscalers"


def targets(ref: dict[str, Any], workload: Workload) -> bool:
    """A scaleTargetRef names the workload (a ScaledObject's kind defaults to Deployment)."""
    return (ref.get("kind") or "Deployment", ref.get("name")) == (workload.kind, workload.name)


def _owned_by_keda(item: dict[str, Any]) -> bool:
    return any(
        owner.get("kind") == "ScaledObject" for owner in (item.get("metadata") or {}).get("ownerReferences") or []
    )


def paused(scaled_object: dict[str, Any]) -> bool:
    annotations = (scaled_object.get("metadata") or {}).get("annotations") or {}
    return annotations.get(KEDA_PAUSED[0], "").lower() == "true" or KEDA_PAUSED[1] in annotations


def autoscaler_findings(
    workload: Workload, hpas: list[dict[str, Any]], scaled_objects: list[dict[str, Any]] | None, fix_else: str
) -> list[Finding]:
    """A refusal per HPA and per unpaused ScaledObject that scales `workload` (`scaled_objects` None: no KEDA);
    `fix_else` ends each fix (the other way in: a gateway of the run's own)."""
    found: list[Finding] = []
    for item in scaled_objects or []:
        name = item["metadata"]["name"]
        if targets((item.get("spec") or {}).get("scaleTargetRef") or {}, workload) and not paused(item):
            found.append(
                Finding(
                    f"KEDA ScaledObject {workload.namespace}/{name} scales {workload}: it would change its pod count "
                    "under the sweep's load",
                    f"pause it for the run (kubectl -n {workload.namespace} annotate scaledobject {name} "
                    f"{KEDA_PAUSED[0]}=true; remove the annotation after), {fix_else}",
                )
            )
    for item in hpas:
        name = item["metadata"]["name"]
        if scaled_objects is not None and _owned_by_keda(item):
            continue  # judged as its ScaledObject
        if targets((item.get("spec") or {}).get("scaleTargetRef") or {}, workload):
            found.append(
                Finding(
                    f"HorizontalPodAutoscaler {workload.namespace}/{name} scales {workload}: it would change its pod "
                    "count under the sweep's load",
                    f"take it out for the run (kubectl -n {workload.namespace} get hpa {name} -o yaml > {name}.yaml; "
                    f"kubectl -n {workload.namespace} delete hpa {name}; apply {name}.yaml after), {fix_else}",
                )
            )
    return found


def read_autoscalers(cluster: Cluster, namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The HPAs in `namespace` and its KEDA ScaledObjects (None where KEDA's CRD is not served), as JSON."""
    listed = call(
        f"list HorizontalPodAutoscalers in {namespace}",
        client.AutoscalingV2Api(cluster.api).list_namespaced_horizontal_pod_autoscaler,
        namespace,
    )
    hpas = list(cluster.api.sanitize_for_serialization(listed).get("items") or [])
    group, version, plural = KEDA
    if version not in cluster.served_versions(group):
        return hpas, None
    found: Any = call(
        f"list KEDA ScaledObjects in {namespace}",
        cluster.custom.list_namespaced_custom_object,
        group,
        version,
        namespace,
        plural,
    )
    return hpas, list(found.get("items") or [])


def check_autoscalers(cluster: Cluster, workload: Workload, fix_else: str) -> list[Finding]:
    """The refusals of the autoscalers that scale `workload`."""
    hpas, scaled_objects = read_autoscalers(cluster, workload.namespace)
    return autoscaler_findings(workload, hpas, scaled_objects, fix_else)
