"""Finding, patching, restoring and rolling out the gateway's workloads on a real kube-apiserver."""

from __future__ import annotations

import datetime

import pytest

from runner.errors import PlatformError, UsageError
from runner.platforms.kubernetes import workloads as wl
from runner.platforms.kubernetes.originals import ClusterChanges, Original, undo
from runner.scenario import WorkloadRef
from support.k8s import create, workload

pytestmark = pytest.mark.kubernetes
ORIGINAL = {"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}


def test_finds_a_daemonset_gateway_and_its_container(admin, namespace):
    create(admin, workload("DaemonSet", namespace, "envoy", {"shutdown-manager": {}, "envoy": ORIGINAL}))
    found = wl.find(admin, WorkloadRef(namespace=namespace, name="envoy", container="envoy"), "envoy")
    assert found == wl.Workload("DaemonSet", namespace, "envoy", "envoy")


def test_finds_a_deployment_gateway_when_there_is_no_daemonset(admin, namespace):
    create(admin, workload("Deployment", namespace, "envoy", {"envoy": {}}, replicas=2))
    found = wl.find(admin, WorkloadRef(namespace=namespace, name="envoy", container="envoy"), "envoy")
    assert found.kind == "Deployment"


def test_a_missing_gateway_is_one_clear_usage_error(admin, namespace):
    with pytest.raises(UsageError) as error:
        wl.find(admin, WorkloadRef(namespace=namespace, name="envoy", container="envoy"), "envoy")
    line = error.value.one_line()
    assert f"no DaemonSet or Deployment {namespace}/envoy found for the envoy" in line
    assert "envoy.workload" in line


def test_a_wrong_container_name_lists_the_containers(admin, namespace):
    create(admin, workload("DaemonSet", namespace, "envoy", {"shutdown-manager": {}, "proxy": {}}))
    with pytest.raises(UsageError, match=r"has no container 'envoy' \(it has shutdown-manager, proxy\)"):
        wl.find(admin, WorkloadRef(namespace=namespace, name="envoy", container="envoy"), "envoy")


def test_patch_sets_guaranteed_resources_and_undo_restores_the_original_exactly(admin, namespace, tmp_path):
    create(admin, workload("DaemonSet", namespace, "envoy", {"shutdown-manager": {}, "envoy": ORIGINAL}))
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    changes = ClusterChanges(tmp_path / "originals.json")
    original = changes.remember(Original(envoy, wl.get_pod_resources(admin, envoy)))
    wanted = wl.resources_for(0.3, 512 * 2**20)
    original.resources_changed = True
    wl.set_resources(admin, envoy, wanted)
    assert wl.get_resources(admin, envoy) == {
        "limits": {"cpu": "300m", "memory": "512Mi"},
        "requests": {"cpu": "300m", "memory": "512Mi"},
    }
    pod = wl.read(admin, envoy).spec.template.spec
    assert pod.containers[0].resources.limits is None  # the other container is untouched
    undo(admin, changes, timeout_s=1, wait=False)
    assert wl.get_resources(admin, envoy) == ORIGINAL
    assert not ClusterChanges.load_file(tmp_path / "originals.json").pending


CONTOUR_ENVOY_ARGS = ["-c", "/config/envoy.json", "--service-cluster $(CONTOUR_NAMESPACE)", "--log-level info"]


@pytest.mark.parametrize(
    "original_args",
    [CONTOUR_ENVOY_ARGS, [*CONTOUR_ENVOY_ARGS, "--concurrency 8"], None],
    ids=["contour-args", "concurrency-already-set", "no-args"],
)
def test_concurrency_goes_in_with_the_limits_in_one_rollout_and_undo_restores_the_args_exactly(
    admin, namespace, tmp_path, original_args
):
    args = {"envoy": original_args} if original_args else None
    create(admin, workload("DaemonSet", namespace, "envoy", {"shutdown-manager": {}, "envoy": ORIGINAL}, args=args))
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    changes = ClusterChanges(tmp_path / "originals.json")
    original = changes.remember(Original(envoy, wl.get_pod_resources(admin, envoy), args=wl.get_args(admin, envoy)))
    assert original.args == original_args
    generation = wl.read(admin, envoy).metadata.generation
    original.resources_changed = original.args_changed = True
    wl.set_pod_resources(
        admin, envoy, {"envoy": wl.resources_for(0.3, 2**28)}, {"envoy": wl.with_concurrency(original.args, 1)}
    )
    assert wl.read(admin, envoy).metadata.generation == generation + 1  # one patch, one rollout
    patched = wl.get_args(admin, envoy)
    assert wl.concurrency_in(patched) == 1
    assert patched == [*(original_args or [])[:4], "--concurrency", "1"]
    assert wl.read(admin, envoy).spec.template.spec.containers[0].args is None  # the sidecar's are untouched
    assert ClusterChanges.load_file(tmp_path / "originals.json").originals[0].args == original_args

    undo(admin, changes, timeout_s=1, wait=False)
    assert wl.get_args(admin, envoy) == original_args
    assert wl.get_resources(admin, envoy) == ORIGINAL
    assert not ClusterChanges.load_file(tmp_path / "originals.json").pending


def test_undo_removes_limits_the_original_did_not_have(admin, namespace, tmp_path):
    create(admin, workload("Deployment", namespace, "contour", {"contour": {}}))
    contour = wl.Workload("Deployment", namespace, "contour", "contour")
    changes = ClusterChanges(tmp_path / "originals.json")
    original = changes.remember(Original(contour, wl.get_pod_resources(admin, contour), replicas=1))
    assert original.resources == {"contour": None}
    original.resources_changed = True
    wl.set_resources(admin, contour, wl.resources_for(1.0, 2**30))
    undo(admin, changes, timeout_s=1, wait=False)
    assert wl.get_resources(admin, contour) is None


def _set_daemonset_status_like_the_controller(admin, namespace, name, *, ready: bool):
    obj = admin.apps.read_namespaced_daemon_set(name, namespace)
    count = 1 if ready else 0
    status = {
        "status": {
            "observedGeneration": obj.metadata.generation,
            "desiredNumberScheduled": 1,
            "currentNumberScheduled": 1,
            "numberMisscheduled": 0,
            "updatedNumberScheduled": count,
            "numberAvailable": count,
            "numberReady": count,
            "numberUnavailable": 1 - count,
        }
    }
    admin.apps.patch_namespaced_daemon_set_status(name, namespace, status)


def test_rollout_wait_returns_once_status_says_done_set_by_hand_as_a_controller_would(admin, namespace):
    create(admin, workload("DaemonSet", namespace, "envoy", {"envoy": {}}))
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    wl.set_resources(admin, envoy, wl.resources_for(0.5, None))  # bumps the generation
    assert not wl.rolled_out(wl.read(admin, envoy), "DaemonSet")
    _set_daemonset_status_like_the_controller(admin, namespace, "envoy", ready=True)
    wl.wait_rolled_out(admin, envoy, timeout_s=5)


def test_rollout_timeout_names_the_stuck_pod_and_its_last_event_pod_and_event_made_by_hand(admin, namespace):
    create(admin, workload("DaemonSet", namespace, "envoy", {"envoy": {}}))
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    _set_daemonset_status_like_the_controller(admin, namespace, "envoy", ready=False)
    admin.core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "envoy-x7k2p", "labels": {"app": "envoy"}},
            "spec": {"containers": [{"name": "envoy", "image": "example/none:1"}]},
        },
    )
    now = datetime.datetime.now(datetime.UTC).isoformat()
    admin.core.create_namespaced_event(
        namespace,
        {
            "metadata": {"name": "envoy-x7k2p.1"},
            "reason": "FailedScheduling",
            "type": "Warning",
            "message": "0/1 nodes are available: 1 Insufficient cpu.",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "involvedObject": {"kind": "Pod", "name": "envoy-x7k2p", "namespace": namespace},
        },
    )
    with pytest.raises(PlatformError) as error:
        wl.wait_rolled_out(admin, envoy, timeout_s=1.5)
    line = error.value.one_line()
    assert f"rollout of DaemonSet {namespace}/envoy not done after 2 s" in line
    assert "pod envoy-x7k2p Pending" in line
    assert "FailedScheduling: 0/1 nodes are available: 1 Insufficient cpu." in line


def test_deployment_rollout_needs_every_replica_updated_and_available_status_set_by_hand(admin, namespace):
    create(admin, workload("Deployment", namespace, "nginx", {"nginx": {}}, replicas=1))
    nginx = wl.Workload("Deployment", namespace, "nginx", "nginx")
    wl.scale(admin, nginx, 3)
    assert wl.replicas(admin, nginx) == 3
    obj = wl.read(admin, nginx)
    partial = {
        "observedGeneration": obj.metadata.generation,
        "replicas": 3,
        "updatedReplicas": 3,
        "availableReplicas": 2,
        "readyReplicas": 2,
    }
    admin.apps.patch_namespaced_deployment_status("nginx", namespace, {"status": partial})
    assert not wl.rolled_out(wl.read(admin, nginx), "Deployment")
    admin.apps.patch_namespaced_deployment_status(
        "nginx", namespace, {"status": {**partial, "availableReplicas": 3, "readyReplicas": 3}}
    )
    wl.wait_rolled_out(admin, nginx, timeout_s=5)


def test_scaling_the_backend_is_undone_to_the_original_replicas(admin, namespace, tmp_path):
    create(admin, workload("Deployment", namespace, "nginx", {"nginx": {}}, replicas=2))
    nginx = wl.Workload("Deployment", namespace, "nginx", "nginx")
    changes = ClusterChanges(tmp_path / "originals.json")
    original = changes.remember(Original(nginx, replicas=wl.replicas(admin, nginx)))
    original.replicas_changed = True
    wl.scale(admin, nginx, 5)
    undo(admin, changes, timeout_s=1, wait=False)
    assert wl.replicas(admin, nginx) == 2


def test_a_daemonset_cannot_be_scaled(admin, namespace):
    create(admin, workload("DaemonSet", namespace, "nginx", {"nginx": {}}))
    with pytest.raises(UsageError, match="only a Deployment backend"):
        wl.scale(admin, wl.Workload("DaemonSet", namespace, "nginx", "nginx"), 3)


def test_guaranteed_qos_gives_the_sidecar_limits_equal_to_requests_and_undo_restores_both(admin, namespace, tmp_path):
    sidecar = {"requests": {"cpu": "80m", "memory": "100Mi"}}
    create(admin, workload("DaemonSet", namespace, "envoy", {"shutdown-manager": sidecar, "envoy": ORIGINAL}))
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    changes = ClusterChanges(tmp_path / "originals.json")
    original = changes.remember(Original(envoy, wl.get_pod_resources(admin, envoy)))
    original.resources_changed = True
    wl.set_pod_resources(
        admin, envoy, {"envoy": wl.resources_for(0.3, 2**28), "shutdown-manager": wl.guaranteed(sidecar)}
    )
    pod = wl.get_pod_resources(admin, envoy)
    assert pod["shutdown-manager"] == {
        "limits": {"cpu": "80m", "memory": "100Mi"},
        "requests": {"cpu": "80m", "memory": "100Mi"},
    }
    # Contour's own 10m/16Mi is raised to the minimum: its preStop hook thrashed under a 16Mi limit
    assert (
        wl.guaranteed({"requests": {"cpu": "10m", "memory": "16Mi"}})
        == wl.guaranteed(None)
        == {
            "limits": {"cpu": "50m", "memory": "64Mi"},
            "requests": {"cpu": "50m", "memory": "64Mi"},
        }
    )
    undo(admin, changes, timeout_s=1, wait=False)
    assert wl.get_pod_resources(admin, envoy) == {"shutdown-manager": sidecar, "envoy": ORIGINAL}


def _qos_of_a_pod_from_the_template(admin, namespace: str, envoy: wl.Workload) -> str:
    """The QoS class the API server gives a pod made from the workload's template (no kubelet needed)."""
    template = admin.api.sanitize_for_serialization(wl.read(admin, envoy).spec.template)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "probe-"}, "spec": template["spec"]}
    created = admin.core.create_namespaced_pod(namespace, pod)
    return created.status.qos_class


def test_guaranteed_qos_covers_contours_init_container_and_undo_restores_it(admin, namespace, tmp_path):
    contour_like = workload(
        "DaemonSet",
        namespace,
        "envoy",
        {"shutdown-manager": {}, "envoy": ORIGINAL},
        init_containers={"envoy-initconfig": {}},
    )
    create(admin, contour_like)
    envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
    assert _qos_of_a_pod_from_the_template(admin, namespace, envoy) == "Burstable"
    changes = ClusterChanges(tmp_path / "originals.json")
    original = changes.remember(Original(envoy, wl.get_pod_resources(admin, envoy)))
    assert original.resources == {"envoy-initconfig": None, "shutdown-manager": None, "envoy": ORIGINAL}
    original.resources_changed = True
    assert wl.init_container_names(admin, envoy) == {"envoy-initconfig"}
    sized = wl.resources_for(0.15, 2**28)
    # as the platform does: the sidecar's limits = its requests, the init container Envoy's own resources
    wanted = {"envoy": sized, "envoy-initconfig": sized, "shutdown-manager": wl.guaranteed(None)}
    wl.set_pod_resources(admin, envoy, wanted)
    assert _qos_of_a_pod_from_the_template(admin, namespace, envoy) == "Guaranteed"
    assert wl.get_pod_resources(admin, envoy)["envoy-initconfig"] == sized
    undo(admin, changes, timeout_s=1, wait=False)
    assert wl.get_pod_resources(admin, envoy) == {"envoy-initconfig": None, "shutdown-manager": None, "envoy": ORIGINAL}


def test_facts_record_the_kind_found_its_selector_and_its_pods_before_the_run(admin, namespace, tmp_path):
    """What `recommend` reads of the install's shape (runner.model.EnvoyWorkload), also when the scenario said
    `auto`: the kind found, the selector of its pods, and the replicas it had before the run changed them."""
    from runner.model import EnvoyWorkload

    create(admin, workload("Deployment", namespace, "envoy", {"envoy": ORIGINAL}, replicas=3))
    envoy = wl.find(admin, WorkloadRef(namespace=namespace, name="envoy", container="envoy"), "envoy")
    changes = ClusterChanges(tmp_path / "originals.json")
    found = EnvoyWorkload.model_validate(wl.facts(admin, envoy, changes, None))
    assert (found.kind, found.selector, found.pods, found.provisioned_by) == ("Deployment", {"app": "envoy"}, 3, None)
    changes.remember(Original(envoy, wl.get_pod_resources(admin, envoy), replicas=5))  # as it was before the run
    assert wl.facts(admin, envoy, changes, "ContourDeployment ns/gw")["pods"] == 5
    assert wl.facts(admin, envoy, changes, "ContourDeployment ns/gw")["provisioned_by"] == "ContourDeployment ns/gw"

    create(admin, workload("DaemonSet", namespace, "proxy", {"envoy": ORIGINAL}))
    daemonset = wl.find(admin, WorkloadRef(namespace=namespace, name="proxy", container="envoy"), "envoy")
    found = EnvoyWorkload.model_validate(wl.facts(admin, daemonset, changes, None))
    assert (found.kind, found.selector) == ("DaemonSet", {"app": "proxy"})
