"""The TLS traffic profiles on a provisioned gateway (kubernetes.gateway.kind: gateway): per certificate key type,
an HTTPS listener on the Gateway, its Secret and an HTTPRoute, made by the run and removed by it.

A Gateway terminates TLS on an HTTPS listener whose `tls.certificateRefs` name a `kubernetes.io/tls` Secret. For
each key type the TLS profiles use, the run adds the listener `gateway-sizer-<key type>` (port 443, hostname
`tls.<host>` or `tls-ecdsa.<host>` as on an HTTPProxy install, tls.py) with a Secret of its own in the run's
namespace (kubernetes.namespace; a certificate for that hostname, runner/certificates.py), which the listener names
across namespaces through the ReferenceGrant of k8s/manifests/rbac/gateway-api (so the runner creates and deletes
no Secret beside the provisioner's in the Gateway's namespace), and an HTTPRoute attached to that
listener that sends the hostname to the backend. The provisioner reconciles the changed Gateway (its Envoy
Service gains port 443). The listeners are recorded in the ContourDeployment's record (provisioned.Parameters)
before the patch that adds them and removed by undo and restore; the Secrets and routes are recorded as created
objects. Before a TLS profile is measured the run waits until Contour has programmed the listeners and accepted
the routes, and the platform checks the virtual host answers through the gateway.
"""

from __future__ import annotations

import time
from typing import Any

from runner.certificates import pem_pair
from runner.errors import PlatformError
from runner.platforms.kubernetes import gateway_object, provisioned
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.created import RunObjects
from runner.platforms.kubernetes.httproute import route_manifest, wait_route_accepted
from runner.platforms.kubernetes.objects import gateway_key, run_labels
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.tls import COMPONENT, fqdn_for, key_types, object_name, secret_manifest
from runner.profiles import TlsKey
from runner.scenario import Scenario

HTTPS_PORT = 443
PROGRAMMED_TIMEOUT_S = 120.0  # for Contour to program a new listener


def listener_name(key: TlsKey) -> str:
    return f"gateway-sizer-{key}"


class ListenerTls:
    """The TLS listeners, Secrets and routes of one run on a provisioned gateway: `create` at start, `wait_valid`
    before measuring; undone by the platform's undo. The same interface as tls.GatewayTls."""

    def __init__(self, scenario: Scenario, run_id: str, changes: ClusterChanges) -> None:
        self.scenario, self.run_id, self.changes = scenario, run_id, changes
        self.objects = RunObjects(changes)
        self.keys = key_types(scenario.profiles)
        envoy = scenario.envoy.workload
        self.gateway = gateway_key(envoy.namespace, envoy.name)

    def fqdn(self, key: TlsKey) -> str:
        return fqdn_for(self.scenario.load.host_header, key)

    def _parameters(self) -> provisioned.Parameters:
        ref = self.scenario.kubernetes.gateway
        for parameters in self.changes.parameters:
            if (parameters.gateway_namespace, parameters.gateway_name) == (ref.namespace, ref.name):
                return parameters
        raise PlatformError(f"the run has no record of Gateway {ref.namespace}/{ref.name} (not claimed yet)")

    def create(self, cluster: Cluster) -> None:
        """For each key type: the Secret in the run's namespace, the HTTPS listener naming it, the HTTPRoute;
        each recorded before it is made."""
        if not self.keys:
            return
        parameters = self._parameters()
        labels = run_labels(COMPONENT, self.run_id, self.gateway)
        namespace = self.scenario.kubernetes.namespace  # the run's own, where its ReferenceGrant lets the Gateway look
        listeners: list[dict[str, Any]] = []
        for key in self.keys:
            name, fqdn = object_name(self.run_id, key), self.fqdn(key)
            certificate, private_key = pem_pair(fqdn, key)
            self.objects.record("Secret", namespace, [name])
            self.objects.create_secret(cluster, secret_manifest(name, namespace, labels, certificate, private_key))
            reference = {"kind": "Secret", "name": name, "namespace": namespace}
            listeners.append(
                {
                    "name": listener_name(key),
                    "protocol": "HTTPS",
                    "port": HTTPS_PORT,
                    "hostname": fqdn,
                    "tls": {"mode": "Terminate", "certificateRefs": [reference]},
                    "allowedRoutes": {"namespaces": {"from": "All"}},
                }
            )
        provisioned.mark(cluster, parameters, self.run_id, self.changes.save)
        gateway_object.add_listeners(cluster, parameters, listeners, self.changes.save)
        for key in self.keys:
            name = object_name(self.run_id, key)
            body = route_manifest(self.scenario, self.run_id, self.gateway, name=name, hostname=self.fqdn(key),
                                  listener=listener_name(key), component=COMPONENT)  # fmt: skip
            self.objects.record("HTTPRoute", body["metadata"]["namespace"], [body["metadata"]["name"]])
            self.objects.create_custom(cluster, body)

    def wait_valid(self, cluster: Cluster, timeout_s: float = PROGRAMMED_TIMEOUT_S) -> None:
        """Return once Contour has programmed every listener of the run and accepted its routes; PlatformError
        naming the listener's condition at the deadline."""
        if not self.keys:
            return
        parameters = self._parameters()
        deadline = time.monotonic() + timeout_s
        wanted = {listener_name(key) for key in self.keys}
        while True:
            status = gateway_object.listener_status(cluster, parameters)
            problems = {name: problem for name in sorted(wanted) if (problem := status.get(name, "no status yet"))}
            if not problems:
                break
            if time.monotonic() > deadline:
                name, problem = next(iter(problems.items()))
                raise PlatformError(
                    f"Contour has not programmed listener {name} of {parameters.gateway} in {timeout_s:.0f} s "
                    f"({problem})",
                    "check the Gateway's status (kubectl describe gateway) and Contour's log",
                )
            time.sleep(provisioned.POLL_S)
        backend = self.scenario.backend.workload.namespace
        for key in self.keys:
            wait_route_accepted(cluster, backend, object_name(self.run_id, key), max(1.0, deadline - time.monotonic()))
