"""The project's RBAC as a kustomization renders it (k8s/manifests/rbac and its install modes), and the same
grants given to another ServiceAccount, so that each install mode's account can be asked of a real API server."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from kubernetes import utils

from runner.paths import PROJECT_ROOT

RBAC = PROJECT_ROOT / "k8s" / "manifests" / "rbac"
CLASSIC, GATEWAY_API = RBAC, RBAC / "gateway-api"
ACCOUNT, ACCOUNT_NAMESPACE = "gateway-sizer", "gateway-loadtest"
RENAMED = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ReferenceGrant")


def rendered(kustomization: Path) -> list[dict[str, Any]]:
    """The objects of a kustomization that only lists resources (files and folders), as `kubectl apply -k` makes
    them: folders followed, each object once."""
    spec = yaml.safe_load((kustomization / "kustomization.yaml").read_text())
    assert set(spec) <= {"apiVersion", "kind", "resources"}, f"{kustomization}: more than resources to render"
    objects: list[dict[str, Any]] = []
    for entry in spec["resources"]:
        path = (kustomization / entry).resolve()
        found = rendered(path) if path.is_dir() else [d for d in yaml.safe_load_all(path.read_text()) if d]
        objects += [o for o in found if o not in objects]
    return objects


def granted_to(objects: list[dict[str, Any]], account: str) -> list[dict[str, Any]]:
    """The roles, bindings and grants of `objects` for ServiceAccount `account` (in gateway-loadtest) instead of
    gateway-sizer: each renamed `<name>-<account>`, so that two install modes' grants live side by side."""
    out = []
    for original in objects:
        if original["kind"] not in RENAMED:
            continue
        obj = copy.deepcopy(original)
        obj["metadata"]["name"] += f"-{account}"
        if "roleRef" in obj:
            obj["roleRef"]["name"] += f"-{account}"
        for subject in obj.get("subjects", []):
            assert (subject["name"], subject["namespace"]) == (ACCOUNT, ACCOUNT_NAMESPACE), subject
            subject["name"] = account
        out.append(obj)
    return out


def create_all(admin: Any, objects: list[dict[str, Any]]) -> None:
    """Create rendered objects with an admin connection: the built-in kinds through the client's models, the
    ReferenceGrant (a custom resource) through the custom objects API."""
    builtin = [o for o in objects if o["kind"] != "ReferenceGrant"]
    utils.create_from_yaml(admin.api, yaml_objects=builtin)
    for grant in (o for o in objects if o["kind"] == "ReferenceGrant"):
        group, version = grant["apiVersion"].split("/")
        admin.custom.create_namespaced_custom_object(group, version, grant["metadata"]["namespace"],
                                                     "referencegrants", grant)  # fmt: skip
