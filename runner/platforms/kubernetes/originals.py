"""What a run changed in a cluster, saved in its run directory before the first change.

`gateway-sizer restore <run>` reads it to undo a run that was killed too hard to clean up after itself:
original container resources, Envoy's args and replica counts go back, and the Locust objects the run
created go away.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import PlatformError, UsageError
from runner.platforms.kubernetes.connection import Cluster, NotFoundError, call
from runner.platforms.kubernetes.workloads import Workload, scale, set_pod_resources, wait_rolled_out

FILE_NAME = "kubernetes-originals.json"


@dataclass
class Original:
    """A workload's state before the run touched it: every container's resources, by name, and the
    sized container's args (the run sets Envoy's `--concurrency` there)."""

    workload: Workload
    resources: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    replicas: int | None = None
    resources_changed: bool = False
    replicas_changed: bool = False
    args: list[str] | None = None
    args_changed: bool = False


@dataclass
class ClusterChanges:
    """Everything a run changed or created; saved after every change."""

    path: Path
    originals: list[Original] = field(default_factory=list)
    created: list[dict[str, str]] = field(default_factory=list)  # {"kind", "namespace", "name"}

    def original(self, workload: Workload) -> Original | None:
        return next((o for o in self.originals if o.workload == workload), None)

    def remember(self, original: Original) -> Original:
        existing = self.original(original.workload)
        if existing is not None:
            return existing
        self.originals.append(original)
        self.save()
        return original

    def save(self) -> None:
        data = {
            "originals": [asdict(o) for o in self.originals],
            "created": self.created,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.path)

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
        originals = [Original(**{**o, "workload": Workload(**o["workload"])}) for o in data.get("originals", [])]
        return cls(path, originals, list(data.get("created", [])))

    @property
    def pending(self) -> bool:
        return bool(self.created) or any(
            o.resources_changed or o.args_changed or o.replicas_changed for o in self.originals
        )


def undo(cluster: Cluster, changes: ClusterChanges, timeout_s: float, *, wait: bool = True) -> list[str]:
    """Put every original back and delete what was created; returns what was done, one line each."""
    done: list[str] = []
    problems: list[str] = []
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
        except NotFoundError:
            original.resources_changed = original.args_changed = original.replicas_changed = False
            done.append(f"{original.workload} no longer exists")
        except Exception as error:  # keep undoing the rest; report everything that failed together
            problems.append(f"{original.workload}: {error}")
        changes.save()
    for created in list(changes.created):
        try:
            delete_created(cluster, created)
            done.append(f"deleted {created['kind']} {created['namespace']}/{created['name']}")
        except NotFoundError:
            pass
        except Exception as error:
            problems.append(f"{created['kind']} {created['namespace']}/{created['name']}: {error}")
            continue
        changes.created.remove(created)
        changes.save()
    if wait:
        for original in changes.originals:
            try:
                wait_rolled_out(cluster, original.workload, timeout_s)
            except Exception as error:
                problems.append(str(error))
    if problems:
        raise PlatformError(f"restore incomplete: {'; '.join(problems)}", "run `gateway-sizer restore <run>` again")
    return done


def delete_created(cluster: Cluster, created: dict[str, str]) -> None:
    kind, namespace, name = created["kind"], created["namespace"], created["name"]
    deleters = {
        "Deployment": cluster.apps.delete_namespaced_deployment,
        "Service": cluster.core.delete_namespaced_service,
        "ConfigMap": cluster.core.delete_namespaced_config_map,
    }
    call(f"delete {kind} {namespace}/{name}", deleters[kind], name, namespace, propagation_policy="Background")
