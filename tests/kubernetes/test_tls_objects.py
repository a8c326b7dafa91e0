"""The TLS profiles' Secret and HTTPProxy as real API objects (Contour's CRDs from the contour module): their
shape, recorded before they exist, removed by undo and by restore after a hard kill, a killed run's
leftovers removed before a new run claims the fqdn. No Contour runs here: tests set the proxies' status
by hand, as Contour would."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from kubernetes import client

from runner.errors import PlatformError, UsageError
from runner.paths import PROJECT_ROOT
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.objects import (
    GATEWAY_LABEL,
    GROUP,
    MANAGED_BY,
    PLURAL,
    RUN_LABEL,
    VERSION,
    gateway_key,
)
from runner.platforms.kubernetes.originals import ClusterChanges, NotOursError, delete_created, undo
from runner.platforms.kubernetes.tls import GatewayTls, object_name
from runner.scenario import Scenario, parse_scenario
from support.k8s import (
    TESTBED_SERVICES,
    create_testbed_proxy,
    gateway,
    gone,
    profiles_scenario_data,
    read_proxy,
    set_proxy_status,
)
from support.processes import run_sizer

pytestmark = pytest.mark.kubernetes
RUN = "20261124-120000-tls"


def _scenario(namespace: str, profiles: list[str], host: str = "external.nginx") -> Scenario:
    return parse_scenario(profiles_scenario_data(namespace, profiles, host))


def _tls(namespace: str, tmp_path: Path, run_id: str = RUN, profiles: tuple[str, ...] = ("plain", "tls", "tls-ecdsa")):
    (tmp_path / run_id).mkdir(exist_ok=True)
    changes = ClusterChanges(tmp_path / run_id / "originals.json")
    return GatewayTls(_scenario(namespace, list(profiles)), run_id, changes), changes


def test_each_key_type_gets_a_tls_secret_and_a_root_proxy_of_its_own_routing_like_the_test_bed(
    admin, namespace, tmp_path
):
    create_testbed_proxy(admin, namespace)
    tls, changes = _tls(namespace, tmp_path, profiles=("plain", "tls", "tls-new-connection", "tls-ecdsa"))
    tls.create(admin)
    labels = {"app.kubernetes.io/name": "gateway-sizer-tls", RUN_LABEL: RUN,
              GATEWAY_LABEL: gateway_key(namespace, "envoy"), **MANAGED_BY}  # fmt: skip
    for key, fqdn in (("rsa-2048", "tls.external.nginx"), ("ecdsa-p256", "tls-ecdsa.external.nginx")):
        name = object_name(RUN, key)
        secret = admin.core.read_namespaced_secret(name, namespace)
        assert secret.type == "kubernetes.io/tls" and secret.metadata.labels == labels
        certificate = x509.load_pem_x509_certificate(base64.b64decode(secret.data["tls.crt"]))
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert san.get_values_for_type(x509.DNSName) == [fqdn]
        assert b"PRIVATE KEY" in base64.b64decode(secret.data["tls.key"])
        proxy = read_proxy(admin, namespace, name)
        assert proxy["metadata"]["labels"] == labels
        assert proxy["spec"] == {
            "virtualhost": {"fqdn": fqdn, "tls": {"secretName": name}},
            "routes": [{"conditions": [{"prefix": "/"}], "services": TESTBED_SERVICES}],
        }
    # recorded proxy first, so that undo deletes it before its Secret; each Secret with the uid it was made with
    kinds = [(c["kind"], c["name"]) for c in changes.created]
    assert kinds == [
        (kind, object_name(RUN, key)) for key in ("rsa-2048", "ecdsa-p256") for kind in ("HTTPProxy", "Secret")
    ]
    for record in changes.created:
        if record["kind"] == "Secret":
            assert record["uid"] == admin.core.read_namespaced_secret(record["name"], namespace).metadata.uid
    assert json.loads(changes.path.read_text())["created"] == changes.created


class _Spying(Cluster):
    """The admin connection, but every create first notes whether the run's file already records the object."""

    seen: list[tuple[str, bool]]
    changes_path: Path

    def _recorded(self, kind: str, name: str) -> bool:
        created = json.loads(self.changes_path.read_text())["created"]
        return any(c["kind"] == kind and c["name"] == name for c in created)

    @property
    def custom(self) -> client.CustomObjectsApi:
        api = client.CustomObjectsApi(self.api)
        create = api.create_namespaced_custom_object

        def spy(group, version, namespace, plural, body, **kwargs):
            self.seen.append(("HTTPProxy", self._recorded("HTTPProxy", body["metadata"]["name"])))
            return create(group, version, namespace, plural, body, **kwargs)

        api.create_namespaced_custom_object = spy  # type: ignore[method-assign]
        return api


def test_each_object_is_recorded_in_the_run_directory_before_it_is_created(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    tls, changes = _tls(namespace, tmp_path, profiles=("tls",))
    spying = _Spying(admin.api, client.CoreV1Api(admin.api), admin.apps, admin.host)
    spying.seen, spying.changes_path = [], changes.path
    create_secret = spying.core.create_namespaced_secret

    def spy_secret(namespace, body, **kwargs):
        spying.seen.append(("Secret", spying._recorded("Secret", body["metadata"]["name"])))
        return create_secret(namespace, body, **kwargs)

    spying.core.create_namespaced_secret = spy_secret  # type: ignore[method-assign]
    tls.create(spying)
    assert spying.seen == [("Secret", True), ("HTTPProxy", True)]


def test_undo_deletes_the_proxies_and_secrets_and_leaves_a_secret_someone_else_made_since(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    tls, changes = _tls(namespace, tmp_path)
    tls.create(admin)
    rsa, ecdsa = object_name(RUN, "rsa-2048"), object_name(RUN, "ecdsa-p256")
    # someone deletes the run's ECDSA Secret and makes one of the same name: it is not the run's to delete
    admin.core.delete_namespaced_secret(ecdsa, namespace)
    admin.core.create_namespaced_secret(namespace, {"metadata": {"name": ecdsa}, "stringData": {"a": "b"}})
    done = undo(admin, changes, timeout_s=1, wait=False)
    assert done == [
        f"deleted HTTPProxy {namespace}/{rsa}",
        f"deleted Secret {namespace}/{rsa}",
        f"deleted HTTPProxy {namespace}/{ecdsa}",
        f"left Secret {namespace}/{ecdsa} alone: it is not the one this run created",
    ]
    assert changes.created == []
    for name in (rsa, ecdsa):
        assert gone(read_proxy, admin, namespace, name)
    assert gone(admin.core.read_namespaced_secret, rsa, namespace)
    assert admin.core.read_namespaced_secret(ecdsa, namespace).data == {"a": base64.b64encode(b"b").decode()}
    assert read_proxy(admin, namespace, "nginx")["spec"]["virtualhost"]["fqdn"] == "external.nginx"  # the test bed's


def test_a_proxy_without_gateway_sizers_labels_is_never_deleted(admin, namespace):
    create_testbed_proxy(admin, namespace)
    with pytest.raises(NotOursError, match="lacks gateway-sizer's managed-by labels"):
        delete_created(admin, {"kind": "HTTPProxy", "namespace": namespace, "name": "nginx"})
    assert read_proxy(admin, namespace, "nginx")


def test_a_new_run_removes_a_killed_runs_tls_objects_before_it_claims_the_fqdn(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    killed, _ = _tls(namespace, tmp_path, run_id="killed-run", profiles=("tls",))
    killed.create(admin)
    old = object_name("killed-run", "rsa-2048")
    tls, changes = _tls(namespace, tmp_path, profiles=("tls",))
    tls.create(admin)
    assert gone(read_proxy, admin, namespace, old) and gone(admin.core.read_namespaced_secret, old, namespace)
    fqdns = [p["spec"]["virtualhost"]["fqdn"] for p in
             admin.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]]  # fmt: skip
    assert sorted(fqdns) == ["external.nginx", "tls.external.nginx"]
    assert [c["name"] for c in changes.created] == [object_name(RUN, "rsa-2048")] * 2


def test_the_run_waits_until_contour_marks_the_proxies_valid_status_set_by_hand(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    tls, _ = _tls(namespace, tmp_path, profiles=("tls",))
    tls.create(admin)
    name = object_name(RUN, "rsa-2048")
    error = {"type": "TLSError", "status": "True", "reason": "SecretNotValid", "message": "Secret not found"}
    condition = {"type": "Valid", "status": "False", "reason": "ErrorPresent", "lastTransitionTime":
                 "2026-11-24T12:00:00Z", "message": "At least one error present, see Errors for details",
                 "errors": [error]}  # fmt: skip
    invalid = {"currentStatus": "invalid", "description": condition["message"], "conditions": [condition]}
    set_proxy_status(admin, namespace, name, invalid)
    with pytest.raises(PlatformError) as waited:
        tls.wait_valid(admin, timeout_s=2)
    assert f"Contour has not marked HTTPProxy {namespace}/{name} valid in 2 s (invalid: Secret not found)" in str(
        waited.value
    )
    set_proxy_status(admin, namespace, name, {"currentStatus": "valid", "description": "Valid HTTPProxy"})
    tls.wait_valid(admin, timeout_s=2)


def test_tls_profiles_without_a_test_bed_proxy_for_the_host_are_one_line(admin, namespace, tmp_path):
    create_testbed_proxy(admin, namespace)
    changes = ClusterChanges(tmp_path / "originals.json")
    tls = GatewayTls(_scenario(namespace, ["tls"], host="other.example"), RUN, changes)
    with pytest.raises(UsageError) as refused:
        tls.create(admin)
    assert refused.value.one_line() == (
        f"no HTTPProxy in {namespace} has virtualhost.fqdn other.example: TLS profiles route like it: "
        "apply k8s/manifests/backend (or the chart), or set load.host_header to your HTTPProxy's fqdn"
    )
    assert changes.created == []


# A run killed hard right after it made its TLS objects, through the platform's own steps (Lease, originals,
# then the objects). Its Lease lasts 8 s.
KILLED_AFTER_TLS = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from runner.platforms.kubernetes.connection import connect
    from runner.platforms.kubernetes.platform import KubernetesPlatform
    from runner.results import RunStore
    from runner.scenario import load_scenario
    scenario = load_scenario(sys.argv[1])
    store = RunStore.create(scenario, Path(sys.argv[2]))
    platform = KubernetesPlatform(scenario, store.run_dir, live=True)
    platform.lease_duration_s = 8
    platform.cluster = connect(scenario.kubernetes.kubeconfig)
    platform.claim(platform.cluster)
    platform.tls.create(platform.cluster)
    print(store.run_dir, flush=True)
    time.sleep(600)
""")


def test_restore_removes_the_tls_objects_of_a_run_killed_hard(apiserver, admin, namespace, tmp_path):
    gateway(admin, namespace)
    create_testbed_proxy(admin, namespace)
    data = profiles_scenario_data(namespace, ["plain", "tls", "tls-ecdsa"])
    data["kubernetes"].update(kubeconfig=str(apiserver.kubeconfig), target="live")  # no pod to copy a fleet from
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(data))
    run = subprocess.Popen([sys.executable, "-c", KILLED_AFTER_TLS, str(scenario), str(tmp_path / "results")],
                           cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    run_dir = Path(run.stdout.readline().strip())
    run.send_signal(signal.SIGKILL)  # no cleanup can run
    run.wait()
    names = [object_name(run_dir.name, key) for key in ("rsa-2048", "ecdsa-p256")]
    for name in names:
        assert read_proxy(admin, namespace, name) and admin.core.read_namespaced_secret(name, namespace)

    result = run_sizer("restore", str(run_dir), "--no-wait")
    assert result.returncode == 0, result.stderr
    for name in names:
        assert f"deleted HTTPProxy {namespace}/{name}" in result.stdout
        assert f"deleted Secret {namespace}/{name}" in result.stdout
        assert gone(read_proxy, admin, namespace, name) and gone(admin.core.read_namespaced_secret, name, namespace)
    assert run_sizer("restore", str(run_dir)).stdout.startswith("nothing to restore")
