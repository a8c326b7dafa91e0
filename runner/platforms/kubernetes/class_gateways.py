"""The Gateways a ContourDeployment sizes: every Gateway of every GatewayClass that names it. Contour's gateway
provisioner renders each one's Envoy from it whenever it reconciles that Gateway (at any update of it), so while a
live run has changed the ContourDeployment, a Gateway created in one of those classes gets the run's sizing.

- A live run starts only when its own Gateway is the one (provisioned.find; another class naming the
  ContourDeployment is refused by gateway_class.py).
- Between configurations, before each change of the ContourDeployment, the run lists them again
  (fleet_live.ProvisionedLive.size): one created since stops the run (StopRun, one line naming it); the run
  restores as on any failure and keeps what it measured.
- Restore updates each of them once the ContourDeployment is back, so that the provisioner renders every one of
  their Envoys again from it, and says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from runner.errors import SizerError, StopRun
from runner.platforms.kubernetes.connection import Cluster, NotFoundError
from runner.platforms.kubernetes.findings import Finding
from runner.platforms.kubernetes.gateway_class import SIZING_CLASS_DOCS, naming_classes
from runner.platforms.kubernetes.gateway_object import gateway_api, touch


class RunParameters(Protocol):
    """What a live run records of its ContourDeployment (namespace, name) and Gateway (provisioned.Parameters)."""

    namespace: str
    name: str
    gateway_namespace: str
    gateway_name: str

    @property
    def gateway(self) -> str: ...


@dataclass(order=True)
class SizedGateway:
    """A Gateway whose Envoy a ContourDeployment sizes, with its class; a gateway_object.GatewayRecord (touch takes
    it), with none of the run's listeners."""

    gateway_namespace: str
    gateway_name: str
    class_name: str = field(compare=False)
    listeners: list[str] = field(default_factory=list, compare=False)

    @property
    def gateway(self) -> str:
        return f"Gateway {self}"

    def __str__(self) -> str:
        return f"{self.gateway_namespace}/{self.gateway_name}"


def sized_by(cluster: Cluster, parameters: tuple[str, str]) -> list[SizedGateway]:
    """Every Gateway of every GatewayClass that names the ContourDeployment (namespace, name), sorted by name."""
    classes = gateway_api(cluster, "list GatewayClasses", "gatewayclasses", None).get("items", [])
    named = set(naming_classes(classes, parameters))
    found = []
    for item in gateway_api(cluster, "list Gateways", "gateways", None).get("items", []):
        class_name = str((item.get("spec") or {}).get("gatewayClassName", ""))
        if class_name in named:
            found.append(SizedGateway(str(item["metadata"]["namespace"]), str(item["metadata"]["name"]), class_name))
    return sorted(found)


def others(cluster: Cluster, parameters: tuple[str, str], own: tuple[str, str]) -> list[SizedGateway]:
    """The Gateways the ContourDeployment sizes besides `own` (namespace, name)."""
    return [found for found in sized_by(cluster, parameters) if (found.gateway_namespace, found.gateway_name) != own]


def joined_finding(joined: list[SizedGateway], parameters: tuple[str, str], gateway: str) -> Finding | None:
    """What a live run says of Gateways its ContourDeployment came to size during the run (`gateway`: the run's)."""
    if not joined:
        return None
    which = ", ".join(f"{found} (GatewayClass {found.class_name})" for found in joined)
    return Finding(
        f"Gateway(s) {which} created during the run: Contour's provisioner sizes their Envoy from ContourDeployment "
        f"{'/'.join(parameters)}, which the run has changed",
        f"the run stops and puts it back, which renders their Envoy again; to size {gateway} live, give it a "
        f"GatewayClass and ContourDeployment of its own ({SIZING_CLASS_DOCS}), or size a sizing fleet "
        "(kubernetes.target: sizing, the default)",
    )


def stop_if_joined(cluster: Cluster, parameters: RunParameters) -> None:
    """StopRun (one line naming them) when the run's ContourDeployment sizes a Gateway besides the run's own: one
    created since the run started, which provisioned.find made sure of."""
    where = (parameters.namespace, parameters.name)
    joined = others(cluster, where, (parameters.gateway_namespace, parameters.gateway_name))
    finding = joined_finding(joined, where, parameters.gateway)
    if finding is not None:
        raise StopRun(finding.problem, finding.fix)


def nudge(cluster: Cluster, parameters: RunParameters) -> list[str]:
    """Update every Gateway the ContourDeployment sizes (gateway_object.touch), so that the provisioner renders each
    one's Envoy again from it as it is now; one line naming those updated, one naming any that could not be."""
    nudged, refused = [], []
    for found in sized_by(cluster, (parameters.namespace, parameters.name)):
        try:
            touch(cluster, found)
        except NotFoundError:
            continue  # deleted meanwhile, and its Envoy with it
        except SizerError as error:
            refused.append(f"{found} ({error})")
            continue
        nudged.append(str(found))
    lines = []
    if nudged:
        what = ", ".join(nudged)
        where = f"ContourDeployment {parameters.namespace}/{parameters.name}"
        lines.append(f"nudged Gateway(s) {what}: the provisioner renders their Envoy again from {where}")
    if refused:
        lines.append(
            f"could not nudge Gateway(s) {'; '.join(refused)}: update each (add and remove an annotation) so that the "
            "provisioner renders its Envoy again"
        )
    return lines
