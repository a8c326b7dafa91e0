"""What the nodes tell about Envoy's CPUs: each node's CPU model (from Node Feature Discovery's labels,
when installed) and the kubelet's CPU manager policy (from its /configz, through the API server's node
proxy). With the `static` policy, a Guaranteed pod with a whole-core CPU limit gets exclusive CPUs;
otherwise Envoy shares the node's CPUs under its CFS quota, like the local platform without isolation."""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from runner.platforms.kubernetes.connection import REQUEST_TIMEOUT_S, Cluster

NFD_PREFIX = "feature.node.kubernetes.io/cpu-model."


def cpu_model(labels: dict[str, str] | None) -> str | None:
    """'AuthenticAMD family 25 model 1' from NFD's cpu-model labels; None without them."""
    labels = labels or {}
    parts = [labels.get(NFD_PREFIX + key) for key in ("vendor_id", "family", "id")]
    if not parts[0]:
        return None
    return f"{parts[0]} family {parts[1] or '?'} model {parts[2] or '?'}"


def cpu_manager_policy(cluster: Cluster, node: str) -> str:
    """The kubelet's cpuManagerPolicy ('none' when unset), or 'unknown (<why>)' when it cannot be read."""
    try:
        raw = cluster.core.connect_get_node_proxy_with_path(node, "configz", _request_timeout=REQUEST_TIMEOUT_S)
        config = json.loads(raw if isinstance(raw, str) else str(raw)).get("kubeletconfig", {})
    except ApiException as error:
        return f"unknown (the kubelet's /configz answered HTTP {error.status}; nodes/proxy access is needed)"
    except (ValueError, AttributeError, OSError, urllib3.exceptions.HTTPError) as error:
        return f"unknown ({type(error).__name__} reading the kubelet's /configz)"
    return str(config.get("cpuManagerPolicy") or "none")


def isolation(policies: dict[str, str]) -> dict[str, Any]:
    """The environment's isolation record for a cluster: the policy (one, or per node) and what it means."""
    distinct = sorted(set(policies.values()))
    policy = distinct[0] if len(distinct) == 1 else ", ".join(f"{n}: {p}" for n, p in sorted(policies.items()))
    if distinct == ["static"]:
        note = "static CPU manager: Envoy gets exclusive CPUs at whole-core limits (Guaranteed QoS), shares them below"
    elif all(p == "none" for p in distinct):
        note = "CPU manager policy none: Envoy shares the node's CPUs under its CFS quota (not pinned)"
    else:
        note = "Envoy's pinning depends on the node (see the policy)"
    return {"cpu_manager_policy": policy, "note": note}
