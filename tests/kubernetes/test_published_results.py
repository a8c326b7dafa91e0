"""A run's records published into a ConfigMap by a runner that runs as a Job, and `fetch` bringing them back, as
real API objects: the files come back byte for byte, the ConfigMap is owned by the Job of the pod that publishes
(so deleting the Job deletes it), a republished run replaces its own, and fetch picks the newest or the named
run, refusing an unknown one in one line. (tests/cluster/test_runner_job.py runs the whole Job on the cluster.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from runner.errors import UsageError
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.published import FILES, POD_NAME, configmap_name, fetch, publish

pytestmark = pytest.mark.kubernetes


def _run_dir(folder: Path, run_id: str, summary: str = '{"run": 1}') -> Path:
    run_dir = folder / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(summary)
    (run_dir / "scenario.yaml").write_text("name: x\n")
    (run_dir / "steps.csv").write_bytes(bytes(range(256)) * 40)  # any bytes survive
    (run_dir / "report.html").write_text("<html>not published: fetch renders it</html>")
    return run_dir


def _job_pod(admin: Cluster, namespace: str) -> tuple[str, str]:
    """A Job and a pod it owns (no controller runs here: the pod is made by hand, as the Job's would be)."""
    container = {"name": "c", "image": "example/none:1"}
    job = client.BatchV1Api(admin.api).create_namespaced_job(namespace, {
        "metadata": {"name": "runner"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    })  # fmt: skip
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "runner", "uid": job.metadata.uid, "controller": True}
    admin.core.create_namespaced_pod(namespace, {"metadata": {"name": "runner-abc", "ownerReferences": [owner]},
                                                 "spec": {"containers": [container]}})  # fmt: skip
    return "runner-abc", job.metadata.uid


def test_published_records_come_back_byte_for_byte_owned_by_the_job(admin, namespace, tmp_path, monkeypatch):
    pod, job_uid = _job_pod(admin, namespace)
    monkeypatch.setenv(POD_NAME, pod)
    run_dir = _run_dir(tmp_path / "pod", "20261126-100000-kubernetes")
    name = publish(admin, run_dir, namespace)
    assert name == configmap_name(run_dir.name)
    published = admin.core.read_namespaced_config_map(name, namespace)
    assert [(o.kind, o.uid) for o in published.metadata.owner_references] == [("Job", job_uid)]
    assert "report.html.gz" not in published.binary_data  # rendered where it is fetched

    home = fetch(admin, namespace, tmp_path / "home")
    assert home == tmp_path / "home" / run_dir.name
    assert sorted(p.name for p in home.iterdir()) == sorted(n for n in FILES if (run_dir / n).exists())
    for path in home.iterdir():
        assert path.read_bytes() == (run_dir / path.name).read_bytes(), path.name


def test_fetch_picks_the_newest_or_the_named_run_and_a_resumed_run_replaces_its_own(admin, namespace, tmp_path):
    older = _run_dir(tmp_path / "pod", "20261126-090000-kubernetes", '{"run": "older"}')
    newer = _run_dir(tmp_path / "pod", "20261126-100000-kubernetes", '{"run": "newer"}')
    publish(admin, older, namespace)  # outside a Job's pod: no owner
    publish(admin, newer, namespace)
    assert (fetch(admin, namespace, tmp_path / "a") / "summary.json").read_text() == '{"run": "newer"}'
    named = fetch(admin, namespace, tmp_path / "b", older.name)
    assert (named / "summary.json").read_text() == '{"run": "older"}'
    (older / "summary.json").write_text('{"run": "older, resumed"}')
    publish(admin, older, namespace)
    again = fetch(admin, namespace, tmp_path / "c", older.name)
    assert (again / "summary.json").read_text() == '{"run": "older, resumed"}'
    with pytest.raises(UsageError) as unknown:
        fetch(admin, namespace, tmp_path / "d", "20261126-000000-nothing")
    line = unknown.value.one_line()
    assert older.name in line and newer.name in line and "\n" not in line


def test_fetch_in_a_namespace_without_a_run_names_the_namespace(admin, namespace, tmp_path):
    with pytest.raises(UsageError, match=f"no run published in namespace {namespace}"):
        fetch(admin, namespace, tmp_path)
