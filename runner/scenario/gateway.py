"""How the gateway under test is installed (`kubernetes.gateway`), and the names a provisioned one implies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner.scenario.fields import DnsLabel, DnsSubdomain

GATEWAY_CONTROLLER = "projectcontour.io/gateway-controller"  # Contour's gateway provisioner's default


class GatewayRef(BaseModel):
    """How the gateway under test is installed. `httpproxy`: Contour's Envoy workload is patched directly and
    traffic routed by the test bed's HTTPProxy. `gateway`: the Gateway API Gateway `namespace/name`, whose Contour
    and Envoy Contour's gateway provisioner made and owns: sized through the ContourDeployment its GatewayClass
    names, routed by an HTTPRoute the run creates (runner/platforms/kubernetes/provisioned.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)

    kind: Literal["httpproxy", "gateway"] = "httpproxy"
    namespace: DnsLabel = "projectcontour"
    name: DnsSubdomain = "contour"
    controller_name: Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-z0-9.-]+/[A-Za-z0-9/._-]+$")] = (
        GATEWAY_CONTROLLER
    )
    # TLS profiles add HTTPS listeners on port 443 to the Gateway: behind a LoadBalancer, open to the world for the run
    add_tls_listeners: bool = False

    @property
    def provisioned(self) -> bool:
        return self.kind == "gateway"

    def refuse_tls_listeners(self, tls_profiles: list[str]) -> None:
        """ValueError when TLS profiles would add listeners to the Gateway without `add_tls_listeners: true`."""
        if tls_profiles and not self.add_tls_listeners:
            raise ValueError(
                f"profiles {', '.join(tls_profiles)}: a TLS profile adds an HTTPS listener on port 443 to Gateway "
                f"{self.namespace}/{self.name}, which a LoadBalancer in front opens to the world for the run; set "
                "kubernetes.gateway.add_tls_listeners: true to allow it, or leave the TLS profiles out"
            )


def provisioned_names(data: Any) -> Any:
    """For a provisioned gateway (kubernetes.gateway.kind: gateway), the names the provisioner gives: Envoy
    `envoy-<gateway>` and Contour `contour-<gateway>` in the Gateway's namespace, reached at the Service
    `envoy-<gateway>`, with Envoy's own worker count (its args are the provisioner's). A scenario that sets
    one of them otherwise is refused."""
    if not isinstance(data, dict) or not isinstance(data.get("kubernetes"), dict):
        return data
    gateway = data["kubernetes"].get("gateway")
    if not isinstance(gateway, dict) or gateway.get("kind") != "gateway":
        return data
    namespace, name = gateway.get("namespace", "projectcontour"), gateway.get("name", "contour")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return data  # the field's own validation says what is wrong
    derived = {
        ("envoy", "workload"): {"namespace": namespace, "name": f"envoy-{name}", "container": "envoy"},
        ("envoy", "concurrency"): "default",
        ("envoy", "guaranteed_qos"): False,
        ("contour", "workload"): {"namespace": namespace, "name": f"contour-{name}", "container": "contour"},
        ("kubernetes", "gateway_url"): f"http://envoy-{name}.{namespace}.svc.cluster.local",
    }
    why = {
        "workload": "the provisioner names it",
        "concurrency": "the provisioner sets Envoy's args; Envoy runs one worker per CPU of its node",
        "guaranteed_qos": "the provisioner sizes Envoy's sidecar and init container, so its pods are Burstable",
        "gateway_url": "the provisioner names the Envoy Service",
    }
    data = dict(data)
    for (section, key), value in derived.items():
        part = data.get(section)
        part = dict(part) if isinstance(part, dict) else {} if part is None else part
        if not isinstance(part, dict):
            return data
        given = part.get(key)
        if given is not None and not _same(given, value):
            raise ValueError(
                f"{section}.{key}: {given!r} cannot be set with kubernetes.gateway.kind: gateway ({why[key]}); "
                f"leave it out (it is {value!r})"
            )
        part[key] = value
        data[section] = part
    return data


def _same(given: Any, derived: Any) -> bool:
    """A value the scenario gives equals the one derived for a provisioned gateway (a workload's kind may be set)."""
    if isinstance(derived, dict) and isinstance(given, dict):
        return all(given.get(k) == v for k, v in derived.items()) and set(given) <= {*derived, "kind"}
    if isinstance(given, list | tuple) and len(given) == 1:  # an axis of one value: `concurrency: [default]`
        given = given[0]
    return bool(given == derived)
