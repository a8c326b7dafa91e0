"""A Job's records published as the run goes (`sweep --publish`), so that nothing a killed Job changed is lost.

A Job's run directory is an emptyDir: an OOM kill, a lost node or a forced delete takes it away, and with it the
only record of what the gateway ran before the run changed it. So the runner publishes the run's records
(published.py) before it changes anything (the scenario and the run's summary, as soon as the run exists) and again
after every save of its record of changes (originals.ClusterChanges), which comes before the change it records is
made. A change whose record could not be published is not made: the save fails (SaveError) and the run stops,
restoring what it had changed. After a kill, `gateway-sizer restore --from-cluster RUN` (or `fetch` then
`restore`) puts everything back from what was published.
"""

from __future__ import annotations

import os
from pathlib import Path

from runner.errors import SizerError, UsageError
from runner.files import SaveError
from runner.platforms.base import Platform
from runner.platforms.kubernetes.connection import Cluster, connect
from runner.platforms.kubernetes.published import POD_NAMESPACE, configmap_name, publish
from runner.scenario import Scenario


class Publisher:
    """Publishes one run's records into its results ConfigMap; connects on first use."""

    def __init__(self, scenario: Scenario, run_dir: Path) -> None:
        self.scenario, self.run_dir = scenario, run_dir
        self.namespace = os.environ.get(POD_NAMESPACE) or scenario.kubernetes.namespace  # a Job's, where fetch looks
        self._cluster: Cluster | None = None

    @property
    def where(self) -> str:
        return f"ConfigMap {self.namespace}/{configmap_name(self.run_dir.name)}"

    def publish(self) -> str:
        """Publish the records as they are now; returns the ConfigMap's name. SizerError or OSError on failure."""
        if self._cluster is None:
            k8s = self.scenario.kubernetes
            self._cluster = connect(k8s.kubeconfig, k8s.context)
        return publish(self._cluster, self.run_dir, self.namespace)

    def after_save(self) -> None:
        """ClusterChanges.on_saved: SaveError (one line) when the record just saved could not be published, so
        the change it records is not made."""
        try:
            self.publish()
        except (SizerError, OSError) as error:
            raise SaveError(
                f"cannot publish run {self.run_dir.name}'s record of changes to {self.where}: {error}",
                "the runner publishes it before every change to the cluster (a Job's run directory is lost with "
                "its pod); check the runner's RBAC (update of ConfigMaps in its namespace)",
            ) from None


def publish_as_it_goes(platform: Platform, scenario: Scenario, run_dir: Path) -> Publisher:
    """Publish the run's records now (before the platform has changed anything) and after every save of its
    record of changes. UsageError, before anything is changed, when they cannot be published."""
    publisher = Publisher(scenario, run_dir)
    try:
        publisher.publish()
    except (SizerError, OSError) as error:
        raise UsageError(
            f"cannot publish run {run_dir.name}'s records to {publisher.where} before the sweep: {error}",
            "the runner needs create and update of ConfigMaps in its namespace (k8s/manifests/rbac)",
        ) from None
    changes = getattr(platform, "changes", None)  # the kubernetes platform's record of changes
    if changes is not None:
        changes.on_saved = publisher.after_save
    return publisher


def fetch_for_restore(namespace: str, run: str, results: Path, kubeconfig: str | None) -> Path:
    """`restore --from-cluster`: the run's records as its Job last published them, written into results/<run>/
    (replacing a copy there: the cluster's is the newest); returns that folder. `kubeconfig` (else $KUBECONFIG or
    ~/.kube/config) is also what the restore connects with, unless the run's scenario names its own."""
    from runner.platforms.kubernetes.published import fetch

    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig  # read by the restore's own connect when the scenario names none
    return fetch(connect(kubeconfig), namespace, results, run)


def publish_restored(namespace: str, run_dir: Path) -> str:
    """After `restore --from-cluster`: the record of changes, now with nothing pending, published back, so the
    cluster's copy no longer asks for a restore. One line saying what happened."""
    try:
        publish(connect(os.environ.get("KUBECONFIG")), run_dir, namespace)
    except (SizerError, OSError) as error:
        return f"the restored record was not published back to {namespace} ({error})"
    return f"published the restored record back to ConfigMap {namespace}/{configmap_name(run_dir.name)}"
