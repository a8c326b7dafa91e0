"""The fleet of a run, chosen once by its install (classic or a provisioned Gateway) and its target (a sizing fleet
or the production gateway itself): one implementation per shape (fleet.py)."""

from __future__ import annotations

from runner.errors import UsageError
from runner.platforms.kubernetes.fleet import EnvoyFleet
from runner.platforms.kubernetes.fleet_live import ClassicLive, ProvisionedLive
from runner.platforms.kubernetes.originals import ClusterChanges
from runner.platforms.kubernetes.sizing_copy import ClassicSizing
from runner.platforms.kubernetes.sizing_gateway import ProvisionedSizing
from runner.scenario import Scenario

SHAPES: dict[tuple[bool, str], type[EnvoyFleet]] = {
    (False, "sizing"): ClassicSizing,
    (True, "sizing"): ProvisionedSizing,
    (False, "live"): ClassicLive,
    (True, "live"): ProvisionedLive,
}
LIVE_FLAG = "--live"


def fleet_for(scenario: Scenario, run_id: str, changes: ClusterChanges, *, live: bool = False) -> EnvoyFleet:
    """The run's fleet. UsageError (one line, before anything is read or changed) for `kubernetes.target: live`
    unless the command line said so too (`live`): a scenario file alone never sizes the production gateway."""
    k8s = scenario.kubernetes
    if k8s.live and not live:
        raise UsageError(
            f"kubernetes.target: live changes the production gateway itself ({describe_gateway(scenario)}), and the "
            f"command line did not say {LIVE_FLAG}",
            f"size a sizing fleet beside it (kubernetes.target: sizing, the default), or add {LIVE_FLAG} to the "
            "command line",
        )
    return SHAPES[(k8s.gateway.provisioned, k8s.target)](scenario, run_id, changes)


def describe_gateway(scenario: Scenario) -> str:
    """The production gateway as a person names it: `Gateway projectcontour/contour` or `projectcontour/envoy`."""
    ref, envoy = scenario.kubernetes.gateway, scenario.envoy.workload
    return f"Gateway {ref.namespace}/{ref.name}" if ref.provisioned else f"Envoy {envoy.namespace}/{envoy.name}"
