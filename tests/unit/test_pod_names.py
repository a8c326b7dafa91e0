"""The pods a kubernetes sweep reads Prometheus figures for: a workload's own, never a neighbour's whose name
starts with its name (the one-machine cluster runs `envoy` and `envoy-gateway-sizer` side by side)."""

from __future__ import annotations

import re

import pytest

from runner.platforms.kubernetes.workloads import pod_name_regex


@pytest.mark.parametrize(
    ("workload", "pod", "its_own"),
    [
        ("envoy", "envoy-wc4br", True),  # a DaemonSet's pod
        ("envoy", "envoy-gateway-sizer-6764f846b-6qm76", False),  # the provisioned Envoy's, beside it
        ("envoy-gateway-sizer", "envoy-gateway-sizer-6764f846b-6qm76", True),  # a Deployment's pod
        ("contour", "contour-698dfd9f54-mwwpc", True),
        ("contour", "contour-gateway-sizer-bb4d84d68-szwhv", False),
        ("contour", "contour-gateway-provisioner-7b7dfdcb65-q4w6p", False),
        ("nginx", "nginx-5bdb9c68c4-bvgfw", True),
        ("nginx", "nginx-bodies", False),
    ],
)
def test_a_workloads_pods_and_no_neighbours(workload: str, pod: str, its_own: bool) -> None:
    assert bool(re.fullmatch(pod_name_regex(workload), pod)) is its_own
