"""What the kubernetes platform measures and where its own pods run (`kubernetes.target`, `kubernetes.sizing`,
`kubernetes.worker_placement`).

`target: sizing` (the default) measures a sizing fleet: Envoy pods of the run's own, copied from the production
gateway's (runner/platforms/kubernetes/fleet.py), which no user's traffic reaches; production's objects are only
read. `target: live` changes the production gateway itself, and only when the command line says so too
(`--live`): a scenario file alone cannot.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict

from runner.quantities import short_repr

MAX_LABELS = 20  # entries of a node selector or of the fleet's extra labels
# A label key: an optional DNS-subdomain prefix and a name of 1-63 characters (Kubernetes' rules).
_LABEL_NAME = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([a-z0-9.-]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")


def _labels(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of label keys to values, got {short_repr(value)}")
    labels: dict[str, str] = {}
    for key, item in value.items():
        text = str(item) if isinstance(item, int | float) and not isinstance(item, bool) else item
        if not isinstance(key, str) or not _LABEL_KEY.match(key):
            raise ValueError(f"{short_repr(key)} is not a label key (prefix/name, the name 1-63 characters)")
        if not isinstance(text, str) or not _LABEL_VALUE.match(text):
            raise ValueError(f"{key}: {short_repr(item)} is not a label value (at most 63 characters)")
        labels[key] = text
    return labels


def _mapping_size(value: Any) -> Any:
    if isinstance(value, dict) and len(value) > MAX_LABELS:
        raise ValueError(f"{len(value)} labels; at most {MAX_LABELS}")
    return value


# Label keys to values: a node selector, or labels to add (the validators run last to first: size, then each label)
LabelMap = Annotated[dict[str, str], BeforeValidator(_labels), BeforeValidator(_mapping_size)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)


class SizingSpec(_Model):
    """The sizing fleet: where its pods run and the labels they carry beside the run's own.

    `node_selector`: the nodes its pods may run on (default: the node of the production gateway's first Envoy pod,
    `kubernetes.io/hostname`); production's tolerations come with the copied pod template. `labels`: added to its
    pods (what a PodMonitor of your Prometheus selects); refused when production's Service would select them."""

    node_selector: LabelMap | None = None
    labels: LabelMap = {}


class WorkerPlacement(_Model):
    """Where the Locust workers run: on the nodes `node_selector` names, or (default, None) preferably on nodes
    that run none of the measured Envoy pods (a preferred pod anti-affinity: a one-node cluster still schedules)."""

    node_selector: LabelMap | None = None


Target = Literal["sizing", "live"]


def check_target(platform: str, target: Target, threads: tuple[Any, ...], sizes_contour: bool, classic: bool) -> None:
    """ValueError for what the target cannot do: `production` threads off kubernetes, and Contour's resources on
    a classic sizing fleet (its Contour is production's)."""
    if platform != "kubernetes":
        if "production" in threads:
            raise ValueError(
                "envoy.concurrency: production is the production gateway's thread count (platform: kubernetes); "
                "use auto, default or a number"
            )
        return
    if target == "sizing" and classic and sizes_contour:
        raise ValueError(
            "contour.resources: the sizing fleet shares production's Contour, which a run never changes; leave "
            "contour.resources out, or size the production gateway itself (kubernetes.target: live, and --live)"
        )
