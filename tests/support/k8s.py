"""What the tests against a real API server build: workloads and a gateway with its rollouts done, a Locust
deployment, the test bed's HTTPProxy, scenario files, credentials for a ServiceAccount."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, utils
from kubernetes.client.rest import ApiException

from runner.locust import LocustOptions
from runner.paths import PROJECT_ROOT
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.loadgen import LocustDeployment
from runner.platforms.kubernetes.objects import GROUP, PLURAL, VERSION, gateway_key
from runner.platforms.kubernetes.workloads import resources_for
from support.apiserver import ApiServer
from support.project import LOCUSTFILES, TESTS, child_env

ORIGINAL = {"requests": {"cpu": "100m"}}  # Envoy's resources in `gateway`
LOCUSTFILE = LOCUSTFILES / "gateway.py"
LOCUST_RUN = "20261122-000000-test"  # the run a `locust_spec` belongs to unless it says
LOCUST_TOKEN = "a-token-of-the-test-run"  # what a `locust_spec` master takes commands with
TESTBED_SERVICES = [{"name": "nginx", "port": 80}]  # the test bed's HTTPProxy routes to them


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


def gateway(admin: Cluster, namespace: str) -> None:
    """Envoy (a DaemonSet, resources ORIGINAL) and nginx (2 replicas). No controller runs here: their status
    says every rollout is done, as the controllers would once the pods are up, so an undo's wait ends."""
    create(admin, workload("DaemonSet", namespace, "envoy", {"envoy": ORIGINAL}))
    create(admin, workload("Deployment", namespace, "nginx", {"nginx": {}}, replicas=2))
    done = {"observedGeneration": 1000}
    admin.apps.patch_namespaced_daemon_set_status("envoy", namespace, {"status": {**done, "desiredNumberScheduled": 0,
        "currentNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}})  # fmt: skip
    replicas = {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 2}
    admin.apps.patch_namespaced_deployment_status("nginx", namespace, {"status": {**done, **replicas}})


def scenario_file(
    tmp_path: Path,
    namespace: str,
    kubeconfig: Path,
    envoy_cpu: float = 0.5,
    replicas: int = 3,
    *,
    target: str = "live",
    concurrency: str | None = None,
    **extra: object,
) -> Path:
    """A kubernetes scenario for the `gateway` in `namespace` (its rollouts time out after 5 s), written under
    tmp_path. `target`: live by default (the tests of what a run does to a gateway it patches; a CLI run then needs
    --live too), or sizing (a fleet beside it); `concurrency`: Envoy's threads (default: production's)."""
    envoy: dict[str, object] = {
        "cpu": [envoy_cpu],
        "workload": {"namespace": namespace, "name": "envoy", "container": "envoy"},
    }
    if concurrency is not None:
        envoy["concurrency"] = concurrency
    data = {
        "name": "k8s-test",
        "platform": "kubernetes",
        "envoy": envoy,
        "backend": {
            "replicas": [replicas],
            "workload": {"namespace": namespace, "name": "nginx", "container": "nginx"},
        },
        "kubernetes": {
            "kubeconfig": str(kubeconfig),
            "namespace": namespace,
            "rollout_timeout_seconds": 5,
            "target": target,
        },
        **extra,
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def profiles_scenario_data(namespace: str, profiles: list[str], host: str = "external.nginx") -> dict[str, Any]:
    """A kubernetes scenario's data with these traffic profiles, for the gateway in `namespace`."""
    return {
        "name": "t",
        "platform": "kubernetes",
        "envoy": {"cpu": [1], "workload": {"namespace": namespace, "name": "envoy", "container": "envoy"}},
        "backend": {"workload": {"namespace": namespace, "name": "nginx", "container": "nginx"}},
        "load": {"host_header": host},
        "profiles": profiles,
        "kubernetes": {"namespace": namespace},
    }


def locust_spec(
    namespace: str, workers: int = 3, run_id: str = LOCUST_RUN, gateway: str = "projectcontour/envoy"
) -> LocustDeployment:
    """A Locust master and `workers` workers of run `run_id` on `gateway` (namespace/name)."""
    return LocustDeployment(
        namespace=namespace,
        image="localhost/locust:2.47.0",
        pull_policy="Never",
        user_class="LeanGatewayUser",
        locustfile=LOCUSTFILE,
        options=LocustOptions("external.nginx", "/index.html"),
        gateway_url="http://envoy.projectcontour.svc.cluster.local",
        workers=workers,
        worker_resources=resources_for(1.0, 512 * 2**20),
        run_id=run_id,
        gateway=gateway_key(*gateway.split("/")),
        targets=("http://envoy.projectcontour.svc.cluster.local",),
        token=LOCUST_TOKEN,
    )


def create_testbed_proxy(admin: Cluster, namespace: str) -> None:
    """The test bed's HTTPProxy, as k8s/manifests/backend makes it."""
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "HTTPProxy", "metadata": {"name": "nginx"},
            "spec": {"virtualhost": {"fqdn": "external.nginx"},
                     "routes": [{"conditions": [{"prefix": "/"}], "services": TESTBED_SERVICES}]}}  # fmt: skip
    admin.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


def read_proxy(admin: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return admin.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def set_proxy_status(admin: Cluster, namespace: str, name: str, status: dict[str, Any]) -> None:
    """An HTTPProxy's status, set by hand as Contour would."""
    admin.custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, {"status": status})


def gone(read: Callable[..., object], *args: object) -> bool:
    """`read(*args)` answers 404."""
    try:
        read(*args)
    except ApiException as error:
        return error.status == 404
    return False


CLAIM_THEN_SLEEP = """
import sys, time
from pathlib import Path
from runner.platforms.kubernetes.connection import connect
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.results import RunStore
from runner.scenario import load_scenario
scenario = load_scenario(sys.argv[1])
store = RunStore.create(scenario, Path(sys.argv[2]))
platform = KubernetesPlatform(scenario, store.run_dir)
platform.lease_duration_s = 20
platform.cluster = connect(scenario.kubernetes.kubeconfig)
platform.claim(platform.cluster)
print(store.run_dir, flush=True)
time.sleep(600)
"""


def claimed_run(scenario: Path, results: Path) -> tuple[subprocess.Popen[str], Path]:
    """A run of `scenario` in a process of its own that has claimed its gateway (the gateway's Lease, 20 s long, and
    the run's fleet or changes) and sleeps, for a test to kill hard (SIGKILL); and its run directory."""
    run = subprocess.Popen(
        [sys.executable, "-c", CLAIM_THEN_SLEEP, str(scenario), str(results)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(TESTS),
    )
    assert run.stdout is not None
    return run, Path(run.stdout.readline().strip())
