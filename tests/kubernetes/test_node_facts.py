"""Node facts against a real kube-apiserver that has no kubelet behind its Node: the CPU manager policy
is recorded as unknown with the reason, never guessed, and NFD labels give the CPU model."""

from __future__ import annotations

import pytest

from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.nodes import NFD_PREFIX, cpu_manager_policy, cpu_model

pytestmark = pytest.mark.kubernetes


def test_a_node_without_a_reachable_kubelet_has_an_unknown_policy_and_its_labelled_model(admin: Cluster):
    labels = {NFD_PREFIX + "vendor_id": "AuthenticAMD", NFD_PREFIX + "family": "25", NFD_PREFIX + "id": "17"}
    node = {
        "metadata": {"name": "facts-node", "labels": labels},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 1}},
        },
    }
    admin.core.create_node(node)
    try:
        read = admin.core.read_node("facts-node")
        assert cpu_model(read.metadata.labels) == "AuthenticAMD family 25 model 17"
        policy = cpu_manager_policy(admin, "facts-node")
        assert policy.startswith("unknown (") and "configz" in policy, policy
    finally:
        admin.core.delete_node("facts-node")
