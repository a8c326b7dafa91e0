"""The sizing fleet and the live target against a real API server: the fleet's objects cloned from production's,
recorded before they exist and deleted at the end and by `restore` after a SIGKILL, production's objects read
only; live refused without --live and on a gateway serving traffic; the dry run's preflight with a Prometheus
that lacks Envoy's request counter. No kubelet runs here: production's pods are API objects bound to a node by
hand, and Prometheus (a real one) scrapes a synthetic exporter standing in for cAdvisor and Envoy
(support/synthetic_prometheus.py). The fleet's pods never start here; tests/cluster runs them."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from runner.platforms.kubernetes import workloads as wl
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.objects import MANAGED_BY, run_hash
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.platforms.kubernetes.sizing_copy import fleet_name
from runner.scenario import load_scenario, parse_scenario
from support.gateway_api import accepted_conditions, class_status
from support.k8s import claimed_run, create, gateway, scenario_file, workload
from support.processes import one_line, run_sizer
from support.synthetic_prometheus import envoy_pod, synthetic_prometheus

pytestmark = pytest.mark.kubernetes
NODE = "node-a"
RUN = "20261128-100000-fleet"


def _production(admin: Cluster, namespace: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """The test bed of support.k8s.gateway, with Envoy's template as Contour's quickstart has it (a bootstrap init
    container, the Secret it mounts, hostPorts, a toleration, a priority class), production's Service, and one
    Envoy pod bound to NODE; returns the DaemonSet as the API serves it."""
    gateway(admin, namespace)
    template = {
        "metadata": {"labels": {"app": "envoy", **(labels or {})}},
        "spec": {
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "edge", "operator": "Exists", "effect": "NoSchedule"}],
            "initContainers": [
                {
                    "name": "envoy-initconfig",
                    "image": "example/contour:1",
                    "args": ["bootstrap", "/config/envoy.json"],
                    "volumeMounts": [{"name": "envoycert", "mountPath": "/certs"}],
                }
            ],
            "containers": [
                {"name": "shutdown-manager", "image": "example/contour:1"},
                {
                    "name": "envoy",
                    "image": "example/envoy:1",
                    "args": ["-c", "/config/envoy.json"],
                    "ports": [
                        {"containerPort": 8080, "hostPort": 80, "name": "http"},
                        {"containerPort": 8002, "name": "metrics"},
                    ],
                },
            ],
            "volumes": [{"name": "envoycert", "secret": {"secretName": "envoycert"}}],
        },
    }
    admin.apps.patch_namespaced_daemon_set("envoy", namespace, {"spec": {"template": template}})
    service = {
        "metadata": {"name": "envoy"},
        "spec": {"selector": {"app": "envoy"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }
    admin.core.create_namespaced_service(namespace, service)
    daemonset = admin.apps.read_namespaced_daemon_set("envoy", namespace)
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "envoy",
        "uid": daemonset.metadata.uid,
        "controller": True,
    }
    pod = {
        "metadata": {"name": "envoy-x7k2p", "labels": {"app": "envoy"}, "ownerReferences": [owner]},
        "spec": {"nodeName": NODE, "containers": [{"name": "envoy", "image": "example/envoy:1"}]},
    }
    admin.core.create_namespaced_pod(namespace, pod)
    return _as_served(admin, namespace)


def _as_served(admin: Cluster, namespace: str) -> dict[str, Any]:
    """Production's DaemonSet and Service as the API serves them (byte for byte, resourceVersion included)."""
    return {
        "daemonset": admin.api.sanitize_for_serialization(admin.apps.read_namespaced_daemon_set("envoy", namespace)),
        "service": admin.api.sanitize_for_serialization(admin.core.read_namespaced_service("envoy", namespace)),
        "pods": admin.api.sanitize_for_serialization(admin.core.list_namespaced_pod(namespace).items),
    }


def _scenario(tmp_path: Path, namespace: str, kubeconfig: Path, target: str = "sizing", **extra: object) -> Path:
    url = f"http://envoy.{namespace}.svc.cluster.local"
    path = scenario_file(tmp_path, namespace, kubeconfig, replicas=2, target=target, **extra)
    data = yaml.safe_load(path.read_text())
    data["kubernetes"] = {**data["kubernetes"], "gateway_url": url, **data.get("kubernetes_extra", {})}
    data.pop("kubernetes_extra", None)
    path.write_text(yaml.safe_dump(data))
    return path


def _fleet_objects(admin: Cluster, namespace: str) -> list[str]:
    selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
    deployments = admin.apps.list_namespaced_deployment(namespace, label_selector=selector).items
    services = admin.core.list_namespaced_service(namespace, label_selector=selector).items
    return [f"Deployment {d.metadata.name}" for d in deployments] + [f"Service {s.metadata.name}" for s in services]


def test_the_fleet_is_cloned_beside_production_which_is_only_read_and_goes_at_the_end(
    apiserver, admin, namespace, tmp_path
):
    before = _production(admin, namespace)
    scenario = load_scenario(str(_scenario(tmp_path, namespace, apiserver.kubeconfig)))
    (tmp_path / RUN).mkdir()
    platform = KubernetesPlatform(scenario, tmp_path / RUN)
    platform.cluster = admin
    platform.claim(admin)
    name = fleet_name(RUN)
    recorded = yaml.safe_load((tmp_path / RUN / "kubernetes-originals.json").read_text())["created"]
    assert {(c["kind"], c["name"]) for c in recorded} == {("Deployment", name), ("Service", name)}
    fleet = admin.apps.read_namespaced_deployment(name, namespace)
    pod = admin.api.sanitize_for_serialization(fleet.spec.template)
    assert "app" not in pod["metadata"]["labels"] and fleet.spec.strategy.type == "Recreate"
    spec = pod["spec"]
    envoy = spec["containers"][1]
    assert envoy["args"] == ["-c", "/config/envoy.json"]  # production's threads: its args as they are
    assert envoy["resources"] == {
        "limits": {"cpu": "500m", "memory": "512Mi"},
        "requests": {"cpu": "500m", "memory": "512Mi"},
    }
    assert [p.get("hostPort") for p in envoy["ports"]] == [None, None] and "priorityClassName" not in spec
    assert spec["volumes"] == before["daemonset"]["spec"]["template"]["spec"]["volumes"]
    assert spec["initContainers"][0]["args"] == ["bootstrap", "/config/envoy.json"]
    assert spec["tolerations"] == [{"effect": "NoSchedule", "key": "edge", "operator": "Exists"}]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
    service = admin.core.read_namespaced_service(name, namespace)
    assert service.spec.selector == fleet.spec.selector.match_labels and service.spec.type == "ClusterIP"
    assert [(p.port, p.target_port) for p in service.spec.ports] == [(80, 8080)]
    assert platform.fleet.gateway_url == f"http://{name}.{namespace}.svc.cluster.local"
    assert _as_served(admin, namespace) == before  # production only read

    platform.stop()
    assert _fleet_objects(admin, namespace) == []
    assert _as_served(admin, namespace) == before


def test_restore_deletes_the_fleet_of_a_run_killed_hard_and_production_is_as_it_was(
    apiserver, admin, namespace, tmp_path
):
    before = _production(admin, namespace)
    scenario = _scenario(tmp_path, namespace, apiserver.kubeconfig)
    run, run_dir = claimed_run(scenario, tmp_path / "results")
    run.send_signal(signal.SIGKILL)
    run.wait()
    name = fleet_name(run_dir.name)
    assert _fleet_objects(admin, namespace) == [f"Deployment {name}", f"Service {name}"]
    result = run_sizer("restore", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert f"deleted Deployment {namespace}/{name}" in result.stdout, result.stdout
    assert _fleet_objects(admin, namespace) == []
    assert _as_served(admin, namespace) == before


def test_a_service_that_would_select_the_fleet_is_refused_before_anything_is_created(
    apiserver, admin, namespace, tmp_path
):
    _production(admin, namespace)
    create(
        admin,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "monitoring", "namespace": namespace},
            "spec": {"selector": {"team": "edge"}, "ports": [{"port": 9}]},
        },
    )
    scenario = load_scenario(
        str(
            _scenario(
                tmp_path, namespace, apiserver.kubeconfig, kubernetes_extra={"sizing": {"labels": {"team": "edge"}}}
            )
        )
    )
    (tmp_path / RUN).mkdir()
    platform = KubernetesPlatform(scenario, tmp_path / RUN)
    platform.cluster = admin
    with pytest.raises(Exception, match=rf"Service {namespace}/monitoring would select the sizing fleet's pods"):
        platform.claim(admin)
    platform.stop()
    assert _fleet_objects(admin, namespace) == []
    assert [d.metadata.name for d in admin.apps.list_namespaced_deployment(namespace).items] == ["nginx"]


def test_live_without_the_flag_is_one_line_and_nothing_is_read_or_changed(apiserver, admin, namespace, tmp_path):
    before = _production(admin, namespace)
    scenario = _scenario(tmp_path, namespace, apiserver.kubeconfig, target="live")
    result = run_sizer("sweep", "--scenario", str(scenario), "--results", str(tmp_path / "r"))
    one_line(result, "kubernetes.target: live changes the production gateway itself", "add --live to the command line")
    assert _as_served(admin, namespace) == before
    assert not (tmp_path / "r").exists()  # no run directory either
    leases = client.CoordinationV1Api(admin.api).list_namespaced_lease(namespace).items
    assert leases == []


def _with_replicas(path: Path, replicas: list[int]) -> Path:
    data = yaml.safe_load(path.read_text())
    data["envoy"]["replicas"] = replicas
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_sizing_fleet_of_two_replicas_is_made_with_two_and_production_is_only_read(
    apiserver, admin, namespace, tmp_path
):
    """The sizing fleet's replicas are the run's: a plan of 2 makes a Deployment of 2 beside production."""
    before = _production(admin, namespace)
    scenario = load_scenario(str(_with_replicas(_scenario(tmp_path, namespace, apiserver.kubeconfig), [2])))
    (tmp_path / RUN).mkdir()
    platform = KubernetesPlatform(scenario, tmp_path / RUN)
    platform.cluster = admin
    platform.claim(admin)
    assert admin.apps.read_namespaced_deployment(fleet_name(RUN), namespace).spec.replicas == 2
    assert _as_served(admin, namespace) == before
    platform.stop()
    assert _fleet_objects(admin, namespace) == []


def test_replicas_on_a_live_gateway_are_one_line_before_anything_is_changed(apiserver, admin, namespace, tmp_path):
    """A live gateway's pod count is production's: `--live --envoy-replicas 1,2` is refused once the gateway is
    found, before a Lease, a run directory or a change."""
    before = _production(admin, namespace)
    scenario = _scenario(tmp_path, namespace, apiserver.kubeconfig, target="live")
    result = run_sizer(
        "sweep", "--live", "--envoy-replicas", "1,2", "--scenario", str(scenario), "--results", str(tmp_path / "r")
    )
    one_line(result, "envoy.replicas: the production gateway's pod count", "kubernetes.target: sizing")
    assert _as_served(admin, namespace) == before
    assert not (tmp_path / "r").exists()
    assert client.CoordinationV1Api(admin.api).list_namespaced_lease(namespace).items == []
    assert wl.changed_by(admin, wl.Workload("DaemonSet", namespace, "envoy", "envoy")) is None


def test_live_on_a_gateway_serving_traffic_is_refused_with_its_rps_before_any_change(
    apiserver, admin, namespace, tmp_path
):
    before = _production(admin, namespace)
    series = envoy_pod(namespace, "envoy-x7k2p", rps=40.0, cores=0.02)
    with synthetic_prometheus(tmp_path, series) as url:
        scenario = _scenario(
            tmp_path, namespace, apiserver.kubeconfig, target="live", prometheus={"url": url, "retry_seconds": 5}
        )
        result = run_sizer("sweep", "--live", "--scenario", str(scenario), "--results", str(tmp_path / "r"))
    line = one_line(result, "kubernetes.target: live: the production gateway serves traffic (", "envoy-x7k2p")
    rps = float(line.split("serves traffic (")[1].split(" RPS")[0])
    assert 30 <= rps <= 50, line  # the exporter's 40 RPS, read from Prometheus
    assert "preflight: the run changes DaemonSet" in result.stdout, result.stdout
    assert _as_served(admin, namespace) == before
    assert wl.changed_by(admin, wl.Workload("DaemonSet", namespace, "envoy", "envoy")) is None


def test_the_dry_run_names_a_missing_request_counter_and_how_to_add_it_and_changes_nothing(
    apiserver, admin, namespace, tmp_path
):
    before = _production(admin, namespace)
    series = envoy_pod(namespace, "envoy-x7k2p", rps=0.0, cores=0.01, counted=False)
    with synthetic_prometheus(tmp_path, series) as url:
        scenario = _scenario(tmp_path, namespace, apiserver.kubeconfig, prometheus={"url": url})
        result = run_sizer("sweep", "--dry-run", "--scenario", str(scenario), "--results", str(tmp_path / "r"))
    one_line(
        result,
        "Prometheus has no envoy_http_downstream_rq_total for any pod",
        "scrape Envoy's port 8002 at /stats/prometheus",
    )
    assert "preflight: the run creates a sizing fleet" in result.stdout, result.stdout
    assert not (tmp_path / "r").exists() and _fleet_objects(admin, namespace) == []
    assert _as_served(admin, namespace) == before
    (tmp_path / "again").mkdir()
    with synthetic_prometheus(tmp_path / "again", envoy_pod(namespace, "envoy-x7k2p", rps=1.0, cores=0.01)) as url:
        scenario = _scenario(tmp_path, namespace, apiserver.kubeconfig, prometheus={"url": url})
        fine = run_sizer("sweep", "--dry-run", "--scenario", str(scenario), "--results", str(tmp_path / "r"))
    assert fine.returncode == 0, fine.stderr
    assert "preflight: nothing was changed (--dry-run)" in fine.stdout and "configuration(s)" in fine.stdout
    assert _fleet_objects(admin, namespace) == [] and _as_served(admin, namespace) == before


GATEWAY_API = ("gateway.networking.k8s.io", "v1")
CONTOUR_CONTROLLER = "projectcontour.io/gateway-controller"


def _custom(admin: Cluster, plural: str, body: dict[str, Any], namespace: str | None = None) -> None:
    group, version = ("projectcontour.io", "v1alpha1") if plural == "contourdeployments" else GATEWAY_API
    if namespace is None:
        admin.custom.create_cluster_custom_object(group, version, plural, body)
    else:
        admin.custom.create_namespaced_custom_object(group, version, namespace, plural, body)


def _provisioned_production(admin: Cluster, namespace: str) -> dict[str, Any]:
    """A shared GatewayClass of Contour's provisioner (two Gateways) whose ContourDeployment runs Envoy as a
    DaemonSet behind a LoadBalancer, the Envoy the provisioner made for Gateway `gw` with a pod on NODE, and the
    test bed's nginx; returns production's objects as the API serves them."""
    gateway(admin, namespace)
    params = {"group": "projectcontour.io", "kind": "ContourDeployment", "namespace": namespace, "name": "params"}
    _custom(
        admin,
        "contourdeployments",
        {
            "apiVersion": "projectcontour.io/v1alpha1",
            "kind": "ContourDeployment",
            "metadata": {"name": "params"},
            "spec": {
                "envoy": {
                    "workloadType": "DaemonSet",
                    "logLevel": "warn",
                    "networkPublishing": {"type": "LoadBalancerService"},
                }
            },
        },
        namespace,
    )
    _custom(
        admin,
        "gatewayclasses",
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": f"class-{namespace}"},
            "spec": {"controllerName": CONTOUR_CONTROLLER, "parametersRef": params},
        },
    )
    class_status(admin, f"class-{namespace}", accepted_conditions())  # as the provisioner writes it
    for name in ("gw", "neighbour"):
        _custom(
            admin,
            "gateways",
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": name},
                "spec": {
                    "gatewayClassName": f"class-{namespace}",
                    "listeners": [{"name": "http", "protocol": "HTTP", "port": 8080}],
                },
            },
            namespace,
        )
    envoy = workload("DaemonSet", namespace, "envoy-gw", {"envoy": {}})
    envoy["metadata"]["labels"] = {"projectcontour.io/owning-gateway-name": "gw"}
    create(admin, envoy)
    pod = {
        "metadata": {"name": "envoy-gw-q4m8z", "labels": {"app": "envoy-gw"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "envoy", "image": "example/envoy:1"}]},
    }
    admin.core.create_namespaced_pod(namespace, pod)
    return _provisioned_as_served(admin, namespace)


def _provisioned_as_served(admin: Cluster, namespace: str) -> dict[str, Any]:
    custom = admin.custom
    return {
        "class": custom.get_cluster_custom_object(*GATEWAY_API, "gatewayclasses", f"class-{namespace}"),
        "parameters": custom.get_namespaced_custom_object(
            "projectcontour.io", "v1alpha1", namespace, "contourdeployments", "params"
        ),
        "gateways": [
            custom.get_namespaced_custom_object(*GATEWAY_API, namespace, "gateways", name)
            for name in ("gw", "neighbour")
        ],
        "envoy": admin.api.sanitize_for_serialization(admin.apps.read_namespaced_daemon_set("envoy-gw", namespace)),
    }


def test_a_gateway_of_a_shared_class_gets_a_class_parameters_and_gateway_of_the_run_s_own_and_they_go(
    admin, namespace, tmp_path
):
    before = _provisioned_production(admin, namespace)
    scenario = parse_scenario(
        {
            "name": "t",
            "platform": "kubernetes",
            "envoy": {"cpu": [0.25], "replicas": [1]},
            "backend": {"workload": {"namespace": namespace, "name": "nginx", "container": "nginx"}},
            "kubernetes": {
                "namespace": namespace,
                "gateway": {"kind": "gateway", "namespace": namespace, "name": "gw"},
                "rollout_timeout_seconds": 5,
            },
        }
    )
    (tmp_path / RUN).mkdir()
    platform = KubernetesPlatform(scenario, tmp_path / RUN)
    platform.cluster = admin
    platform.claim(admin)  # a live run would refuse the shared class (tests/kubernetes/test_provisioned_gateway.py)
    name = f"gateway-sizer-{run_hash(RUN)}"
    recorded = yaml.safe_load((tmp_path / RUN / "kubernetes-originals.json").read_text())["created"]
    assert [(c["kind"], c["name"]) for c in recorded] == [
        ("Gateway", name),
        ("Lease", f"leader-elect-{name}"),  # its Contour's, which the provisioner leaves (test_contour_lease.py)
        ("GatewayClass", name),
        ("ContourDeployment", name),
    ]
    copy = admin.custom.get_namespaced_custom_object(
        "projectcontour.io", "v1alpha1", namespace, "contourdeployments", name
    )["spec"]
    assert copy["envoy"]["workloadType"] == "Deployment" and copy["envoy"]["deployment"]["replicas"] == 1
    assert copy["envoy"]["logLevel"] == "warn" and copy["envoy"]["networkPublishing"] == {"type": "ClusterIPService"}
    assert copy["envoy"]["nodePlacement"] == {"nodeSelector": {"kubernetes.io/hostname": NODE}}
    assert copy["envoy"]["resources"]["limits"]["cpu"] == "250m"
    assert copy["runtimeSettings"]["ingress"]["classNames"] == [name]
    own_class = admin.custom.get_cluster_custom_object(*GATEWAY_API, "gatewayclasses", name)["spec"]
    assert own_class == {
        "controllerName": CONTOUR_CONTROLLER,
        "parametersRef": {
            "group": "projectcontour.io",
            "kind": "ContourDeployment",
            "namespace": namespace,
            "name": name,
        },
    }
    own = admin.custom.get_namespaced_custom_object(*GATEWAY_API, namespace, "gateways", name)["spec"]
    assert own["gatewayClassName"] == name and [(x["protocol"], x["port"]) for x in own["listeners"]] == [
        ("HTTP", 8080)
    ]
    assert platform.fleet.gateway_url == f"http://envoy-{name}.{namespace}.svc.cluster.local:8080"
    assert platform.selectors.control_plane.pod_regex.startswith(f"contour-{name}-")
    assert _provisioned_as_served(admin, namespace) == before  # production only read

    platform.stop()
    for plural, where in (("gateways", namespace), ("contourdeployments", namespace), ("gatewayclasses", None)):
        group, version = ("projectcontour.io", "v1alpha1") if plural == "contourdeployments" else GATEWAY_API
        listed = (
            admin.custom.list_cluster_custom_object(group, version, plural)
            if where is None
            else admin.custom.list_namespaced_custom_object(group, version, where, plural)
        )["items"]
        assert name not in [item["metadata"]["name"] for item in listed], plural
    assert _provisioned_as_served(admin, namespace) == before
