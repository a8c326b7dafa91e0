"""The pure rules behind taking a real Gateway as it is (runner.platforms.kubernetes.listeners, gateway_class,
autoscalers): how a listener's hostname and namespace selector match as the Gateway API defines them, and what
counts as an autoscaler of the workload the run sizes."""

from __future__ import annotations

import pytest

from runner.errors import ScenarioError
from runner.platforms.kubernetes.autoscalers import autoscaler_findings
from runner.platforms.kubernetes.gateway_class import crd_finding, sharing_classes
from runner.platforms.kubernetes.listeners import Attachment, attachment, hostname_takes, selector_matches
from runner.platforms.kubernetes.workloads import Workload
from runner.scenario import parse_scenario


@pytest.mark.parametrize(
    ("listener", "host", "takes"),
    [
        (None, "external.nginx", True),
        ("external.nginx", "EXTERNAL.nginx", True),
        ("*.example.com", "a.example.com", True),
        ("*.example.com", "a.b.example.com", True),
        ("*.example.com", "example.com", False),  # a wildcard takes names below it, not itself
        ("*.example.com", "badexample.com", False),
        ("shop.example.com", "example.com", False),
    ],
)
def test_a_listener_hostname_takes_names_as_the_gateway_api_says(listener, host, takes):
    assert hostname_takes(listener, host) is takes


def test_a_namespace_selector_matches_labels_and_expressions():
    labels = {"team": "load", "env": "test"}
    assert selector_matches({}, labels)
    assert selector_matches({"matchLabels": {"team": "load"}}, labels)
    assert not selector_matches({"matchLabels": {"team": "web"}}, labels)
    expressions = [
        {"key": "env", "operator": "In", "values": ["test", "dev"]},
        {"key": "prod", "operator": "DoesNotExist"},
    ]
    assert selector_matches({"matchExpressions": expressions}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["test"]}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, labels)


def test_a_gateway_in_the_routes_own_namespace_takes_it_by_default_and_port_80_is_preferred():
    gateway = {
        "metadata": {"namespace": "web", "name": "gw"},
        "spec": {
            "listeners": [
                {"name": "alt", "protocol": "HTTP", "port": 8080},
                {"name": "http", "protocol": "HTTP", "port": 80},
            ]
        },
    }
    assert attachment(gateway, "web", None, "external.nginx") == Attachment("http", 80)
    assert not isinstance(attachment(gateway, "other", None, "external.nginx"), Attachment)


def test_gateway_api_versions_and_shared_contourdeployments():
    assert crd_finding(["v1", "v1beta1"]) is None
    assert "serve v1beta1, v1alpha2, not v1 " in str(crd_finding(["v1beta1", "v1alpha2"]))
    ref = {"group": "projectcontour.io", "kind": "ContourDeployment", "namespace": "p", "name": "cd"}
    classes = [
        {"metadata": {"name": n}, "spec": {"parametersRef": r}}
        for n, r in (("own", ref), ("twin", ref), ("other", {**ref, "name": "x"}), ("bare", None))
    ]
    assert sharing_classes(classes, "own", ("p", "cd")) == ["twin"]


def test_only_autoscalers_of_the_sized_workload_count_and_a_paused_scaledobject_does_not():
    envoy = Workload("Deployment", "p", "envoy", "envoy")
    hpa = {"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "envoy"}}}
    other = {"metadata": {"name": "o"}, "spec": {"scaleTargetRef": {"kind": "DaemonSet", "name": "envoy"}}}
    scaled = {"metadata": {"name": "s"}, "spec": {"scaleTargetRef": {"name": "envoy"}}}  # kind: Deployment by default
    paused = {
        "metadata": {"name": "z", "annotations": {"autoscaling.keda.sh/paused-replicas": "1"}},
        "spec": {"scaleTargetRef": {"name": "envoy"}},
    }
    found = autoscaler_findings(envoy, [hpa, other], [scaled, paused], "or not")
    assert [f.problem.split(" scales")[0] for f in found] == ["KEDA ScaledObject p/s", "HorizontalPodAutoscaler p/h"]
    assert all(f.refuse and f.fix.endswith(", or not") for f in found)


def _gateway_scenario(**gateway: object) -> dict:
    return {
        "name": "g",
        "platform": "kubernetes",
        "envoy": {"cpu": ["250m"]},
        "profiles": ["plain", "tls-ecdsa"],
        "kubernetes": {"gateway": {"kind": "gateway", "namespace": "p", "name": "gw", **gateway}},
    }


def test_tls_profiles_on_a_live_gateway_need_add_tls_listeners():
    live = _gateway_scenario()
    live["kubernetes"]["target"] = "live"
    with pytest.raises(ScenarioError, match="add_tls_listeners: true"):
        parse_scenario(live)
    live["kubernetes"]["gateway"]["add_tls_listeners"] = True
    assert parse_scenario(live).kubernetes.gateway.add_tls_listeners
    assert not parse_scenario(_gateway_scenario()).kubernetes.gateway.add_tls_listeners  # a sizing fleet's own Gateway


def test_a_class_without_status_is_not_accepted_and_a_missing_supportedversion_is_no_matter():
    from runner.platforms.kubernetes.gateway_class import class_findings

    bare = {"metadata": {"name": "c"}}
    assert [f.problem for f in class_findings(bare)] == [
        "GatewayClass c is not Accepted (no status from its controller)"
    ]
    accepted = {**bare, "status": {"conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted"}]}}
    assert class_findings(accepted) == []
