"""What a run changed in a cluster, saved in its run directory before the first change.

`gateway-sizer restore <run>` reads it to undo a run that was killed too hard to clean up after itself:
original container resources, Envoy's args and replica counts go back, and the objects the run created
(Locust's, and the TLS profiles' Secret and HTTPProxy) go away. A resumed run loads the file its first
attempt wrote, so the originals it restores are the ones from before any change, never values that run
had already patched.

Each workload a run changes also carries the annotation `gateway-sizer/changed-by: <run>` (workloads.py)
until its originals are back, so another run refuses to start on a gateway that still has them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.errors import PlatformError, SizerError, UsageError
from runner.files import SaveError, write_atomic
from runner.platforms.kubernetes import contour_lease, provisioned
from runner.platforms.kubernetes.connection import Cluster, ConflictError, NotFoundError, call
from runner.platforms.kubernetes.objects import CLUSTER_KINDS, CUSTOM_KINDS, MANAGED_BY
from runner.platforms.kubernetes.provisioned import Parameters
from runner.platforms.kubernetes.resize import resize_back
from runner.platforms.kubernetes.workloads import (
    Workload,
    scale,
    set_pod_resources,
    unmark_changed,
    wait_rolled_out,
)

FILE_NAME = "kubernetes-originals.json"


@dataclass
class Original:
    """A workload's state before the run touched it: every container's resources, by name, and the
    sized container's args (the run sets Envoy's `--concurrency` there). `marked`: the workload carries
    the run's changed-by annotation."""

    workload: Workload
    resources: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    replicas: int | None = None
    resources_changed: bool = False
    replicas_changed: bool = False
    args: list[str] | None = None
    args_changed: bool = False
    marked: bool = False
    pods_resized: bool = False  # its pods were resized in place: restore replaces those that differ from the template


@dataclass
class ClusterChanges:
    """Everything a run changed or created; saved after every change. The file lives in the run
    directory, whose name is the run id."""

    path: Path
    originals: list[Original] = field(default_factory=list)
    created: list[dict[str, str]] = field(default_factory=list)  # {"kind", "namespace", "name"[, "uid"]}
    parameters: list[Parameters] = field(default_factory=list)  # a provisioned gateway's ContourDeployment
    # called after every save, before the change it records is made: a Job publishes the record (publishing.py)
    on_saved: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.path.parent.name

    def original(self, workload: Workload) -> Original | None:
        return next((o for o in self.originals if o.workload == workload), None)

    def remember(self, original: Original) -> Original:
        """Record a workload's original state, unless it is recorded already (then that record wins)."""
        existing = self.original(original.workload)
        if existing is not None:
            return existing
        self.originals.append(original)
        self.save()
        return original

    def save(self) -> None:
        """Replace the file atomically, then hand it on (on_saved); SaveError (one line) when it cannot be written
        or handed on."""
        data = {
            "originals": [asdict(o) for o in self.originals],
            "created": self.created,
            "parameters": [asdict(p) for p in self.parameters],
        }
        write_atomic(self.path, json.dumps(data, indent=1))
        if self.on_saved is not None:
            self.on_saved()

    @classmethod
    def load(cls, run_dir: Path) -> ClusterChanges:
        """The changes a run recorded; UsageError when the run never touched a cluster."""
        return cls.load_file(run_dir / FILE_NAME)

    @classmethod
    def load_file(cls, path: Path) -> ClusterChanges:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise UsageError(f"{path.parent} has no {path.name}", "only kubernetes runs change a cluster") from None
        except ValueError as error:
            raise UsageError(f"{path} is not valid JSON ({error})") from None
        originals = [Original(**{**o, "workload": Workload(**o["workload"])}) for o in data.get("originals", [])]
        parameters = [Parameters(**{**p, "envoy": Workload(**p["envoy"])}) for p in data.get("parameters", [])]
        return cls(path, originals, list(data.get("created", [])), parameters)

    @classmethod
    def open(cls, path: Path) -> ClusterChanges:
        """The changes recorded so far at `path` (a resumed run's first attempt), or none yet."""
        return cls.load_file(path) if path.exists() else cls(path)

    def remember_parameters(self, parameters: Parameters) -> Parameters:
        """Record a provisioned gateway's ContourDeployment as it is, unless recorded already (a resumed run's
        first attempt recorded it before any change: that record wins)."""
        for existing in self.parameters:
            if (existing.namespace, existing.name) == (parameters.namespace, parameters.name):
                return existing
        self.parameters.append(parameters)
        self.save()
        return parameters

    @property
    def pending(self) -> bool:
        return (
            bool(self.created)
            or any(p.changed or p.marked or p.listeners for p in self.parameters)
            or any(
                o.resources_changed or o.args_changed or o.replicas_changed or o.marked or o.pods_resized
                for o in self.originals
            )
        )


def undo(cluster: Cluster, changes: ClusterChanges, timeout_s: float, *, wait: bool = True) -> list[str]:
    """Put every original back and delete what was created; returns what was done, one line each. Goes
    on past any failure, a failed save of the file included, and raises one PlatformError naming them all."""
    done: list[str] = []
    problems: list[str] = []

    def save() -> None:
        try:
            changes.save()
        except (SaveError, OSError) as error:  # a full disk, or the run directory gone
            text = str(error) if isinstance(error, SaveError) else f"cannot save {changes.path}: {error}"
            if text not in problems:
                problems.append(text)

    for original in changes.originals:
        try:
            if original.resources_changed or original.args_changed:
                resources = original.resources if original.resources_changed else {}
                args = {original.workload.container: original.args} if original.args_changed else None
                set_pod_resources(cluster, original.workload, resources, args)
                what = " and ".join(w for w, c in (("resources", resources), ("args", args)) if c)
                original.resources_changed = original.args_changed = False
                done.append(f"restored {what} of {original.workload}")
            if original.replicas_changed and original.replicas is not None:
                scale(cluster, original.workload, original.replicas)
                original.replicas_changed = False
                done.append(f"restored {original.replicas} replicas of {original.workload}")
            if original.marked:
                unmark_changed(cluster, original.workload, changes.run_id)
                original.marked = False
        except NotFoundError:
            original.resources_changed = original.args_changed = original.replicas_changed = False
            original.marked = False
            done.append(f"{original.workload} no longer exists")
        except Exception as error:  # keep undoing the rest; report everything that failed together
            problems.append(f"{original.workload}: {error}")
        save()
    for parameters in changes.parameters:
        try:
            done += provisioned.restore(cluster, parameters, changes.run_id, wait=wait)
        except NotFoundError:
            parameters.changed = parameters.marked = False
            parameters.listeners = []
            done.append(f"{parameters} or its Gateway no longer exists")
        except Exception as error:
            problems.append(f"{parameters}: {error}")
        save()
    listening = any(parameters.listeners for parameters in changes.parameters)
    for created in list(changes.created):
        what = f"{created['kind']} {created['namespace']}/{created['name']}".replace(" /", " ")
        if created["kind"] == "Secret" and listening:  # a listener still names it: kept for the next restore
            problems.append(f"{what}: kept while the Gateway's listeners that name it are not removed")
            continue
        try:
            delete_created(cluster, created)
            done.append(f"deleted {what}")
        except NotFoundError:
            pass
        except NotOursError as error:
            done.append(str(error))
        except Exception as error:
            problems.append(f"{what}: {error}")
            continue
        changes.created.remove(created)
        save()
    if wait:
        for parameters in changes.parameters:
            if not parameters.changed:
                continue
            try:
                provisioned.wait_restored(cluster, parameters, timeout_s)
            except Exception as error:
                problems.append(str(error))
            save()
        for original in changes.originals:
            try:
                wait_rolled_out(cluster, original.workload, timeout_s)
                if original.pods_resized:
                    resized = resize_back(cluster, original.workload, timeout_s)
                    original.pods_resized = False
                    save()
                    if resized:
                        done.append(f"resized {resized} pod(s) of {original.workload} back to its template")
            except Exception as error:
                problems.append(str(error))
    if problems:
        raise PlatformError(f"restore incomplete: {'; '.join(problems)}", "run `gateway-sizer restore <run>` again")
    return done


class NotOursError(SizerError):
    """An object recorded as created by a run lacks gateway-sizer's labels: someone else's, left alone."""


def delete_created(cluster: Cluster, created: dict[str, str]) -> None:
    """Delete an object a run created, after checking it carries gateway-sizer's managed-by labels
    (NotOursError otherwise: a file edited by hand, or a name taken by someone else since).

    A Secret cannot be checked that way: the runner's RBAC reads no Secret. It is deleted with the uid
    its create returned as a precondition (a Secret of that name made since by someone else stays); when
    that answer was lost (a kill between the create and the save), by name alone, which carries the run's
    hash and was recorded before the create. Nor can the Lease of a sizing fleet's Contour (contour_lease.py),
    which Contour writes without labels: by its name, once that Contour is gone."""
    kind, namespace, name = created["kind"], created["namespace"], created["name"]
    what = f"{kind} {namespace}/{name}"
    if kind == "Secret":
        _delete_secret(cluster, namespace, name, created.get("uid"))
        return
    if kind == contour_lease.KIND:  # Contour's, unlabelled: known by the run's hash in its name
        if not contour_lease.RUN_LEASE.fullmatch(name):
            raise NotOursError(f"left {what} alone: not the Lease of a sizing fleet's Contour")
        contour_lease.delete(cluster, namespace, name)
        return
    if kind in CLUSTER_KINDS:
        group, version, plural = CUSTOM_KINDS[kind]
        what = f"{kind} {name}"
        found: Any = call(f"read {what}", cluster.custom.get_cluster_custom_object, group, version, plural, name)
        _check_ours(what, (found.get("metadata") or {}).get("labels") or {})
        call(f"delete {what}", cluster.custom.delete_cluster_custom_object, group, version, plural, name)
        return
    if kind in CUSTOM_KINDS:
        group, version, plural = CUSTOM_KINDS[kind]
        found = call(
            f"read {what}", cluster.custom.get_namespaced_custom_object, group, version, namespace, plural, name
        )
        _check_ours(what, (found.get("metadata") or {}).get("labels") or {})
        call(f"delete {what}", cluster.custom.delete_namespaced_custom_object, group, version, namespace,
             plural, name, propagation_policy="Background")  # fmt: skip
        if kind == "Gateway":  # its class and parameters go next: the provisioner must see it gone first
            provisioned.wait_unprovisioned(cluster, namespace, name)
        return
    policies = client.NetworkingV1Api(cluster.api)
    api = {
        "Deployment": (cluster.apps.read_namespaced_deployment, cluster.apps.delete_namespaced_deployment),
        "Service": (cluster.core.read_namespaced_service, cluster.core.delete_namespaced_service),
        "ConfigMap": (cluster.core.read_namespaced_config_map, cluster.core.delete_namespaced_config_map),
        "NetworkPolicy": (policies.read_namespaced_network_policy, policies.delete_namespaced_network_policy),
    }
    if kind not in api:
        raise NotOursError(f"left {what} alone: gateway-sizer creates no {kind}")
    read, delete = api[kind]
    obj: Any = call(f"read {what}", read, name, namespace)
    _check_ours(what, obj.metadata.labels or {})
    call(f"delete {what}", delete, name, namespace, propagation_policy="Background")


def _check_ours(what: str, labels: dict[str, str]) -> None:
    if any(labels.get(key) != value for key, value in MANAGED_BY.items()):
        raise NotOursError(f"left {what} alone: it lacks gateway-sizer's managed-by labels")


def _delete_secret(cluster: Cluster, namespace: str, name: str, uid: str | None) -> None:
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid) if uid else None)
    try:
        call(f"delete Secret {namespace}/{name}", cluster.core.delete_namespaced_secret, name, namespace, body=options)
    except ConflictError:  # the uid precondition failed: the Secret of that name is another one
        raise NotOursError(f"left Secret {namespace}/{name} alone: it is not the one this run created") from None
