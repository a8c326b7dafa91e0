"""The leader-election Lease of the Contour that Contour's gateway provisioner makes for a sizing fleet's Gateway.

The provisioner starts that Contour with `--leader-election-resource-name=leader-elect-<gateway>`, so Contour
keeps a coordination.k8s.io Lease of that name in the Gateway's namespace; when the Gateway goes, the provisioner
deletes the Contour but never its Lease (Contour only releases it on its way out). The run records the Lease with
its Gateway before creating that Gateway (sizing_gateway.py), and undo and `restore` delete it once the Contour is
gone, its pods included: a Contour still running makes its Lease again at its next renewal. Contour writes it
without labels, so it is known by its name alone, which carries the run's hash: `leader-elect-gateway-sizer-<run
hash>` (production's Gateway's Contour's Lease never matches).
"""

from __future__ import annotations

import re
import time
from typing import Any

from kubernetes import client

from runner.errors import PlatformError
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call

KIND = "Lease"
PREFIX = "leader-elect-"  # Contour's provisioner: the Lease is "leader-elect-" + the Gateway's name
RUN_LEASE = re.compile(r"leader-elect-gateway-sizer-[0-9a-f]{8}")  # a sizing fleet's (sizing_gateway.copy_name)
CONTOUR_GONE_TIMEOUT_S = 90.0  # the provisioner's Contour pods have a 30 s grace period
POLL_S = 1.0


def lease_name(gateway: str) -> str:
    """The Lease the Contour of the Gateway named `gateway` holds."""
    return f"{PREFIX}{gateway}"


def delete(cluster: Cluster, namespace: str, name: str, timeout_s: float = CONTOUR_GONE_TIMEOUT_S) -> None:
    """Delete the Lease `namespace/name` once the Contour that holds it is gone: PlatformError at once while the
    provisioner's Contour Deployment is still there, or once its pods are still there after `timeout_s`;
    NotFoundError when the Lease is gone already."""
    contour = f"contour-{name.removeprefix(PREFIX)}"  # the provisioner's Contour for the Gateway
    try:
        call(f"read Deployment {namespace}/{contour}", cluster.apps.read_namespaced_deployment, contour, namespace)
    except NotFoundError:
        pass
    else:
        raise PlatformError(f"Deployment {namespace}/{contour} is still there: its Lease {namespace}/{name} is kept")
    deadline = time.monotonic() + timeout_s
    selector = f"app={contour}"  # the provisioner's Contour pod selector
    while True:
        found: Any = call(
            f"list pods in {namespace}", cluster.core.list_namespaced_pod, namespace, label_selector=selector
        )
        pods = found.items
        if not pods:
            break
        if time.monotonic() > deadline:
            names = ", ".join(p.metadata.name for p in pods)
            raise PlatformError(
                f"Contour's pod(s) {names} still run {timeout_s:.0f} s after the provisioner deleted "
                f"{contour}: its Lease {namespace}/{name} is kept"
            )
        time.sleep(POLL_S)
    leases = client.CoordinationV1Api(cluster.api)
    call(f"delete Lease {namespace}/{name}", leases.delete_namespaced_lease, name, namespace)
