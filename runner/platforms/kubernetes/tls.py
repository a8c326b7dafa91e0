"""The TLS traffic profiles on Kubernetes: per certificate key type, a Secret and a root HTTPProxy that the
run creates and removes.

Contour terminates TLS for an HTTPProxy whose `virtualhost.tls.secretName` names a `kubernetes.io/tls`
Secret of its namespace. Two root HTTPProxies may not claim one fqdn, so the run's proxy has its own:
`tls.<host>` (RSA-2048) or `tls-ecdsa.<host>` (ECDSA P-256), <host> being the scenario's Host header. It
routes `/` to the Services that the test bed's HTTPProxy for <host> routes to (read from it, not assumed),
in that proxy's namespace, with its ingress class. The certificate is made for the fqdn
(runner/certificates.py).

Each object is named per run (`gateway-sizer-tls-rsa-2048-1a2b3c4d`), labelled like the run's Locust
objects, recorded in the run's ClusterChanges before it is created, and deleted by undo and restore
(originals.delete_created). With the gateway's Lease held, other TLS proxies labelled with the gateway are
a killed run's leftovers: they are deleted first (with their Secrets), as they would claim the same fqdn.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from runner.certificates import pem_pair
from runner.errors import PlatformError, UsageError
from runner.platforms.kubernetes.connection import Cluster, call
from runner.platforms.kubernetes.created import RunObjects, list_proxies, proxy_reader, wait_proxies_gone
from runner.platforms.kubernetes.objects import (
    COMPONENT_LABEL,
    GATEWAY_LABEL,
    MANAGED_BY,
    TestbedRoute,
    find_route,
    gateway_key,
    host_of,
    proxy_manifest,
    proxy_problem,
    run_hash,
    run_labels,
)
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.profiles import TlsKey, TrafficProfile
from runner.scenario import Scenario

COMPONENT = "gateway-sizer-tls"  # the value of COMPONENT_LABEL, and the start of every object's name
FQDN_LABELS: dict[TlsKey, str] = {"rsa-2048": "tls", "ecdsa-p256": "tls-ecdsa"}  # tls.<host>, tls-ecdsa.<host>
VALID_TIMEOUT_S = 120.0  # for Contour to mark the proxies valid
POLL_S = 1.0
MAX_FQDN = 253


def fqdn_for(host_header: str, key: TlsKey) -> str:
    """The TLS proxy's own fqdn for a key type: `tls.<host>` or `tls-ecdsa.<host>`."""
    name = f"{FQDN_LABELS[key]}.{host_of(host_header)}"
    if len(name) > MAX_FQDN:
        raise UsageError(
            f"load.host_header is too long for the TLS profiles' fqdn {name[:40]}... ({len(name)} > {MAX_FQDN})",
            f"use a host name of at most {MAX_FQDN - len(FQDN_LABELS[key]) - 1} characters",
        )
    return name


def tls_url(gateway_url: str) -> str:
    """Where TLS profiles send: port 443 of the gateway URL's host (Contour's Envoy Service: 443 -> 8443)."""
    host = urlsplit(gateway_url).hostname or ""
    return f"https://[{host}]" if ":" in host else f"https://{host}"


def object_name(run_id: str, key: TlsKey) -> str:
    """The Secret's and the HTTPProxy's name: `gateway-sizer-tls-<key type>-<run hash>`."""
    return f"{COMPONENT}-{key}-{run_hash(run_id)}"


def key_types(profiles: Iterable[TrafficProfile]) -> tuple[TlsKey, ...]:
    """The certificate key types the TLS profiles need, in the order they first appear."""
    return tuple(dict.fromkeys(p.tls_key for p in profiles if p.tls))


def secret_manifest(name: str, namespace: str, labels: dict[str, str], certificate: bytes, key: bytes) -> dict:
    """A `kubernetes.io/tls` Secret holding a PEM certificate and key."""
    data = {"tls.crt": certificate, "tls.key": key}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


class GatewayTls:
    """The TLS objects of one run: created at start (leftovers of killed runs removed first), checked
    valid, removed by the platform's undo."""

    def __init__(self, scenario: Scenario, run_id: str, changes: ClusterChanges) -> None:
        self.scenario = scenario
        self.run_id = run_id
        self.objects = RunObjects(changes)
        self.keys = key_types(scenario.profiles)
        envoy = scenario.envoy.workload
        self.gateway = gateway_key(envoy.namespace, envoy.name)
        self.route: TestbedRoute | None = None

    @property
    def labels(self) -> dict[str, str]:
        return run_labels(COMPONENT, self.run_id, self.gateway)

    def fqdn(self, key: TlsKey) -> str:
        return fqdn_for(self.scenario.load.host_header, key)

    def create(self, cluster: Cluster) -> None:
        """For each key type the profiles need: a certificate for its fqdn, the Secret and the HTTPProxy,
        each recorded before it is created (the proxy first, so that undo deletes it before its Secret)."""
        if not self.keys:
            return
        host = host_of(self.scenario.load.host_header)
        self.route = route = find_route(cluster, self.scenario.backend.workload.namespace, host)
        self.remove_leftovers(cluster)
        for key in self.keys:
            name, fqdn = object_name(self.run_id, key), self.fqdn(key)
            certificate, private_key = pem_pair(fqdn, key)
            self.objects.record("HTTPProxy", route.namespace, [name])
            self.objects.record("Secret", route.namespace, [name])
            self.objects.create_secret(
                cluster, secret_manifest(name, route.namespace, self.labels, certificate, private_key)
            )
            self.objects.create_proxy(cluster, proxy_manifest(name, self.labels, fqdn, route))

    def wait_valid(self, cluster: Cluster, timeout_s: float = VALID_TIMEOUT_S) -> None:
        """Return once Contour has marked every TLS proxy of the run valid; PlatformError at the deadline."""
        if self.route is None:
            return
        namespace = self.route.namespace
        pending = {object_name(self.run_id, key) for key in self.keys}
        deadline = time.monotonic() + timeout_s
        problems: dict[str, str] = {}
        while True:
            for name in sorted(pending):
                found: Any = call(f"read HTTPProxy {namespace}/{name}", proxy_reader(cluster, namespace), name)
                status = found.get("status") or {}
                if status.get("currentStatus") == "valid":
                    pending.discard(name)
                else:
                    problems[name] = proxy_problem(status)
            if not pending:
                return
            if time.monotonic() >= deadline:
                name = sorted(pending)[0]
                raise PlatformError(
                    f"Contour has not marked HTTPProxy {namespace}/{name} valid in {timeout_s:.0f} s "
                    f"({problems[name]})",
                    f"check Contour's log and that it serves namespace {namespace} and its ingress class",
                )
            time.sleep(POLL_S)

    def remove_leftovers(self, cluster: Cluster) -> list[str]:
        """Delete the TLS proxies labelled with this gateway, and their Secrets: with the gateway's Lease
        held, they are a killed run's (or this run's earlier attempt's). Returns what was deleted."""
        if self.route is None:
            return []
        namespace = self.route.namespace
        leftovers = list_proxies(cluster, namespace, {**MANAGED_BY, GATEWAY_LABEL: self.gateway,
                                                      COMPONENT_LABEL: COMPONENT})  # fmt: skip
        names = [item["metadata"]["name"] for item in leftovers]
        secrets = [(((item.get("spec") or {}).get("virtualhost") or {}).get("tls") or {}).get("secretName")
                   for item in leftovers]  # fmt: skip
        for name in names:
            self.objects.delete(cluster, "HTTPProxy", namespace, name)
        wait_proxies_gone(cluster, namespace, names)  # each proxy gone before its Secret
        deleted = [f"HTTPProxy {namespace}/{name}" for name in names]
        for secret in secrets:
            if secret and secret.startswith(f"{COMPONENT}-"):  # never a Secret gateway-sizer does not name
                self.objects.delete(cluster, "Secret", namespace, secret)
                deleted.append(f"Secret {namespace}/{secret}")
        return deleted
