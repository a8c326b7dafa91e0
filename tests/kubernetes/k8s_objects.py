"""Kubernetes objects and credentials the API-server tests build."""

from __future__ import annotations

from pathlib import Path

import yaml
from apiserver import ApiServer
from kubernetes import client, utils

from runner.platforms.kubernetes.connection import Cluster


def workload(
    kind: str,
    namespace: str,
    name: str,
    containers: dict[str, dict],
    replicas: int = 1,
    args: dict[str, list[str]] | None = None,
    init_containers: dict[str, dict] | None = None,
) -> dict:
    """A minimal DaemonSet or Deployment manifest with these (init) containers, their resources and args."""
    labels = {"app": name}
    specs = [{"name": c, "image": "example/none:1", "resources": r} for c, r in containers.items()]
    for container in specs:
        if args and container["name"] in args:
            container["args"] = args[container["name"]]
    pod: dict = {"containers": specs}
    if init_containers:
        pod["initContainers"] = [
            {"name": c, "image": "example/none:1", "resources": r} for c, r in init_containers.items()
        ]
    spec = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }
    if kind == "Deployment":
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def create(cluster: Cluster, manifest: dict) -> None:
    utils.create_from_dict(cluster.api, manifest)


def kubeconfig_for_token(apiserver: ApiServer, token: str, path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "sa",
                "clusters": [
                    {"name": "test", "cluster": {"server": apiserver.url, "certificate-authority": str(apiserver.ca)}}
                ],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "test", "user": "sa"}}],
            }
        )
    )
    return path


def service_account_token(cluster: Cluster, namespace: str, name: str) -> str:
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))
    return cluster.core.create_namespaced_service_account_token(name, namespace, request).status.token
