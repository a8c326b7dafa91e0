"""The install's shape `recommend` answers for: which Envoy workload, a DaemonSet or a Deployment, and how it is known.

In order: `--workload-kind` (the user says); the kind a Kubernetes run found (runner.model.EnvoyWorkload, recorded
also when the scenario said `auto`); the kind its scenario named. Otherwise (a local run, or a Kubernetes run
recorded before the kind was) it is Contour's quickstart, a DaemonSet `projectcontour/envoy`, and the output says
that this is assumed. `auto` never becomes a Deployment by default: a DaemonSet given an HPA and a PDB (what
`recommend` wrote until 2026-11) cannot use either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

from runner.errors import UsageError
from runner.model import RunSummary
from runner.quantities import short_repr
from runner.scenario import WorkloadRef

__all__ = ["KINDS", "Gateway", "GatewayKind", "gateway_of_run", "parse_kind"]

GatewayKind = Literal["Deployment", "DaemonSet"]
KINDS: dict[str, GatewayKind] = {"daemonset": "DaemonSet", "deployment": "Deployment"}
QUICKSTART = "Contour's quickstart runs Envoy as a DaemonSet"


class Gateway(BaseModel):
    """Where Contour's Envoy runs: the workload, its container, the labels that select its pods, its kind and
    where that came from (`assumed`: nothing said it); `pods`: how many it ran (a DaemonSet: its nodes), when a
    run recorded it; `provisioned_by`: what owns its manifest, when not the user (Contour's gateway provisioner)."""

    model_config = ConfigDict(frozen=True)

    namespace: str = "projectcontour"
    name: str = "envoy"
    container: str = "envoy"
    kind: GatewayKind = "DaemonSet"
    labels: dict[str, str] = {"app": "envoy"}
    source: str = "Contour's defaults"
    kind_source: str = f"assumed: {QUICKSTART}"
    assumed: bool = True
    pods: int | None = None
    provisioned_by: str | None = None

    @property
    def title(self) -> str:
        """ "DaemonSet projectcontour/envoy, container envoy" """
        return f"{self.kind} {self.namespace}/{self.name}, container {self.container}"

    @property
    def describe(self) -> str:
        """The shape and how it is known, with the option that changes it when it is assumed."""
        other = "Deployment" if self.kind == "DaemonSet" else "DaemonSet"
        change = f"; --workload-kind {other} for a {other} install" if self.assumed else ""
        return f"{self.title} ({self.source}; the kind {self.kind_source}{change})"


def parse_kind(text: str | None) -> GatewayKind | None:
    """--workload-kind: DaemonSet or Deployment (any case), None for `auto` or not given."""
    if text is None or text.strip() == "" or text.strip().lower() == "auto":
        return None
    kind = KINDS.get(text.strip().lower())
    if kind is None:
        raise UsageError(
            f"--workload-kind must be DaemonSet, Deployment or auto, got {short_repr(text)}",
            "e.g. --workload-kind DaemonSet (Contour's quickstart) or Deployment",
        )
    return kind


def _scenario_workload(run_dir: Path, run_id: str) -> WorkloadRef:
    path = run_dir / "scenario.yaml"
    try:
        raw = yaml.safe_load(path.read_text())
        return WorkloadRef.model_validate(raw["envoy"]["workload"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as error:
        raise UsageError(f"{path}: no readable envoy.workload ({type(error).__name__})", "re-run the sweep") from None


def gateway_of_run(run_dir: Path, summary: RunSummary, kind: GatewayKind | None = None) -> Gateway:
    """The Envoy workload to size: the one a Kubernetes run patched, else Contour's defaults; its kind as the
    module's docstring says."""
    if summary.platform != "kubernetes":
        gateway = Gateway()
    elif (found := summary.environment.envoy_workload) is not None:
        gateway = Gateway(
            namespace=found.namespace,
            name=found.name,
            container=found.container,
            kind=found.kind,
            labels=dict(found.selector) or {"app": found.name},
            source=f"run {summary.run_id}'s Envoy",
            kind_source="as the run found it",
            assumed=False,
            pods=found.pods,
            provisioned_by=found.provisioned_by,
        )
    else:
        ref = _scenario_workload(run_dir, summary.run_id)
        named = ref.kind != "auto"
        gateway = Gateway(
            namespace=ref.namespace,
            name=ref.name,
            container=ref.container,
            kind="DaemonSet" if ref.kind == "auto" else ref.kind,
            labels={"app": ref.name},
            source=f"run {summary.run_id}'s envoy.workload",
            kind_source="from its envoy.workload.kind"
            if named
            else f"assumed: the run recorded none (envoy.workload.kind: auto) and {QUICKSTART}",
            assumed=not named,
        )
    if kind is None:
        return gateway
    return gateway.model_copy(update={"kind": kind, "kind_source": "from --workload-kind", "assumed": False})
