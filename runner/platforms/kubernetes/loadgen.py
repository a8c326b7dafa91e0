"""Locust in the cluster: a master Deployment and Service, a workers Deployment, the locustfiles ConfigMap.

The manifests are plain data built here (one place), created with the API and labelled so a run's
objects can be found and removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.locust import MASTER_PORT, STATS_EXTENSION, WEB_PORT, LocustOptions
from runner.platforms.kubernetes.connection import Cluster, call
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.workloads import resources_for

MASTER = "locust-master"
WORKER = "locust-worker"
CONFIGMAP = "gateway-sizer-locustfiles"
MOUNT = "/home/locust/locustfiles"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gateway-sizer", "app.kubernetes.io/part-of": "gateway-sizer"}


@dataclass(frozen=True)
class LocustDeployment:
    """What the Locust objects look like for one run."""

    namespace: str
    image: str
    pull_policy: str
    user_class: str
    locustfile: Path
    options: LocustOptions
    gateway_url: str
    workers: int
    worker_resources: dict[str, Any]
    run_id: str

    def labels(self, component: str) -> dict[str, str]:
        return {"app.kubernetes.io/name": component, "gateway-sizer/run": self.run_id[:63], **MANAGED_BY}

    def _files(self) -> str:
        return f"{MOUNT}/{self.locustfile.name},{MOUNT}/{STATS_EXTENSION}"

    def configmap(self) -> dict[str, Any]:
        folder = self.locustfile.parent
        data = {p.name: p.read_text() for p in sorted(folder.glob("*.py"))}
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": self.namespace, "labels": self.labels("locustfiles")},
            "data": data,
        }

    def _pod(self, component: str, args: list[str], resources: dict[str, Any], ports: list[dict[str, Any]]) -> dict:
        container = {
            "name": "locust",
            "image": self.image,
            "imagePullPolicy": self.pull_policy,
            "args": args,
            "workingDir": MOUNT,
            "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
            "ports": ports,
            "resources": resources,
            "volumeMounts": [{"name": "locustfiles", "mountPath": MOUNT, "readOnly": True}],
        }
        return {
            "metadata": {"labels": self.labels(component)},
            "spec": {
                "containers": [container],
                "volumes": [{"name": "locustfiles", "configMap": {"name": CONFIGMAP}}],
                "terminationGracePeriodSeconds": 5,
                "enableServiceLinks": False,
            },
        }

    def _deployment(self, name: str, replicas: int, pod: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": self.namespace, "labels": self.labels(name)},
            "spec": {"replicas": replicas, "selector": {"matchLabels": self.labels(name)}, "template": pod},
        }

    def master(self) -> dict[str, Any]:
        args = [
            "-f",
            self._files(),
            "--master",
            "--master-bind-port",
            str(MASTER_PORT),
            "--web-port",
            str(WEB_PORT),
            "--host",
            self.gateway_url,
            "--loglevel",
            "WARNING",
            *self.options.as_args(),
            self.user_class,
        ]
        ports = [{"name": "web", "containerPort": WEB_PORT}, {"name": "master", "containerPort": MASTER_PORT}]
        probe = {"httpGet": {"path": "/stats/requests", "port": "web"}, "periodSeconds": 2}
        pod = self._pod(MASTER, args, resources_for(0.5, 512 * 2**20, guaranteed=False), ports)
        pod["spec"]["containers"][0]["readinessProbe"] = probe
        return self._deployment(MASTER, 1, pod)

    def service(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": MASTER, "namespace": self.namespace, "labels": self.labels(MASTER)},
            "spec": {
                "selector": self.labels(MASTER),
                "ports": [
                    {"name": "web", "port": WEB_PORT, "targetPort": "web"},
                    {"name": "master", "port": MASTER_PORT, "targetPort": "master"},
                ],
            },
        }

    def worker(self) -> dict[str, Any]:
        args = [
            "-f",
            self._files(),
            "--worker",
            "--master-host",
            MASTER,
            "--master-port",
            str(MASTER_PORT),
            "--loglevel",
            "WARNING",
            *self.options.as_args(),
            self.user_class,
        ]
        return self._deployment(WORKER, self.workers, self._pod(WORKER, args, self.worker_resources, []))


def create_locust(cluster: Cluster, spec: LocustDeployment, changes: ClusterChanges) -> None:
    """Create the ConfigMap, master, Service and workers, recording each before it exists."""
    creators = [
        ("ConfigMap", spec.configmap(), cluster.core.create_namespaced_config_map),
        ("Deployment", spec.master(), cluster.apps.create_namespaced_deployment),
        ("Service", spec.service(), cluster.core.create_namespaced_service),
        ("Deployment", spec.worker(), cluster.apps.create_namespaced_deployment),
    ]
    for kind, body, create in creators:
        record = {"kind": kind, "namespace": spec.namespace, "name": body["metadata"]["name"]}
        if record not in changes.created:
            changes.created.append(record)
            changes.save()
        call(f"create {kind} {spec.namespace}/{record['name']}", create, spec.namespace, body)
