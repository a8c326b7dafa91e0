"""The TLS profiles' objects on Kubernetes as data: names, fqdns, the Secret and the HTTPProxy, where the
load goes; what a check through the gateway says. (tests/kubernetes/test_tls_objects.py creates them on a
real API server, tests/locustfile/test_gateway_fetch.py fetches through a real Envoy.)"""

from __future__ import annotations

import base64

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from runner.certificates import pem_pair
from runner.errors import UsageError
from runner.platforms.kubernetes import objects, tls
from runner.platforms.kubernetes.gateway_check import Fetched
from runner.platforms.kubernetes.platform import KubernetesPlatform
from runner.scenario import Overrides, load_scenario

RUN = "20261124-120000-k8s"


def test_tls_profiles_load_on_kubernetes_and_each_key_type_gets_its_own_objects():
    profiles = "plain,tls,tls-new-connection,tls-ecdsa"
    scenario = load_scenario("local", Overrides(platform="kubernetes", profiles=profiles))
    assert tls.key_types(scenario.profiles) == ("rsa-2048", "ecdsa-p256")
    names = {tls.object_name(RUN, key) for key in ("rsa-2048", "ecdsa-p256")}
    assert len(names) == 2 and all(n.startswith("gateway-sizer-tls-") and len(n) <= 63 for n in names)
    assert tls.object_name(RUN, "rsa-2048") != tls.object_name("another-run", "rsa-2048")


def test_the_tls_proxy_claims_a_fqdn_of_its_own_and_the_load_goes_there_over_https(tmp_path):
    assert tls.fqdn_for("external.nginx", "rsa-2048") == "tls.external.nginx"
    assert tls.fqdn_for("Gateway.Example:8080", "ecdsa-p256") == "tls-ecdsa.gateway.example"
    with pytest.raises(UsageError, match="too long for the TLS profiles' fqdn"):
        tls.fqdn_for(".".join(["a" * 62] * 4), "rsa-2048")  # a 251-character host
    assert (
        tls.tls_url("http://envoy.projectcontour.svc.cluster.local") == "https://envoy.projectcontour.svc.cluster.local"
    )
    assert tls.tls_url("http://10.96.0.30:8080/") == "https://10.96.0.30"

    scenario = load_scenario("local", Overrides(platform="kubernetes", profiles="tls-new-connection-body-16k,plain"))
    platform = KubernetesPlatform(scenario, tmp_path / RUN)  # the load goes to the run's sizing fleet's Service
    fleet = f"gateway-sizer-envoy-{objects.run_hash(RUN)}.projectcontour.svc.cluster.local"
    secure = platform.target(scenario.profiles[0], scenario.load)
    assert (secure.url, secure.host_header, secure.path, secure.new_connection) == (
        f"https://{fleet}", "tls.external.nginx", "/size/16384", True
    )  # fmt: skip
    plain = platform.target(scenario.profiles[1], scenario.load)
    assert (plain.url, plain.host_header, plain.path) == (f"http://{fleet}", "external.nginx", "/")
    live = load_scenario("local", Overrides(platform="kubernetes")).model_copy(deep=True)
    live = live.model_copy(update={"kubernetes": live.kubernetes.model_copy(update={"target": "live"})})
    production = KubernetesPlatform(live, tmp_path / RUN, live=True)  # live: production's own Service
    assert production.target(scenario.profiles[1], scenario.load).url == "http://envoy.projectcontour.svc.cluster.local"


@pytest.mark.parametrize(("key", "kind"), [("rsa-2048", rsa.RSAPublicKey), ("ecdsa-p256", ec.EllipticCurvePublicKey)])
def test_the_secret_holds_a_certificate_for_the_fqdn_and_the_proxy_routes_like_the_test_bed(key, kind):
    fqdn = tls.fqdn_for("external.nginx", key)
    name = tls.object_name(RUN, key)
    certificate, private_key = pem_pair(fqdn, key)
    secret = tls.secret_manifest(name, "gateway-loadtest", {"a": "b"}, certificate, private_key)
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"tls.crt", "tls.key"}
    loaded = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    san = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [fqdn] and isinstance(loaded.public_key(), kind)

    route = objects.TestbedRoute("gateway-loadtest", "nginx", [{"name": "nginx", "port": 80, "weight": 100}], "contour")
    proxy = objects.proxy_manifest(name, {"a": "b"}, fqdn, route)
    assert proxy["apiVersion"] == "projectcontour.io/v1" and proxy["metadata"]["namespace"] == "gateway-loadtest"
    assert proxy["spec"] == {
        "virtualhost": {"fqdn": fqdn, "tls": {"secretName": name}},
        "routes": [{"conditions": [{"prefix": "/"}], "services": [{"name": "nginx", "port": 80, "weight": 100}]}],
        "ingressClassName": "contour",
    }


def test_a_proxys_status_reads_as_a_few_words():
    assert objects.proxy_problem({}) == "no status yet"
    assert (
        objects.proxy_problem({"currentStatus": "valid", "description": "Valid HTTPProxy"}) == "valid: Valid HTTPProxy"
    )
    invalid = {
        "currentStatus": "invalid",
        "description": "At least one error present, see Errors for details",
        "conditions": [{"type": "Valid", "errors": [{"message": 'Secret not found: "gateway-loadtest/x"'}]}],
    }
    assert objects.proxy_problem(invalid) == 'invalid: Secret not found: "gateway-loadtest/x"'


def test_a_fetch_through_the_gateway_describes_itself():
    assert Fetched(200, 16384).describe() == "HTTP 200 with 16,384 body bytes"
    assert Fetched(0, 0, "ConnectionRefusedError: [Errno 111]").describe() == (
        "no answer (ConnectionRefusedError: [Errno 111])"
    )
