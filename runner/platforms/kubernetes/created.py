"""Objects a run creates in the cluster (Secrets, HTTPProxies): recorded before they exist, deleted by undo.

Each object is written into the run's ClusterChanges before the API call that creates it, so that undo
and `gateway-sizer restore` delete it even when the runner is killed between the two; a Secret's record
also gets its uid once created, so undo deletes exactly that Secret. Used by the TLS profiles (tls.py) and
the memory model's routes (routes.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable
from typing import Any

from runner.errors import UsageError
from runner.platforms.kubernetes.connection import Cluster, ConflictError, NotFoundError, call
from runner.platforms.kubernetes.objects import CUSTOM_KINDS, GROUP, PLURAL, VERSION, label_selector, wait_gone
from runner.platforms.kubernetes.originals import ClusterChanges, NotOursError, delete_created


def proxy_reader(cluster: Cluster, namespace: str) -> Any:
    """`read(name)` of an HTTPProxy in `namespace`."""
    return functools.partial(cluster.custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL)


def list_proxies(cluster: Cluster, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The HTTPProxies in `namespace` that carry every one of `labels`."""
    found: Any = call(f"list HTTPProxies in {namespace}", cluster.custom.list_namespaced_custom_object,
                      GROUP, VERSION, namespace, PLURAL, label_selector=label_selector(labels))  # fmt: skip
    return list(found.get("items", []))


def wait_proxies_gone(cluster: Cluster, namespace: str, names: list[str]) -> None:
    """Return once every HTTPProxy in `names` is gone (its fqdn free for a new proxy); PlatformError naming
    the first one still there after objects.GONE_TIMEOUT_S."""
    for name in names:
        wait_gone(
            functools.partial(call, "read", proxy_reader(cluster, namespace), name), f"HTTPProxy {namespace}/{name}"
        )


class RunObjects:
    """The run's records of created objects, and the calls that create and delete them."""

    def __init__(self, changes: ClusterChanges) -> None:
        self.changes = changes

    def recorded(self, kind: str, namespace: str, name: str) -> dict[str, str] | None:
        wanted = (kind, namespace, name)
        return next((c for c in self.changes.created if (c["kind"], c["namespace"], c["name"]) == wanted), None)

    def record(self, kind: str, namespace: str, names: Iterable[str]) -> list[dict[str, str]]:
        """Record objects about to be created (saved once); returns their records."""
        records = []
        for name in names:
            record = self.recorded(kind, namespace, name)
            if record is None:
                record = {"kind": kind, "namespace": namespace, "name": name}
                self.changes.created.append(record)
            records.append(record)
        self.changes.save()
        return records

    def create_secret(self, cluster: Cluster, body: dict[str, Any]) -> None:
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            created = call(f"create Secret {namespace}/{name}", cluster.core.create_namespaced_secret, namespace, body)
        except ConflictError:  # a retried create whose first answer was lost: the name carries this run's hash
            return
        (record,) = self.record("Secret", namespace, [name])
        record["uid"] = str(created.metadata.uid)  # undo deletes exactly this Secret (it may not read one)
        self.changes.save()

    def create(self, cluster: Cluster, body: dict[str, Any]) -> None:
        """Create a recorded Deployment or Service; one that exists already must carry this run's labels."""
        kind, namespace, name = body["kind"], body["metadata"]["namespace"], body["metadata"]["name"]
        api: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "Deployment": (cluster.apps.create_namespaced_deployment, cluster.apps.read_namespaced_deployment),
            "Service": (cluster.core.create_namespaced_service, cluster.core.read_namespaced_service),
        }
        create, read = api[kind]
        try:
            call(f"create {kind} {namespace}/{name}", create, namespace, body)
        except ConflictError:  # there already: ours when a retried create's first attempt got through
            found: Any = call(f"read {kind} {namespace}/{name}", read, name, namespace)
            labels = found.metadata.labels or {}
            if any(labels.get(k) != v for k, v in body["metadata"]["labels"].items()):
                self.forget(kind, namespace, name)
                raise UsageError(
                    f"{kind} {namespace}/{name} exists and was not made by this run", "remove it"
                ) from None

    def create_proxy(self, cluster: Cluster, body: dict[str, Any]) -> None:
        """Create a recorded HTTPProxy; one that exists already must carry this run's labels."""
        self.create_custom(cluster, body)

    def create_custom(self, cluster: Cluster, body: dict[str, Any]) -> None:
        """Create a recorded custom object (objects.CUSTOM_KINDS, a cluster-wide one without a namespace); one
        that exists already must carry this run's labels."""
        kind, name = body["kind"], body["metadata"]["name"]
        namespace = body["metadata"].get("namespace", "")
        group, version, plural = CUSTOM_KINDS[kind]
        custom = cluster.custom
        what = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
        create = (
            functools.partial(custom.create_namespaced_custom_object, group, version, namespace, plural)
            if namespace
            else functools.partial(custom.create_cluster_custom_object, group, version, plural)
        )
        read = (
            functools.partial(custom.get_namespaced_custom_object, group, version, namespace, plural)
            if namespace
            else functools.partial(custom.get_cluster_custom_object, group, version, plural)
        )
        try:
            call(f"create {what}", create, body)
        except ConflictError:  # there already: ours when a retried create's first attempt got through
            found: Any = call(f"read {what}", read, name)
            labels = (found.get("metadata") or {}).get("labels") or {}
            if any(labels.get(k) != v for k, v in body["metadata"]["labels"].items()):
                self.forget(kind, namespace, name)
                raise UsageError(f"{what} exists and was not made by this run", "remove it") from None

    def delete(self, cluster: Cluster, kind: str, namespace: str, name: str) -> None:
        """Delete an object (by its record when this run made it, so a Secret by its uid) and forget it;
        one already gone, or not gateway-sizer's, is left alone."""
        record = self.recorded(kind, namespace, name) or {"kind": kind, "namespace": namespace, "name": name}
        with contextlib.suppress(NotFoundError, NotOursError):
            delete_created(cluster, record)
        self.forget(kind, namespace, name)

    def forget(self, kind: str, namespace: str, name: str) -> None:
        record = self.recorded(kind, namespace, name)
        if record is not None:
            self.changes.created.remove(record)
            self.changes.save()
