"""What the cluster's Gateway API and a provisioned Gateway's class say before the run changes anything
(provisioned.find reads them; each a Finding, findings.py):

- the Gateway API CRDs serve v1 (Gateway API 1.0 or later): before it they serve v1beta1 only, the run's v1
  reads answer 404, and the Gateway would read as missing;
- the GatewayClass is `Accepted` by its controller, and its `SupportedVersion` condition (Gateway API 1.1 or
  later; when set) is True, i.e. the controller supports the installed CRDs;
- no other GatewayClass names the same ContourDeployment: Contour sizes the Envoy of every Gateway of every class
  that names it, so those Gateways would take the run's sizing at their next reconcile;
- a Gateway that sets `spec.infrastructure.parametersRef` (Gateway API 1.1) is warned: Contour reads only its
  class's `parametersRef`, so the run sizes the class's ContourDeployment;
- a class that names no ContourDeployment and whose Gateway has no Envoy the provisioner made is a statically
  installed Contour: the classic mode (kubernetes.gateway.kind: httpproxy) sizes its Envoy.
"""

from __future__ import annotations

from typing import Any

from runner.errors import UsageError
from runner.platforms.kubernetes import workloads
from runner.platforms.kubernetes.connection import Cluster
from runner.platforms.kubernetes.findings import Finding, settle
from runner.platforms.kubernetes.gateway_object import GATEWAY_GROUP, GATEWAY_VERSION, gateway_api
from runner.scenario import Scenario

CONTOUR_BUNDLE = "v1.3.0"  # the Gateway API bundle Contour supports (internal/provisioner/.../gatewayclass.go)
SIZING_CLASS_DOCS = "docs/kubernetes.md#a-gatewayclass-of-its-own-for-sizing"


def crd_finding(versions: list[str]) -> Finding | None:
    """A refusal when the Gateway API group is missing or does not serve v1."""
    if GATEWAY_VERSION in versions:
        return None
    if not versions:
        return Finding(
            f"the cluster serves no Gateway API ({GATEWAY_GROUP}): kubernetes.gateway.kind: gateway sizes a Gateway",
            "install the Gateway API CRDs and Contour's gateway provisioner, or size Contour's Envoy with "
            "kubernetes.gateway.kind: httpproxy (the classic mode)",
        )
    return Finding(
        f"the cluster's Gateway API CRDs serve {', '.join(versions)}, not {GATEWAY_VERSION} (Gateway API before 1.0)",
        f"upgrade them to Gateway API 1.0 or later (Contour supports the bundle {CONTOUR_BUNDLE})",
    )


def refuse_without_v1(cluster: Cluster) -> None:
    """UsageError (one line) unless the cluster serves the Gateway API's v1."""
    settle(filter(None, [crd_finding(cluster.served_versions(GATEWAY_GROUP))]))


def _condition(found: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (found.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _said(condition: dict[str, Any]) -> str:
    detail = " ".join(str(condition.get("message") or "").split())[:200]
    return f"{condition.get('status')}, {condition.get('reason') or 'no reason'}{': ' + detail if detail else ''}"


def class_findings(gateway_class: dict[str, Any]) -> list[Finding]:
    """Refusals for a GatewayClass its controller has not Accepted, or whose SupportedVersion is not True."""
    name = (gateway_class.get("metadata") or {}).get("name")
    found: list[Finding] = []
    accepted = _condition(gateway_class, "Accepted")
    if accepted is None or accepted.get("status") != "True":
        said = _said(accepted) if accepted else "no status from its controller"
        found.append(
            Finding(
                f"GatewayClass {name} is not Accepted ({said})",
                "fix what its condition names; check that the gateway provisioner runs "
                "(kubectl get gatewayclass; the provisioner's log)",
            )
        )
    supported = _condition(gateway_class, "SupportedVersion")
    if supported is not None and supported.get("status") != "True":
        found.append(
            Finding(
                f"GatewayClass {name}: its controller does not support the installed Gateway API CRDs "
                f"(SupportedVersion {_said(supported)})",
                f"install the Gateway API bundle its controller supports (Contour: {CONTOUR_BUNDLE})",
            )
        )
    return found


def _names(ref: dict[str, Any], parameters: tuple[str, str]) -> bool:
    named = (ref.get("group"), ref.get("kind"), ref.get("namespace"), ref.get("name"))
    return named == ("projectcontour.io", "ContourDeployment", *parameters)


def naming_classes(classes: list[dict[str, Any]], parameters: tuple[str, str]) -> list[str]:
    """The GatewayClasses whose parametersRef names the ContourDeployment (namespace, name)."""
    return sorted(
        str(item["metadata"]["name"])
        for item in classes
        if _names((item.get("spec") or {}).get("parametersRef") or {}, parameters)
    )


def sharing_classes(classes: list[dict[str, Any]], own: str, parameters: tuple[str, str]) -> list[str]:
    """The other GatewayClasses whose parametersRef names the ContourDeployment (namespace, name)."""
    return [name for name in naming_classes(classes, parameters) if name != own]


def shared_finding(classes: list[str], own: str, parameters: tuple[str, str], gateway: str) -> Finding | None:
    if not classes:
        return None
    namespace, name = parameters
    return Finding(
        f"ContourDeployment {namespace}/{name} of GatewayClass {own} is also named by GatewayClass(es) "
        f"{', '.join(classes)}: Contour sizes every Gateway of theirs from it too",
        f"give {gateway} a GatewayClass and ContourDeployment of its own ({SIZING_CLASS_DOCS})",
    )


def infrastructure_finding(gateway: dict[str, Any], parameters: tuple[str, str]) -> Finding | None:
    """A warning for a Gateway whose spec.infrastructure.parametersRef Contour ignores."""
    ref = ((gateway.get("spec") or {}).get("infrastructure") or {}).get("parametersRef")
    if not ref:
        return None
    metadata = gateway.get("metadata") or {}
    return Finding(
        f"Gateway {metadata.get('namespace')}/{metadata.get('name')} sets spec.infrastructure.parametersRef "
        f"({ref.get('kind')} {ref.get('name')}), which Contour ignores",
        f"the run sizes its class's ContourDeployment {'/'.join(parameters)}, as Contour does",
        refuse=False,
    )


def class_checks(gateway: dict[str, Any], gateway_class: dict[str, Any], parameters: tuple[str, str]) -> list[Finding]:
    """The class's conditions and the Gateway's ignored infrastructure.parametersRef (a Gateway of the run's own
    made from this class's ContourDeployment meets them too)."""
    return [*class_findings(gateway_class), *filter(None, [infrastructure_finding(gateway, parameters)])]


def shared_checks(cluster: Cluster, gateway: str, own: str, parameters: tuple[str, str]) -> list[Finding]:
    """The refusal of a ContourDeployment that other GatewayClasses name too (a live run would change it);
    `gateway`: "Gateway <namespace>/<name>"."""
    classes = gateway_api(cluster, "list GatewayClasses", "gatewayclasses", None).get("items", [])
    return list(filter(None, [shared_finding(sharing_classes(classes, own, parameters), own, parameters, gateway)]))


def no_parameters(cluster: Cluster, scenario: Scenario, class_name: str) -> UsageError:
    """The refusal of a class that names no ContourDeployment: a statically installed Contour when the provisioner
    made no Envoy for the Gateway (pointed at the classic mode), else: give the class one."""
    ref = scenario.kubernetes.gateway
    try:
        workloads.find(cluster, scenario.envoy.workload, "envoy")
    except UsageError:
        return UsageError(
            f"GatewayClass {class_name} names no ContourDeployment and the gateway provisioner made no Envoy for "
            f"Gateway {ref.namespace}/{ref.name} (no {scenario.envoy.workload.name}): a statically installed Contour "
            "serves it",
            "size that Contour's Envoy with kubernetes.gateway.kind: httpproxy (the classic mode; envoy.workload "
            "names its DaemonSet or Deployment, projectcontour/envoy in Contour's quickstart)",
        )
    return UsageError(
        f"GatewayClass {class_name} names no ContourDeployment (spec.parametersRef), where the run sets Envoy's "
        "resources",
        f"give it one ({SIZING_CLASS_DOCS})",
    )
