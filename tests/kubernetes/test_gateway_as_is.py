"""Real Gateways taken as they are (issue 31, items 4-6), against a real API server: what stops the run's HTTPRoute
from attaching, a class not Accepted or on CRDs it does not support, a ContourDeployment another class names, a
statically installed Contour, TLS listeners on a Gateway without the scenario's consent and autoscalers on Envoy
are each refused by the CLI in one line naming the fix, before the cluster changes (compared object by object);
the load goes to the port of the listener that takes the route."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from runner.platforms.kubernetes import provisioned
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.preflight import PLANNED_RUN
from runner.platforms.kubernetes.shapes import fleet_for
from runner.platforms.kubernetes.sizing_copy import fleet_name
from runner.platforms.local.processes import free_port
from runner.scenario import load_scenario
from support.gateway_api import (
    ALL,
    contour_deployment,
    gateway,
    gateway_class,
    installed,
    listener,
    provisioned_envoy,
)
from support.k8s import create, workload
from support.processes import one_line, run_sizer
from support.synthetic_prometheus import envoy_pod, synthetic_prometheus

pytestmark = pytest.mark.kubernetes
RUN = "20261127-110000-as-is"


@pytest.fixture
def backend(admin: Cluster) -> Iterator[str]:
    """The backend's namespace (another than the Gateway's), labelled team=load, with nginx in it."""
    name = f"b-{uuid.uuid4().hex[:8]}"
    admin.core.create_namespace({"metadata": {"name": name, "labels": {"team": "load"}}})
    create(admin, workload("Deployment", name, "nginx", {"nginx": {}}))
    yield name
    admin.core.delete_namespace(name)


def _scenario_data(
    kubeconfig: Path, gateway_ns: str, backend_ns: str, target: str = "live", **gateway_ref: Any
) -> dict[str, Any]:
    """A gateway-mode scenario for Gateway `gw` in `gateway_ns`, the backend in `backend_ns`; live by default (the
    listeners, a shared ContourDeployment and TLS listeners matter where the run changes the user's Gateway)."""
    return {
        "name": "as-is",
        "platform": "kubernetes",
        "envoy": {"cpu": ["250m"]},
        "backend": {"workload": {"namespace": backend_ns, "name": "nginx", "container": "nginx"}},
        "kubernetes": {
            "kubeconfig": str(kubeconfig),
            "namespace": backend_ns,
            "rollout_timeout_seconds": 5,
            "target": target,
            "gateway": {"kind": "gateway", "namespace": gateway_ns, "name": "gw", **gateway_ref},
        },
        # nothing answers there: a run that got past the checks would fail at Prometheus, not before
        "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "retry_seconds": 2},
    }


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cluster_state(admin: Cluster, *namespaces: str) -> dict[str, Any]:
    """Every object a run could change or create, by kind, namespace and name, with its resourceVersion."""
    custom = admin.custom
    state: dict[str, Any] = {
        "gatewayclasses": {
            c["metadata"]["name"]: c["metadata"]["resourceVersion"]
            for c in custom.list_cluster_custom_object("gateway.networking.k8s.io", "v1", "gatewayclasses")["items"]
        }
    }
    for ns in namespaces:
        for group, version, plural in (
            ("gateway.networking.k8s.io", "v1", "gateways"),
            ("gateway.networking.k8s.io", "v1", "httproutes"),
            (*provisioned.PARAMETERS[:2], "contourdeployments"),
        ):
            items = custom.list_namespaced_custom_object(group, version, ns, plural)["items"]
            state[f"{ns}/{plural}"] = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items}
        lists = {
            "deployments": admin.apps.list_namespaced_deployment(ns).items,
            "services": admin.core.list_namespaced_service(ns).items,
            "configmaps": admin.core.list_namespaced_config_map(ns).items,
            "leases": client.CoordinationV1Api(admin.api).list_namespaced_lease(ns).items,
        }
        for kind, items in lists.items():
            state[f"{ns}/{kind}"] = {i.metadata.name: i.metadata.resource_version for i in items}
    return state


def _refused(admin: Cluster, tmp_path: Path, data: dict[str, Any], *fragments: str, dry_run: bool = False) -> str:
    """The CLI's sweep of `data` (with --live for a live target; `dry_run`: --dry-run) refused in one line holding
    `fragments`, the cluster exactly as before and no run directory made."""
    gateway_ns = (data["kubernetes"].get("gateway") or data["envoy"]["workload"])["namespace"]
    namespaces = {gateway_ns, data["backend"]["workload"]["namespace"]}
    before = _cluster_state(admin, *sorted(namespaces))
    flags = [*(["--live"] if data["kubernetes"].get("target") == "live" else []), *(["--dry-run"] if dry_run else [])]
    result = run_sizer("sweep", *flags, "--scenario", str(_write(tmp_path, data)), "--results", str(tmp_path / "r"))
    line = one_line(result, *fragments)
    assert _cluster_state(admin, *sorted(namespaces)) == before
    assert not (tmp_path / "r").exists()
    return line


# -- item 4: the listeners, the class, the Gateway API's version ------------------------------------------------


def test_a_listener_that_allows_routes_from_its_own_namespace_only_is_refused_with_the_fix(
    apiserver, admin, namespace, backend, tmp_path
):
    installed(admin, namespace, [listener()])  # allowedRoutes unset: the Gateway API's default, Same
    line = _refused(
        admin,
        tmp_path,
        _scenario_data(apiserver.kubeconfig, namespace, backend),
        f"Gateway {namespace}/gw takes no HTTPRoute of the run's (namespace {backend}",
        f"from its own namespace {namespace} only",
        "allowedRoutes.namespaces.from: All",
    )
    assert "listener http (port 80)" in line


def test_each_listener_that_cannot_take_the_route_says_why(apiserver, admin, namespace, backend, tmp_path):
    installed(
        admin,
        namespace,
        [
            listener("https", 443, "HTTPS", allowedRoutes=ALL, tls={"certificateRefs": [{"name": "cert"}]}),
            listener(
                "selected",
                8080,
                allowedRoutes={"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "web"}}}},
            ),
            listener("named", 8081, allowedRoutes=ALL, hostname="*.shop.example"),
            listener("grpc-only", 8082, allowedRoutes={**ALL, "kinds": [{"kind": "GRPCRoute"}]}),
        ],
    )
    line = _refused(
        admin,
        tmp_path,
        _scenario_data(apiserver.kubeconfig, namespace, backend),
        "listener https (port 443): protocol HTTPS, not HTTP",
        f"listener selected (port 8080): allowedRoutes.namespaces.from: Selector does not select namespace {backend}",
        "listener named (port 8081): hostname *.shop.example does not take the load's Host header external.nginx",
        "listener grpc-only (port 8082): allowedRoutes.kinds (GRPCRoute) does not name HTTPRoute",
    )
    assert "or a Selector that matches namespace" in line  # the fix for the first HTTP listener


def test_a_listener_hostname_that_does_not_take_the_host_header_names_one_that_would(
    apiserver, admin, namespace, backend, tmp_path
):
    installed(admin, namespace, [listener(allowedRoutes=ALL, hostname="*.shop.example")])
    _refused(
        admin,
        tmp_path,
        _scenario_data(apiserver.kubeconfig, namespace, backend),
        "set load.host_header to a name listener http takes (e.g. gateway-sizer.shop.example)",
    )


@pytest.mark.parametrize(
    ("listeners_", "url_port"),
    [
        ([listener("web", 8080, allowedRoutes=ALL)], ":8080"),
        ([listener("web", 8080, allowedRoutes=ALL), listener("http", 80, allowedRoutes=ALL)], ""),  # 80 preferred
        (
            [
                listener("http", 80),
                listener(
                    "selected",
                    8081,
                    allowedRoutes={
                        "namespaces": {
                            "from": "Selector",
                            "selector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["load"]}]},
                        }
                    },
                ),
            ],
            ":8081",
        ),
    ],
)
def test_the_load_goes_to_the_port_of_the_listener_that_takes_the_route(
    apiserver, admin, namespace, backend, tmp_path, listeners_, url_port
):
    installed(admin, namespace, listeners_)
    scenario = load_scenario(str(_write(tmp_path, _scenario_data(apiserver.kubeconfig, namespace, backend))))
    fleet = fleet_for(scenario, RUN, ClusterChanges(tmp_path / "changes.json"), live=True)
    fleet.find(admin)
    assert fleet.gateway_url == f"http://envoy-gw.{namespace}.svc.cluster.local{url_port}"  # where Locust loads


@pytest.mark.parametrize(
    ("status", "fragments"),
    [
        ({"accepted": "False"}, ["is not Accepted (False, InvalidParameters: invalid ContourDeployment)"]),
        (
            {"supported": "False"},
            ["does not support the installed Gateway API CRDs", "SupportedVersion False", "Contour: v1.3.0"],
        ),
    ],
)
def test_a_class_not_accepted_or_on_crds_it_does_not_support_is_refused(
    apiserver, admin, namespace, backend, tmp_path, status, fragments
):
    installed(admin, namespace, [listener(allowedRoutes=ALL)], **status)
    _refused(admin, tmp_path, _scenario_data(apiserver.kubeconfig, namespace, backend), *fragments)


def test_a_statically_installed_contour_is_pointed_at_the_classic_mode(apiserver, admin, namespace, backend, tmp_path):
    gateway_class(admin, f"static-{namespace}", None)  # no ContourDeployment, and no Envoy the provisioner made
    gateway(admin, namespace, "gw", f"static-{namespace}", [listener(allowedRoutes=ALL)])
    _refused(
        admin,
        tmp_path,
        _scenario_data(apiserver.kubeconfig, namespace, backend),
        "a statically installed Contour serves it",
        "kubernetes.gateway.kind: httpproxy",
    )


def test_a_gateway_whose_infrastructure_parameters_contour_ignores_is_warned(
    apiserver, admin, namespace, backend, tmp_path, capsys
):
    class_name = f"class-{namespace}"
    gateway_class(admin, class_name, contour_deployment(admin, namespace, "params"))
    gateway(
        admin,
        namespace,
        "gw",
        class_name,
        [listener(allowedRoutes=ALL)],
        infrastructure={
            "parametersRef": {"group": "projectcontour.io", "kind": "ContourDeployment", "name": "per-gateway"}
        },
    )
    provisioned_envoy(admin, namespace, "gw")
    scenario = load_scenario(str(_write(tmp_path, _scenario_data(apiserver.kubeconfig, namespace, backend))))
    found = provisioned.find(admin, scenario)
    assert (found.namespace, found.name) == (namespace, "params")
    assert (
        f"gateway-sizer: warning: Gateway {namespace}/gw sets spec.infrastructure.parametersRef (ContourDeployment "
        f"per-gateway), which Contour ignores: the run sizes its class's ContourDeployment {namespace}/params, as "
        "Contour does"
    ) in capsys.readouterr().err


# -- item 5: the blast radius ---------------------------------------------------------------------------------


def test_a_contourdeployment_another_gatewayclass_names_is_refused(apiserver, admin, namespace, backend, tmp_path):
    installed(admin, namespace, [listener(allowedRoutes=ALL)])
    ref = {"group": "projectcontour.io", "kind": "ContourDeployment", "namespace": namespace, "name": "params"}
    gateway_class(admin, f"twin-{namespace}", ref)  # no Gateway of it yet: Contour would still size its next one
    _refused(
        admin,
        tmp_path,
        _scenario_data(apiserver.kubeconfig, namespace, backend),
        f"ContourDeployment {namespace}/params of GatewayClass class-{namespace} is also named by GatewayClass(es) "
        f"twin-{namespace}",
        "a GatewayClass and ContourDeployment of its own",
    )


def test_tls_profiles_on_a_gateway_need_the_scenarios_consent(apiserver, admin, namespace, backend, tmp_path):
    installed(admin, namespace, [listener(allowedRoutes=ALL)])
    data = {**_scenario_data(apiserver.kubeconfig, namespace, backend), "profiles": ["plain", "tls"]}
    _refused(
        admin,
        tmp_path,
        data,
        "profiles tls: a TLS profile adds an HTTPS listener on port 443",
        "kubernetes.gateway.add_tls_listeners: true",
    )
    data["kubernetes"]["gateway"]["add_tls_listeners"] = True
    assert load_scenario(str(_write(tmp_path, data))).kubernetes.gateway.add_tls_listeners
    # a sizing fleet's TLS listeners go on the run's own Gateway, behind a ClusterIP Service: no consent needed
    sizing = {**_scenario_data(apiserver.kubeconfig, namespace, backend, target="sizing"), "profiles": ["tls"]}
    assert not load_scenario(str(_write(tmp_path, sizing))).kubernetes.gateway.add_tls_listeners


# -- item 6: autoscalers ----------------------------------------------------------------------------------------

KEDA_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "scaledobjects.keda.sh"},
    "spec": {
        "group": "keda.sh",
        "scope": "Namespaced",
        "names": {"plural": "scaledobjects", "singular": "scaledobject", "kind": "ScaledObject"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def _hpa(admin: Cluster, namespace: str, name: str, kind: str, target: str, owner: dict | None = None) -> None:
    metadata: dict[str, Any] = {"name": name, **({"ownerReferences": [owner]} if owner else {})}
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": kind, "name": target},
            "minReplicas": 1,
            "maxReplicas": 5,
        },
    }
    client.AutoscalingV2Api(admin.api).create_namespaced_horizontal_pod_autoscaler(namespace, body)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[str]:
    """A real Prometheus that answers (the preflight asks it before the autoscalers); no Envoy pod exists here."""
    folder = tmp_path / "prometheus"
    folder.mkdir()
    with synthetic_prometheus(folder, envoy_pod("elsewhere", "unrelated", rps=0.0, cores=0.0)) as url:
        yield url


def _classic(apiserver, admin: Cluster, namespace: str, backend: str, prometheus: str) -> dict[str, Any]:
    """A live classic scenario for Deployment `envoy` in `namespace`, with `prometheus`."""
    create(admin, workload("Deployment", namespace, "envoy", {"envoy": {}}))
    data = _scenario_data(apiserver.kubeconfig, namespace, backend)
    data["kubernetes"].pop("gateway")
    data["prometheus"] = {"url": prometheus, "retry_seconds": 5}
    data["envoy"]["workload"] = {"kind": "Deployment", "namespace": namespace, "name": "envoy", "container": "envoy"}
    return data


@pytest.mark.parametrize("dry_run", [True, False])
def test_an_hpa_that_scales_envoy_is_refused_with_the_fix(
    apiserver, admin, namespace, backend, tmp_path, prometheus, dry_run
):
    data = _classic(apiserver, admin, namespace, backend, prometheus)
    _hpa(admin, namespace, "other", "Deployment", "nginx")  # not Envoy's: no matter
    _hpa(admin, namespace, "envoy", "Deployment", "envoy")
    _refused(
        admin,
        tmp_path,
        data,
        f"HorizontalPodAutoscaler {namespace}/envoy scales Deployment {namespace}/envoy",
        f"kubectl -n {namespace} delete hpa envoy",
        "or size a sizing fleet (kubernetes.target: sizing, the default)",
        dry_run=dry_run,
    )


def test_an_hpa_on_a_provisioned_envoy_is_refused(apiserver, admin, namespace, backend, tmp_path, prometheus):
    installed(admin, namespace, [listener(allowedRoutes=ALL)])
    _hpa(admin, namespace, "envoy-gw", "Deployment", "envoy-gw")
    data = _scenario_data(apiserver.kubeconfig, namespace, backend)
    data["prometheus"] = {"url": prometheus, "retry_seconds": 5}
    _refused(
        admin, tmp_path, data, f"HorizontalPodAutoscaler {namespace}/envoy-gw scales Deployment {namespace}/envoy-gw"
    )


def test_an_autoscaler_that_would_scale_the_sizing_fleet_is_refused(
    apiserver, admin, namespace, backend, tmp_path, prometheus
):
    data = _classic(apiserver, admin, namespace, backend, prometheus)
    data["kubernetes"]["target"] = "sizing"
    data["kubernetes"]["sizing"] = {"node_selector": {"kubernetes.io/hostname": "node-a"}}  # no pod to copy one from
    service = {"metadata": {"name": "envoy"}, "spec": {"selector": {"app": "envoy"}, "ports": [{"port": 80}]}}
    admin.core.create_namespaced_service(namespace, service)  # production's, whose ports the fleet's copies
    data["kubernetes"]["gateway_url"] = f"http://envoy.{namespace}.svc.cluster.local"
    planned = fleet_name(PLANNED_RUN)  # the fleet a dry run plans; a real run's is named for its own id
    _hpa(admin, namespace, "envoy", "Deployment", "envoy")  # production's: the sizing fleet is not its target
    _hpa(admin, namespace, "stale", "Deployment", planned)
    _refused(
        admin,
        tmp_path,
        data,
        f"HorizontalPodAutoscaler {namespace}/stale scales Deployment {namespace}/{planned}",
        "it scales the run's own sizing fleet",
        dry_run=True,
    )


@pytest.fixture
def keda(admin: Cluster) -> None:
    """KEDA's ScaledObject CRD served (left for the session: other tests read no keda.sh)."""
    from kubernetes import utils

    from support.wait import until

    extensions = client.ApiextensionsV1Api(admin.api)
    if not any(c.metadata.name == "scaledobjects.keda.sh" for c in extensions.list_custom_resource_definition().items):
        utils.create_from_dict(admin.api, KEDA_CRD)

    def served() -> bool:
        groups = client.ApisApi(admin.api).get_api_versions().groups
        return any(g.name == "keda.sh" and any(v.version == "v1alpha1" for v in g.versions) for g in groups)

    until(served, 30, "KEDA's CRD served", poll_s=0.1)


def _scaled_object(admin: Cluster, namespace: str, name: str, target: str, annotations: dict | None = None) -> dict:
    body = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"scaleTargetRef": {"name": target}, "triggers": []},
    }
    return dict(admin.custom.create_namespaced_custom_object("keda.sh", "v1alpha1", namespace, "scaledobjects", body))


def test_a_keda_scaledobject_is_refused_until_paused(apiserver, admin, namespace, backend, tmp_path, keda, prometheus):
    data = _classic(apiserver, admin, namespace, backend, prometheus)
    made = _scaled_object(admin, namespace, "envoy", "envoy")
    owner = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "name": "envoy", "uid": made["metadata"]["uid"]}
    _hpa(admin, namespace, "keda-hpa-envoy", "Deployment", "envoy", owner)  # KEDA's own: judged as its ScaledObject
    line = _refused(
        admin,
        tmp_path,
        data,
        f"KEDA ScaledObject {namespace}/envoy scales Deployment {namespace}/envoy",
        "autoscaling.keda.sh/paused=true",
        dry_run=True,
    )
    assert "keda-hpa-envoy" not in line
    paused = {"metadata": {"annotations": {"autoscaling.keda.sh/paused": "true"}}}
    admin.custom.patch_namespaced_custom_object("keda.sh", "v1alpha1", namespace, "scaledobjects", "envoy", paused)
    fine = run_sizer("sweep", "--live", "--dry-run", "--scenario", str(_write(tmp_path, data)))
    assert fine.returncode == 0, fine.stderr
    assert "preflight: nothing was changed (--dry-run)" in fine.stdout
