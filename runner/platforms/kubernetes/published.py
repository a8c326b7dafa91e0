"""A run's results kept in the cluster, for a runner that runs there as a Job (charts/gateway-loadtest `runner`),
and `gateway-sizer fetch`, which brings them home.

A Job's pod has no disk a user can reach once it is gone, so the runner writes its run's records into a ConfigMap,
`gateway-sizer-results-<run hash>` in its own namespace (the Job's, from the downward API; else the scenario's
kubernetes.namespace): at the start, again after every change it records (before the change is made) and at the end
of the sweep, finished, failed or stopped (publishing.py). A Job killed hard so leaves in the cluster what `restore`
needs. The records: summary.json, scenario.yaml, environment.json, steps.csv, report.md and
kubernetes-originals.json, each gzipped (a ConfigMap holds at most 1 MiB; a run's records are tens of KiB
compressed). A ConfigMap rather than a PersistentVolumeClaim: every cluster has them, the runner's RBAC already
creates them, and `fetch` reads them with a user's kubeconfig, without a pod to copy from. The ConfigMap is owned by
the Job (through the pod's owner reference), so deleting the Job, or `helm uninstall`, deletes it too. `fetch` writes
the files into results/<run-id>/ and renders report.html and the plots there from summary.json, as `gateway-sizer
report` does.
"""

from __future__ import annotations

import base64
import gzip
import os
import re
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.errors import UsageError
from runner.platforms.kubernetes.connection import Cluster, ConflictError, call
from runner.platforms.kubernetes.objects import (
    COMPONENT_LABEL,
    MANAGED_BY,
    RUN_LABEL,
    label_selector,
    label_value,
    run_hash,
)

COMPONENT = "gateway-sizer-results"
RUN_ANNOTATION = "gateway-sizer/run"  # the run id in full (a label value is cut to 63 characters)
FILES = ("summary.json", "scenario.yaml", "environment.json", "steps.csv", "report.md", "kubernetes-originals.json")
MAX_BYTES = 900 * 1024  # under a ConfigMap's 1 MiB, with room for its metadata
POD_NAME, POD_NAMESPACE = "POD_NAME", "POD_NAMESPACE"  # set by the Job's downward API
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}")  # a run directory's name: never a path


def configmap_name(run_id: str) -> str:
    return f"{COMPONENT}-{run_hash(run_id)}"


def _owner(cluster: Cluster, namespace: str) -> list[client.V1OwnerReference]:
    """The owner reference to the Job whose pod runs this process (none outside a Job's pod)."""
    pod_name = os.environ.get(POD_NAME)
    if not pod_name:
        return []
    pod = call(f"read pod {namespace}/{pod_name}", cluster.core.read_namespaced_pod, pod_name, namespace)
    return [
        client.V1OwnerReference(api_version=o.api_version, kind=o.kind, name=o.name, uid=o.uid)
        for o in pod.metadata.owner_references or []
        if o.kind == "Job"
    ]


def publish(cluster: Cluster, run_dir: Path, namespace: str) -> str:
    """Write the run's records into its results ConfigMap in `namespace` (replacing one of the same run, as a
    resumed run's); returns the ConfigMap's name. UsageError when they do not fit."""
    data = {
        f"{name}.gz": base64.b64encode(gzip.compress((run_dir / name).read_bytes(), mtime=0)).decode()
        for name in FILES
        if (run_dir / name).is_file()
    }
    size = sum(len(value) for value in data.values())
    if size > MAX_BYTES:
        raise UsageError(
            f"run {run_dir.name}'s records take {size / 1024:,.0f} KiB compressed, more than a ConfigMap holds",
            "give the Job a volume for --results and copy the run directory from it",
        )
    name = configmap_name(run_dir.name)
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels={COMPONENT_LABEL: COMPONENT, RUN_LABEL: label_value(run_dir.name), **MANAGED_BY},
            annotations={RUN_ANNOTATION: run_dir.name},
            owner_references=_owner(cluster, namespace) or None,
        ),
        binary_data=data,
    )
    try:
        call(f"create ConfigMap {namespace}/{name}", cluster.core.create_namespaced_config_map, namespace, body)
    except ConflictError:  # published before (this run's start, a resumed run's): its records replaced in place,
        # never deleted first (a kill between the two would lose them), its owner kept
        found: Any = call(f"read ConfigMap {namespace}/{name}", cluster.core.read_namespaced_config_map, name,
                          namespace)  # fmt: skip
        found.binary_data = data
        call(f"update ConfigMap {namespace}/{name}", cluster.core.replace_namespaced_config_map, name, namespace,
             found)  # fmt: skip
    return name


def published_runs(cluster: Cluster, namespace: str) -> list[tuple[str, Any]]:
    """(run id, ConfigMap) of every run published in `namespace`, oldest first."""
    selector = label_selector({COMPONENT_LABEL: COMPONENT, **MANAGED_BY})
    found = call(f"list ConfigMaps in {namespace}", cluster.core.list_namespaced_config_map, namespace,
                 label_selector=selector)  # fmt: skip
    runs = [((item.metadata.annotations or {}).get(RUN_ANNOTATION, ""), item) for item in found.items]
    return sorted(((run, item) for run, item in runs if run), key=lambda pair: pair[0])


def fetch(cluster: Cluster, namespace: str, results: Path, run_id: str | None = None) -> Path:
    """Write a published run's records (the newest when `run_id` is None) into results/<run-id>/; returns that
    folder. UsageError naming the runs there when none matches."""
    runs = published_runs(cluster, namespace)
    if not runs:
        raise UsageError(
            f"no run published in namespace {namespace}",
            "the runner publishes at the end of a sweep run as a Job (--publish); check the Job's log",
        )
    chosen = [pair for pair in runs if pair[0] == run_id] if run_id else runs[-1:]
    if not chosen:
        raise UsageError(
            f"no run {run_id} published in {namespace}", f"published there: {', '.join(r for r, _ in runs)}"
        )
    name, item = chosen[0]
    if not RUN_ID.fullmatch(name) or name in (".", ".."):
        raise UsageError(f"ConfigMap {item.metadata.name} names run {name!r}, not a run id", "delete it")
    run_dir = results / name
    run_dir.mkdir(parents=True, exist_ok=True)
    for key, value in (item.binary_data or {}).items():
        if key.endswith(".gz") and key[:-3] in FILES:
            (run_dir / key[:-3]).write_bytes(gzip.decompress(base64.b64decode(value)))
    return run_dir
