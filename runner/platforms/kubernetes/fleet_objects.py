"""What the sizing fleets share: the configuration they are created with, the scenario as the run's own parts see
a fleet (its gateway, Envoy workload and URL in place of production's), and a killed run's fleet found and deleted.

A fleet's objects carry the run's labels with the production gateway's key (objects.run_labels): the run holds
that gateway's Lease, so any other object of the same component labelled with it is a killed run's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from runner.plan import Configuration
from runner.platforms.kubernetes.connection import Cluster, call
from runner.platforms.kubernetes.created import RunObjects
from runner.platforms.kubernetes.objects import (
    COMPONENT_LABEL,
    CUSTOM_KINDS,
    GATEWAY_LABEL,
    MANAGED_BY,
    label_selector,
    wait_gone,
)
from runner.platforms.kubernetes.workloads import Workload
from runner.scenario import Scenario, WorkloadRef
from runner.scenario.gateway import GatewayRef


def first_configuration(scenario: Scenario) -> Configuration:
    """What a fleet is created with: the scenario's first CPU and memory limit, replica count and thread count
    (the first configuration the plan lists; rounds may visit another first, which the fleet is then resized to)."""
    envoy = scenario.envoy
    cpu = envoy.cpu_cores[0]
    return Configuration(
        envoy_cpu_cores=cpu,
        envoy_memory_bytes=envoy.memory_bytes[0],
        envoy_concurrency=envoy.concurrency_for(cpu),
        backend_replicas=scenario.backend.replicas[0],
        envoy_replicas=envoy.replicas[0],
    )


def view_of(
    scenario: Scenario, envoy: Workload, url: str, gateway: GatewayRef | None = None, contour: Workload | None = None
) -> Scenario:
    """The scenario with a fleet's Envoy workload, URL and (a provisioned fleet) its Gateway and Contour."""
    ref = WorkloadRef(namespace=envoy.namespace, name=envoy.name, container=envoy.container, kind=envoy.kind)
    k8s = scenario.kubernetes.model_copy(update={"gateway_url": url, **({"gateway": gateway} if gateway else {})})
    update: dict[str, Any] = {"envoy": scenario.envoy.model_copy(update={"workload": ref}), "kubernetes": k8s}
    if contour is not None:
        contour_ref = WorkloadRef(
            namespace=contour.namespace, name=contour.name, container=contour.container, kind=contour.kind
        )
        update["contour"] = scenario.contour.model_copy(update={"workload": contour_ref})
    return scenario.model_copy(update=update)


def _listers(cluster: Cluster) -> dict[str, tuple[Callable[..., Any], Callable[..., Any]]]:
    return {
        "Deployment": (cluster.apps.list_namespaced_deployment, cluster.apps.read_namespaced_deployment),
        "Service": (cluster.core.list_namespaced_service, cluster.core.read_namespaced_service),
    }


def remove_leftovers(
    cluster: Cluster,
    objects: RunObjects,
    namespace: str,
    gateway: str,
    component: str,
    *,
    keep: str,
    kinds: tuple[str, ...] = ("Deployment", "Service"),
) -> list[str]:
    """Delete the objects of `kinds` in `namespace` (every namespace for a cluster-wide kind) labelled with the
    gateway and the component, but `keep` (this run's own): a killed run's fleet. Returns what was deleted, each
    gone before this returns."""
    selector = label_selector({**MANAGED_BY, GATEWAY_LABEL: gateway, COMPONENT_LABEL: component})
    deleted = []
    for kind in kinds:
        for name, where, read in _labelled(cluster, kind, namespace, selector):
            if name == keep:
                continue
            objects.delete(cluster, kind, where, name)
            wait_gone(read, f"{kind} {where}/{name}".replace(" /", " "))
            deleted.append(f"{kind} {name}")
    return deleted


def _labelled(cluster: Cluster, kind: str, namespace: str, selector: str) -> list[tuple[str, str, Callable[[], Any]]]:
    """(name, namespace, read) of each object of `kind` the label selector matches."""
    if kind in CUSTOM_KINDS:
        group, version, plural = CUSTOM_KINDS[kind]
        custom = cluster.custom
        if kind == "GatewayClass":  # cluster-wide
            found: Any = call(
                f"list {kind}es", custom.list_cluster_custom_object, group, version, plural, label_selector=selector
            )
            return [
                (
                    i["metadata"]["name"],
                    "",
                    functools.partial(
                        call, "read", custom.get_cluster_custom_object, group, version, plural, i["metadata"]["name"]
                    ),
                )
                for i in found.get("items", [])
            ]
        found = call(
            f"list {kind}s in {namespace}",
            custom.list_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            label_selector=selector,
        )
        return [
            (
                i["metadata"]["name"],
                namespace,
                functools.partial(
                    call,
                    "read",
                    custom.get_namespaced_custom_object,
                    group,
                    version,
                    namespace,
                    plural,
                    i["metadata"]["name"],
                ),
            )
            for i in found.get("items", [])
        ]
    list_them, read = _listers(cluster)[kind]
    items = call(f"list {kind}s in {namespace}", list_them, namespace, label_selector=selector).items
    return [
        (o.metadata.name, namespace, functools.partial(call, "read", read, o.metadata.name, namespace)) for o in items
    ]
