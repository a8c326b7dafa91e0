"""One run per gateway: the Lease on a real API server, held, renewed, refused, taken over, released."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from runner.errors import StopRun
from runner.platforms.kubernetes import workloads as wl
from runner.platforms.kubernetes.holder_process import HolderProcess, named, own
from runner.platforms.kubernetes.lease import POD_ANNOTATION, GatewayBusyError, GatewayLease, lease_name
from runner.platforms.kubernetes.loadgen import create_locust
from runner.platforms.kubernetes.originals import ClusterChanges
from support.k8s import ORIGINAL, create, locust_spec, scenario_file, workload
from support.processes import one_line, run_sizer
from support.wait import until

pytestmark = pytest.mark.kubernetes
PROCESS = "gateway-sizer/process"  # the annotation naming a holder's process (spelled out: old code has no constant)


def _lease(admin, namespace: str, run_id: str, **options) -> GatewayLease:
    return GatewayLease(admin, namespace, f"DaemonSet {namespace}/envoy", namespace, "envoy", run_id, **options)


def _read(admin, namespace: str):
    return client.CoordinationV1Api(admin.api).read_namespaced_lease(lease_name(namespace, "envoy"), namespace)


def _stale_lease(
    admin,
    namespace: str,
    run_id: str,
    renewed_ago_s: float,
    pod: str | None = None,
    process: HolderProcess | None = None,
) -> None:
    """A Lease as a run killed `renewed_ago_s` seconds ago left it (one that ran in `pod`, namespace/name, or as
    `process`)."""
    renewed = (datetime.now(UTC) - timedelta(seconds=renewed_ago_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    annotations = {"gateway-sizer/run": run_id, **({POD_ANNOTATION: pod} if pod else {})}
    if process is not None:
        annotations[PROCESS] = str(process)
    body = {
        "metadata": {"name": lease_name(namespace, "envoy"), "annotations": annotations},
        "spec": {"holderIdentity": f"{run_id}/elsewhere/1", "leaseDurationSeconds": 60, "renewTime": renewed,
                 "acquireTime": renewed, "leaseTransitions": 0},
    }  # fmt: skip
    client.CoordinationV1Api(admin.api).create_namespaced_lease(namespace, body)


def test_a_second_sweep_on_a_gateway_is_refused_with_one_line_naming_the_holder(apiserver, admin, namespace, tmp_path):
    create(admin, workload("DaemonSet", namespace, "envoy", {"envoy": ORIGINAL}))
    create(admin, workload("Deployment", namespace, "nginx", {"nginx": {}}, replicas=2))
    first = _lease(admin, namespace, "20261123-050000-first", renew_interval_s=0.5)
    first.acquire()
    first.start_renewing()
    (tmp_path / "first").mkdir()
    create_locust(
        admin, locust_spec(namespace, run_id="20261123-050000-first"), ClusterChanges(tmp_path / "first" / "x")
    )
    try:
        until(lambda: first.renewals >= 2, 10, "two renewals of the first run's Lease")
        result = run_sizer(
            "sweep",
            "--live",
            "--scenario",
            str(scenario_file(tmp_path, namespace, apiserver.kubeconfig)),
            "--results",
            str(tmp_path),
        )
        line = one_line(
            result,
            f"DaemonSet {namespace}/envoy is in use by run 20261123-050000-first",
            f"Lease {namespace}/gateway-sizer.{namespace}.envoy",
            "last renewed",
            "s ago",
        )
        seconds_ago = float(line.split(" UTC, ")[1].split(" s ago")[0])
        assert seconds_ago <= 2, line
        assert first.renewals >= 2 and first.lost is None
        # the first run's objects and the gateway are untouched
        deployments = {d.metadata.name for d in admin.apps.list_namespaced_deployment(namespace).items}
        assert len(deployments) == 3
        envoy = wl.Workload("DaemonSet", namespace, "envoy", "envoy")
        assert wl.get_resources(admin, envoy) == ORIGINAL and wl.changed_by(admin, envoy) is None
        assert _read(admin, namespace).spec.holder_identity == first.identity
    finally:
        first.release()
    with pytest.raises(ApiException) as gone:
        _read(admin, namespace)
    assert gone.value.status == 404


def test_a_lease_held_by_a_live_run_is_refused_and_an_expired_one_is_taken_over(admin, namespace):
    _stale_lease(admin, namespace, "killed-run", renewed_ago_s=20)
    with pytest.raises(GatewayBusyError, match=r"in use by run killed-run .*last renewed .*, 20 s ago"):
        _lease(admin, namespace, "new-run").acquire()
    client.CoordinationV1Api(admin.api).delete_namespaced_lease(lease_name(namespace, "envoy"), namespace)

    _stale_lease(admin, namespace, "killed-run", renewed_ago_s=61)
    taker = _lease(admin, namespace, "new-run")
    taker.acquire()
    assert taker.took_over is not None and taker.took_over.run_id == "killed-run"
    lease = _read(admin, namespace)
    assert lease.spec.holder_identity == taker.identity and lease.spec.lease_transitions == 1
    assert lease.metadata.annotations["gateway-sizer/run"] == "new-run"
    taker.release()


def test_of_runs_racing_for_an_expired_lease_exactly_one_wins(admin, namespace):
    _stale_lease(admin, namespace, "killed-run", renewed_ago_s=300)
    outcomes: dict[str, str] = {}

    def attempt(run_id: str) -> None:
        try:
            _lease(admin, namespace, run_id).acquire()
            outcomes[run_id] = "held"
        except GatewayBusyError:
            outcomes[run_id] = "refused"

    threads = [threading.Thread(target=attempt, args=(f"run-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes.values()) == ["held", "refused", "refused", "refused"], outcomes
    winner = next(r for r, o in outcomes.items() if o == "held")
    assert _read(admin, namespace).metadata.annotations["gateway-sizer/run"] == winner


def test_the_holder_renews_and_notices_when_another_run_takes_the_lease_over(admin, namespace):
    holder = _lease(admin, namespace, "slow-run", renew_interval_s=0.3)
    holder.acquire()
    first = _read(admin, namespace).spec.renew_time
    holder.start_renewing()
    until(lambda: _read(admin, namespace).spec.renew_time > first, 10, "a renewTime later than the acquire's")
    holder.check()  # still ours
    lease = _read(admin, namespace)  # another run took it over (as it may once ours had expired)
    lease.spec.holder_identity = "other-run/host/2"
    lease.metadata.annotations["gateway-sizer/run"] = "other-run"
    client.CoordinationV1Api(admin.api).replace_namespaced_lease(lease.metadata.name, namespace, lease)
    until(lambda: holder.lost, 10, "the holder's next renewal finding the Lease taken over")
    with pytest.raises(StopRun, match="was taken over by run other-run") as stopped:
        holder.check()  # StopRun: the sweep ends at once (tests/engine), not each remaining configuration in turn
    assert stopped.value.hint is not None and "the run stops" in stopped.value.hint
    holder.release()  # leaves the other run's Lease alone
    assert _read(admin, namespace).spec.holder_identity == "other-run/host/2"


def test_a_run_in_a_pod_names_it_on_its_lease_and_its_restore_takes_over_once_that_pod_has_ended(
    admin, namespace, monkeypatch
):
    """A Job's runner killed hard (OOM, --grace-period=0): its pod is gone or Failed, so nothing can renew its Lease
    again, and `restore` (or its resume) takes the Lease over at once rather than after 60 s; while the pod is there
    (still running, or unreadable) the Lease is waited out as before. Each check waits 1 s at most, not 60."""
    monkeypatch.setenv("POD_NAMESPACE", namespace)
    monkeypatch.setenv("POD_NAME", "runner-abcde")
    held = _lease(admin, namespace, "job-run")
    held.acquire()
    assert _read(admin, namespace).metadata.annotations[POD_ANNOTATION] == f"{namespace}/runner-abcde"
    held.release()
    monkeypatch.delenv("POD_NAMESPACE")
    monkeypatch.delenv("POD_NAME")

    leases = client.CoordinationV1Api(admin.api)
    pod = {"metadata": {"name": "runner-alive"}, "spec": {"containers": [{"name": "runner", "image": "x"}]}}
    admin.core.create_namespaced_pod(namespace, pod)  # no kubelet here: Pending, as good as running
    _stale_lease(admin, namespace, "job-run", renewed_ago_s=5, pod=f"{namespace}/runner-alive")
    waiting = _lease(admin, namespace, "job-run")
    with pytest.raises(GatewayBusyError, match="in use by run job-run"):
        waiting.wait_and_acquire(for_run="job-run", timeout_s=1)
    assert waiting.holder_ended is None and not waiting.held

    admin.core.patch_namespaced_pod_status("runner-alive", namespace, {"status": {"phase": "Failed"}})
    failed = _lease(admin, namespace, "job-run")
    assert failed.wait_and_acquire(for_run="job-run", timeout_s=1) is not None
    assert failed.holder_ended == f"its pod {namespace}/runner-alive has ended (Failed)"
    lease = _read(admin, namespace)
    assert lease.spec.holder_identity == failed.identity and lease.spec.lease_transitions == 1
    failed.release()

    _stale_lease(admin, namespace, "job-run", renewed_ago_s=5, pod=f"{namespace}/runner-deleted")
    gone = _lease(admin, namespace, "job-run")
    gone.wait_and_acquire(for_run="job-run", timeout_s=1)
    assert gone.holder_ended == f"its pod {namespace}/runner-deleted is gone"
    assert _read(admin, namespace).spec.holder_identity == gone.identity
    gone.release()

    # another run's Lease is refused at once, whatever became of its pod
    _stale_lease(admin, namespace, "other-run", renewed_ago_s=5, pod=f"{namespace}/runner-deleted")
    with pytest.raises(GatewayBusyError, match="in use by run other-run"):
        _lease(admin, namespace, "job-run").wait_and_acquire(for_run="job-run", timeout_s=1)
    leases.delete_namespaced_lease(lease_name(namespace, "envoy"), namespace)


def _delete_lease(admin, namespace: str) -> None:
    client.CoordinationV1Api(admin.api).delete_namespaced_lease(lease_name(namespace, "envoy"), namespace)


def _exited_process() -> HolderProcess:
    """A process of this machine that has run and exited (named before it was reaped: its start time is known)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    process = named(child.pid)  # running, or exited and not yet reaped: /proc/<pid> still names it
    child.wait()
    assert process is not None
    return process


def _taken_over_at_once(admin, namespace: str, run_id: str) -> GatewayLease:
    """The Lease taken by a `restore` of run `run_id` that waits 1 s at most (not the 60 s of its expiry)."""
    taker = _lease(admin, namespace, run_id)
    assert taker.wait_and_acquire(for_run=run_id, timeout_s=1) is not None
    lease = _read(admin, namespace)
    assert lease.spec.holder_identity == taker.identity and lease.spec.lease_transitions == 1
    return taker


def _waited_out(admin, namespace: str, run_id: str) -> None:
    """A `restore` of run `run_id` that waits 1 s for the Lease and, the holder maybe alive, does not get it."""
    waiting = _lease(admin, namespace, run_id)
    with pytest.raises(GatewayBusyError, match=f"in use by run {run_id}"):
        waiting.wait_and_acquire(for_run=run_id, timeout_s=1)
    assert waiting.holder_ended is None and not waiting.held


def test_a_run_as_a_process_names_it_and_its_restore_takes_over_at_once_once_that_process_has_ended(admin, namespace):
    """A sweep killed hard on this machine (SIGKILL, OOM): its process is gone, so nothing can renew its Lease again,
    and `restore` (or its resume) on the same machine takes the Lease over at once rather than after 60 s."""
    held = _lease(admin, namespace, "cli-run")
    held.acquire()
    annotations = _read(admin, namespace).metadata.annotations
    assert HolderProcess.parse(annotations[PROCESS]) == own() and POD_ANNOTATION not in annotations
    held.release()

    exited = _exited_process()
    _stale_lease(admin, namespace, "cli-run", renewed_ago_s=5, process=exited)
    taker = _taken_over_at_once(admin, namespace, "cli-run")
    assert taker.holder_ended == f"its process {exited.pid} on this machine has ended"
    assert taker.waited_line("cli-run") == (
        f"took over run cli-run's {taker} at once: its process {exited.pid} on this machine has ended"
    )
    taker.release()

    # its pid now names another process (this one, started at another time): the holder is gone all the same
    this = own()
    assert this is not None
    reused = this.model_copy(update={"start_ticks": this.start_ticks - 1})
    _stale_lease(admin, namespace, "cli-run", renewed_ago_s=5, process=reused)
    assert _taken_over_at_once(admin, namespace, "cli-run").holder_ended == (
        f"its process {reused.pid} on this machine has ended"
    )
    _delete_lease(admin, namespace)

    # another run's Lease is refused at once, whatever became of its process
    _stale_lease(admin, namespace, "other-run", renewed_ago_s=5, process=exited)
    with pytest.raises(GatewayBusyError, match="in use by run other-run"):
        _lease(admin, namespace, "cli-run").wait_and_acquire(for_run="cli-run", timeout_s=1)
    _delete_lease(admin, namespace)


def test_a_holding_of_a_live_process_is_waited_out_and_taken_over_once_it_has_ended(admin, namespace):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        alive = named(sleeper.pid)
        assert alive is not None
        _stale_lease(admin, namespace, "cli-run", renewed_ago_s=5, process=alive)
        _waited_out(admin, namespace, "cli-run")  # it may still renew: a `--resume` run alongside it, say
    finally:
        sleeper.kill()
        sleeper.wait()
    taker = _taken_over_at_once(admin, namespace, "cli-run")
    assert taker.holder_ended == f"its process {alive.pid} on this machine has ended"
    taker.release()


def test_a_holding_of_a_process_on_another_machine_or_in_another_pid_namespace_is_waited_out(admin, namespace):
    """Only a process this machine can see is known to have ended: one on another machine (another boot id) or in
    another PID namespace (another container's, on this host) may still run, whatever its pid is here."""
    exited = _exited_process()
    elsewhere = {
        "another machine": exited.model_copy(update={"boot_id": str(uuid.uuid4())}),
        "another PID namespace": exited.model_copy(update={"pid_namespace": "pid:[1]"}),
    }
    for process in elsewhere.values():
        _stale_lease(admin, namespace, "cli-run", renewed_ago_s=5, process=process)
        _waited_out(admin, namespace, "cli-run")
        _delete_lease(admin, namespace)
    # the same process seen from its own machine and namespace: ended, taken over at once
    _stale_lease(admin, namespace, "cli-run", renewed_ago_s=5, process=exited)
    _taken_over_at_once(admin, namespace, "cli-run").release()


def test_lease_names_follow_the_gateway_and_stay_valid():
    assert lease_name("projectcontour", "envoy") == "gateway-sizer.projectcontour.envoy"
    long = lease_name("n" * 63, "e" * 253)
    assert len(long) == 253 and long[-1].isalnum() and long != lease_name("n" * 63, "e" * 252 + "f")
