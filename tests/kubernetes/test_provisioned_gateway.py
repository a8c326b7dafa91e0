"""A Gateway that Contour's gateway provisioner owns, as real API objects (the Gateway API's and Contour's CRDs):
the run finds the ContourDeployment that sizes its Envoy, refuses a Gateway it cannot size safely in one line,
records the ContourDeployment before changing it, and undo puts it back and takes its annotations off the
Gateway. No provisioner runs here (the rollout it makes is tested on the one-machine cluster,
tests/cluster/test_gateway_api.py), so these tests change the ContourDeployment and stop before waiting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.errors import ScenarioError, UsageError
from runner.platforms.kubernetes import gateway_object, httproute, provisioned
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.gateway_object import APPLIED
from runner.platforms.kubernetes.originals import ClusterChanges, undo
from runner.platforms.kubernetes.provisioned import OWNER_LABEL, PARAMETERS
from runner.platforms.kubernetes.workloads import CHANGED_BY
from runner.scenario import Scenario, parse_scenario
from support.gateway_api import accepted_conditions, class_status
from support.k8s import create, workload

pytestmark = pytest.mark.kubernetes
RUN = "20261126-100000-gateway"
CONTOUR = "projectcontour.io/gateway-controller"
ENVOY_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}


def _scenario(namespace: str, name: str = "gw") -> Scenario:
    return parse_scenario(
        {
            "name": "provisioned",
            "platform": "kubernetes",
            "envoy": {"cpu": ["250m"]},
            "kubernetes": {"gateway": {"kind": "gateway", "namespace": namespace, "name": name}},
        }
    )


def _gateway_class(admin: Cluster, name: str, controller: str = CONTOUR, parameters: dict | None = None) -> None:
    """A GatewayClass its controller has Accepted (as the provisioner would write its status)."""
    spec: dict = {"controllerName": controller}
    if parameters is not None:
        spec["parametersRef"] = parameters
    admin.custom.create_cluster_custom_object("gateway.networking.k8s.io", "v1", "gatewayclasses",
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": name},
         "spec": spec})  # fmt: skip
    class_status(admin, name, accepted_conditions())


def _gateway(admin: Cluster, namespace: str, name: str, class_name: str) -> None:
    listener = {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}
    admin.custom.create_namespaced_custom_object("gateway.networking.k8s.io", "v1", namespace, "gateways",
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": name},
         "spec": {"gatewayClassName": class_name, "listeners": [listener]}})  # fmt: skip


def _contour_deployment(admin: Cluster, namespace: str, name: str, envoy: dict | None = None) -> dict:
    group, version, plural = PARAMETERS
    body = {"apiVersion": f"{group}/{version}", "kind": "ContourDeployment", "metadata": {"name": name},
            "spec": {"envoy": envoy} if envoy is not None else {}}  # fmt: skip
    admin.custom.create_namespaced_custom_object(group, version, namespace, plural, body)
    return {"group": group, "kind": "ContourDeployment", "namespace": namespace, "name": name}


def _provisioned_envoy(admin: Cluster, namespace: str, gateway: str, *, owned: bool = True) -> None:
    manifest = workload("Deployment", namespace, f"envoy-{gateway}", {"envoy": {}})
    if owned:
        manifest["metadata"]["labels"] = {OWNER_LABEL: gateway}
    create(admin, manifest)


def _installed(admin: Cluster, namespace: str, *, envoy: dict | None = None) -> str:
    """A Contour GatewayClass of its own (named after the namespace) with a ContourDeployment, one Gateway `gw`
    of it, and the Envoy Deployment the provisioner would have made; returns the class's name."""
    class_name = f"class-{namespace}"
    _gateway_class(admin, class_name, parameters=_contour_deployment(admin, namespace, "params", envoy))
    _gateway(admin, namespace, "gw", class_name)
    _provisioned_envoy(admin, namespace, "gw")
    return class_name


def _refusal(admin: Cluster, scenario: Scenario) -> str:
    with pytest.raises(UsageError) as refused:
        provisioned.find(admin, scenario)
    return refused.value.one_line()


def test_finds_the_contourdeployment_of_a_gateway_of_its_own_class(admin, namespace):
    _installed(admin, namespace, envoy={"resources": ENVOY_RESOURCES})
    found = provisioned.find(admin, _scenario(namespace))
    assert (found.namespace, found.name) == (namespace, "params")
    assert (found.gateway_namespace, found.gateway_name) == (namespace, "gw")
    assert (found.envoy.kind, found.envoy.name, found.envoy.container) == ("Deployment", "envoy-gw", "envoy")
    assert provisioned.same_resources(found.envoy_resources, ENVOY_RESOURCES)


def test_refuses_a_gateway_it_cannot_size_safely_each_in_one_line(admin, namespace):
    lines = [_refusal(admin, _scenario(namespace, "missing"))]
    assert "no Gateway" in lines[-1]
    _gateway_class(admin, f"other-{namespace}", controller="example.com/another-controller")
    _gateway(admin, namespace, "foreign", f"other-{namespace}")
    lines.append(_refusal(admin, _scenario(namespace, "foreign")))
    assert "example.com/another-controller" in lines[-1] and "not Contour's gateway provisioner" in lines[-1]

    _gateway_class(admin, f"bare-{namespace}", parameters=None)
    _gateway(admin, namespace, "bare", f"bare-{namespace}")
    lines.append(_refusal(admin, _scenario(namespace, "bare")))
    assert "names no ContourDeployment" in lines[-1]

    class_name = f"class-{namespace}"
    _gateway_class(admin, class_name, parameters=_contour_deployment(admin, namespace, "params"))
    _gateway(admin, namespace, "gw", class_name)
    _gateway(admin, namespace, "neighbour", class_name)  # the class's ContourDeployment sizes both
    lines.append(_refusal(admin, _scenario(namespace)))
    assert f"{namespace}/neighbour" in lines[-1] and "of its own" in lines[-1]

    admin.custom.delete_namespaced_custom_object("gateway.networking.k8s.io", "v1", namespace, "gateways", "neighbour")
    lines.append(_refusal(admin, _scenario(namespace)))
    assert "has made no Envoy" in lines[-1]
    _provisioned_envoy(admin, namespace, "gw", owned=False)  # an envoy-gw of someone else's
    lines.append(_refusal(admin, _scenario(namespace)))
    assert "is not the provisioner's Envoy" in lines[-1]
    assert all("\n" not in line and "Traceback" not in line for line in lines), lines


def _read_parameters(admin: Cluster, namespace: str) -> dict:
    group, version, plural = PARAMETERS
    found: Any = admin.custom.get_namespaced_custom_object(group, version, namespace, plural, "params")
    return dict(found)


def _read_gateway(admin: Cluster, namespace: str) -> dict:
    gateway: Any = admin.custom.get_namespaced_custom_object("gateway.networking.k8s.io", "v1", namespace,
                                                             "gateways", "gw")  # fmt: skip
    return dict(gateway)


def _annotations(admin: Cluster, namespace: str) -> dict:
    return _read_gateway(admin, namespace)["metadata"].get("annotations") or {}


@pytest.mark.parametrize("before", [None, {"resources": ENVOY_RESOURCES, "workloadType": "Deployment"}])
def test_undo_puts_the_contourdeployment_back_and_unmarks_the_gateway(admin, namespace, tmp_path: Path, before):
    _installed(admin, namespace, envoy=before)
    spec_before = _read_parameters(admin, namespace).get("spec")
    run_dir = tmp_path / RUN
    run_dir.mkdir()
    changes = ClusterChanges.open(run_dir / "kubernetes-originals.json")
    parameters = changes.remember_parameters(provisioned.find(admin, _scenario(namespace)))
    parameters.marked = parameters.changed = True
    changes.save()
    gateway_object.mark_changed(admin, parameters, RUN)
    sized = {"limits": {"cpu": "250m", "memory": "256Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}}
    provisioned.set_envoy_resources(admin, parameters, sized)
    admin.custom.patch_namespaced_custom_object("gateway.networking.k8s.io", "v1", namespace, "gateways", "gw",
                                                {"metadata": {"annotations": {APPLIED: "x"}}})  # fmt: skip
    assert provisioned.same_resources(_read_parameters(admin, namespace)["spec"]["envoy"]["resources"], sized)
    assert _annotations(admin, namespace)[CHANGED_BY] == RUN

    https = {"protocol": "HTTPS", "port": 443, "tls": {"certificateRefs": [{"kind": "Secret", "name": "s"}]}}
    listeners = [{"name": "gateway-sizer-rsa-2048", "hostname": "tls.example", **https},
                 {"name": "gateway-sizer-ecdsa-p256", "hostname": "tls-ecdsa.example", **https}]  # fmt: skip
    gateway_object.add_listeners(admin, parameters, listeners, changes.save)
    gateway_object.add_listeners(admin, parameters, listeners, changes.save)  # a resumed run's: added once
    assert [listener["name"] for listener in _read_gateway(admin, namespace)["spec"]["listeners"]] == [
        "http", "gateway-sizer-rsa-2048", "gateway-sizer-ecdsa-p256"]  # fmt: skip

    # another run refuses the gateway while this run's changes are on it
    with pytest.raises(UsageError, match=f"changes of run {RUN}"):
        gateway_object.mark_changed(admin, parameters, "20261126-110000-other")

    loaded = ClusterChanges.load(run_dir)  # as `gateway-sizer restore` reads it
    assert loaded.pending and loaded.parameters[0].envoy_resources == parameters.envoy_resources
    done = undo(admin, loaded, 5, wait=False)
    assert any("restored spec.envoy.resources" in line for line in done), done
    assert _read_parameters(admin, namespace).get("spec") == spec_before  # no spec.envoy left where there was none
    annotations = _annotations(admin, namespace)
    assert CHANGED_BY not in annotations and APPLIED not in annotations
    assert [listener["name"] for listener in _read_gateway(admin, namespace)["spec"]["listeners"]] == ["http"]
    assert any("removed listener(s) gateway-sizer-rsa-2048, gateway-sizer-ecdsa-p256" in line for line in done), done
    assert not ClusterChanges.load(run_dir).pending


def test_same_resources_compares_quantities_not_spellings():
    assert provisioned.same_resources({"limits": {"cpu": "0.25", "memory": "268435456"}},
                                      {"limits": {"cpu": "250m", "memory": "256Mi"}})  # fmt: skip
    assert not provisioned.same_resources({"limits": {"cpu": "250m"}}, {"limits": {"cpu": "500m"}})
    assert not provisioned.same_resources(
        {"limits": {"cpu": "250m"}}, {"limits": {"cpu": "250m"}, "requests": {"cpu": "250m"}}
    )
    assert provisioned.same_resources(None, {})


def test_route_problem_reads_the_gateways_conditions():
    assert httproute.route_problem({}) == "no status from Contour yet"
    unresolved = {"type": "ResolvedRefs", "status": "False", "message": "service nginx not found"}
    parent = {"conditions": [{"type": "Accepted", "status": "True"}, unresolved]}
    assert httproute.route_problem({"status": {"parents": [parent]}}) == (
        "ResolvedRefs is not True: service nginx not found"
    )
    parent["conditions"][1]["status"] = "True"
    assert httproute.route_problem({"status": {"parents": [parent]}}) is None


def test_the_scenario_names_what_the_provisioner_made_and_refuses_what_it_cannot_set():
    scenario = _scenario("projectcontour", "edge")
    assert scenario.envoy.workload.name == "envoy-edge" and scenario.contour.workload.name == "contour-edge"
    assert scenario.kubernetes.gateway_url == "http://envoy-edge.projectcontour.svc.cluster.local"
    assert scenario.envoy.concurrency_for(0.25) == 0  # Envoy's own default: its args are the provisioner's
    assert parse_scenario(scenario.dump()) == scenario  # a run directory's scenario loads back (restore, resume)
    base = {"name": "g", "platform": "kubernetes", "kubernetes": {"gateway": {"kind": "gateway", "name": "edge"}}}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"envoy": {"cpu": ["250m"], "concurrency": 2}}, "envoy.concurrency"),
        ({"envoy": {"cpu": ["250m"], "workload": {"namespace": "a", "name": "b", "container": "c"}}}, "envoy.workload"),
        ({"envoy": {"cpu": ["250m"]}, "contour": {"resources": [{"cpu": 1, "memory": "1Gi"}]}}, "contour.resources"),
    ]
    for extra, words in cases:
        with pytest.raises(ScenarioError, match=words):
            parse_scenario({**base, **extra})
    with pytest.raises(ScenarioError, match=r"envoy\.concurrency: 'production' cannot be set"):
        parse_scenario({**base, "envoy": {"cpu": ["250m"], "concurrency": "production"}})
    classic = parse_scenario(
        {"name": "g", "platform": "kubernetes", "envoy": {"cpu": ["250m"], "concurrency": "default"}}
    )
    assert classic.envoy.concurrency == ("default",)  # Envoy's own default: a classic install's args are the run's


def test_undo_after_the_gateway_was_deleted_still_puts_the_contourdeployment_back(admin, namespace, tmp_path: Path):
    _installed(admin, namespace, envoy={"resources": ENVOY_RESOURCES})
    changes = ClusterChanges.open(tmp_path / RUN / "kubernetes-originals.json")
    (tmp_path / RUN).mkdir()
    parameters = changes.remember_parameters(provisioned.find(admin, _scenario(namespace)))
    parameters.marked = parameters.changed = True
    changes.save()
    gateway_object.mark_changed(admin, parameters, RUN)
    provisioned.set_envoy_resources(admin, parameters, {"limits": {"cpu": "250m"}, "requests": {"cpu": "250m"}})
    https = {"protocol": "HTTPS", "port": 443, "tls": {"certificateRefs": [{"kind": "Secret", "name": "s"}]}}
    gateway_object.add_listeners(admin, parameters, [{"name": "gateway-sizer-rsa-2048", **https}], changes.save)
    admin.custom.delete_namespaced_custom_object("gateway.networking.k8s.io", "v1", namespace, "gateways", "gw")

    done = undo(admin, ClusterChanges.load(tmp_path / RUN), 5, wait=False)  # no exception: each step goes on
    assert any("no longer exists" in line for line in done), done
    envoy = _read_parameters(admin, namespace)["spec"]["envoy"]
    assert provisioned.same_resources(envoy["resources"], ENVOY_RESOURCES)  # the class's next Gateway: as before
    assert not ClusterChanges.load(tmp_path / RUN).pending
