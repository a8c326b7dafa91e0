"""One run per gateway: a coordination.k8s.io/v1 Lease that the running sweep holds and renews.

The Lease lives in the Locust namespace and is named after the gateway workload
(`gateway-sizer.<namespace>.<name>`). The run holding it renews it every RENEW_INTERVAL_S from a
background thread. Another run (or a second `--resume` of a live one) finds it held and stops with one
line naming the holder run and when it last renewed. A Lease not renewed for LEASE_DURATION_S (its holder
was killed, or cut off from the API server that long) is taken over. The Lease is deleted at the end.

A holder that runs in a pod (a Job's: the downward API's POD_NAMESPACE and POD_NAME) names it on the Lease. A
`restore` or `--resume` of that same run, which otherwise waits for the Lease to expire, takes it over at once when
that pod is gone or has ended (Succeeded, Failed): a process in it can no longer renew or change anything. A pod
that cannot be read, or is still there, is waited out as before. A holder that runs as a process (not in a pod)
names that process on the Lease (holder_process.py: boot id, PID namespace, pid and start time), and the same
`restore` or `--resume` takes the Lease over at once when it runs on the same machine, in the same PID namespace, and
that process has provably ended (its pid gone or reused); a process on another machine or in another namespace, or
one still alive, is waited out as before.

Every write carries the resourceVersion read just before, so two runs racing for an expired Lease cannot
both win: the API server answers the loser 409 and it reads again.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubernetes import client

from runner.errors import PlatformError, SizerError, StopRun, UsageError
from runner.platforms.kubernetes import holder_process
from runner.platforms.kubernetes.connection import Cluster, ConflictError, NotFoundError, call
from runner.platforms.kubernetes.objects import MANAGED_BY
from runner.platforms.kubernetes.published import POD_NAME, POD_NAMESPACE

if TYPE_CHECKING:
    from runner.scenario import Scenario

LEASE_DURATION_S = 60
RENEW_INTERVAL_S = 10.0
PREFIX = "gateway-sizer."
RUN_ANNOTATION = "gateway-sizer/run"  # the holder's run id, for the one-line refusal
POD_ANNOTATION = "gateway-sizer/pod"  # the holder's pod (namespace/name) when it runs in one
PROCESS_ANNOTATION = "gateway-sizer/process"  # the holder's process (holder_process.py) when it runs in no pod
ENDED_PHASES = ("Succeeded", "Failed")
ACQUIRE_ATTEMPTS = 5
MAX_NAME = 253


class GatewayBusyError(UsageError):
    """Another live run holds the gateway's Lease."""


def lease_name(namespace: str, name: str) -> str:
    """`gateway-sizer.<namespace>.<name>`, shortened with a hash when it would exceed a name's 253 chars."""
    full = f"{PREFIX}{namespace}.{name}"
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:10]
    return f"{full[: MAX_NAME - 11].rstrip('.-')}.{digest}"


def _now() -> datetime:
    return datetime.now(UTC)


def _micro_time(moment: datetime) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds, in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Holding:
    """A Lease as read: who holds it, since when it was last renewed, for how long."""

    holder: str | None
    run_id: str | None
    renewed: datetime | None
    duration_s: int
    resource_version: str
    acquired: datetime | None = None
    transitions: int = 0
    pod: str | None = None  # namespace/name of the holder's pod, when it runs in one
    process: str | None = None  # the holder's process (holder_process.HolderProcess), when it runs in no pod

    def expired(self, now: datetime) -> bool:
        if not self.holder or self.renewed is None:
            return True
        return (now - self.renewed).total_seconds() > self.duration_s


class GatewayLease:
    """The Lease on one gateway, for one run (one process: its identity is the run id, host and pid)."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        gateway: str,
        gateway_namespace: str,
        gateway_name: str,
        run_id: str,
        *,
        duration_s: int = LEASE_DURATION_S,
        renew_interval_s: float = RENEW_INTERVAL_S,
        now: Callable[[], datetime] = _now,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.gateway = gateway  # for messages, e.g. "DaemonSet projectcontour/envoy"
        self.name = lease_name(gateway_namespace, gateway_name)
        self.run_id = run_id
        self.identity = f"{run_id}/{socket.gethostname()}/{os.getpid()}"
        self.duration_s = duration_s
        self.renew_interval_s = renew_interval_s
        self._now = now
        self.coordination = client.CoordinationV1Api(cluster.api)
        self.held = False
        self.took_over: Holding | None = None  # the expired holding this run replaced
        self.pod = _own_pod()
        self.process = None if self.pod else holder_process.own()  # a pod has its own path (_pod_ended)
        self.holder_ended: str | None = None  # why a holding of the same run was taken over before it expired
        self.lost: str | None = None  # why the Lease is no longer ours (another run took it over)
        self.renewals = self.failed_renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    # -- reading ----------------------------------------------------------------------------------
    def read(self) -> Holding | None:
        """The Lease as it is now, or None when there is none."""
        try:
            lease = call(f"read {self}", self.coordination.read_namespaced_lease, self.name, self.namespace)
        except NotFoundError:
            return None
        return _holding(lease)

    def busy_error(self, holding: Holding) -> GatewayBusyError:
        """The one line that refuses a second run."""
        who = f"run {holding.run_id}" if holding.run_id else f"{holding.holder!r}"
        renewed = "never renewed"
        if holding.renewed is not None:
            ago = max(0.0, (self._now() - holding.renewed).total_seconds())
            renewed = f"last renewed {holding.renewed.astimezone(UTC):%H:%M:%S} UTC, {ago:.0f} s ago"
        return GatewayBusyError(
            f"{self.gateway} is in use by {who} ({self}, {renewed})",
            f"wait for that run to end; a run killed hard frees it {holding.duration_s} s after its last renewal",
        )

    def refuse_if_held(self, *, for_run: str) -> None:
        """GatewayBusyError when a run other than `for_run` holds the Lease now (a read: the preflight's check;
        a resumed run's own killed attempt is waited for when it acquires)."""
        holding = self.read()
        if holding is not None and not holding.expired(self._now()) and holding.run_id != for_run:
            raise self.busy_error(holding)

    def _pod_ended(self, holding: Holding) -> str | None:
        """How the holder's pod ended ("is gone", "has ended (Failed)"), or None while it may still run: no pod
        named, one still there, or one that cannot be read (forbidden, the API server away)."""
        if not holding.pod or "/" not in holding.pod:
            return None
        namespace, name = holding.pod.split("/", 1)
        try:
            pod = call(f"read pod {holding.pod}", self.cluster.core.read_namespaced_pod, name, namespace)
        except NotFoundError:
            return "is gone"
        except SizerError:
            return None
        phase = getattr(pod.status, "phase", None)
        return f"has ended ({phase})" if phase in ENDED_PHASES else None

    def _holder_ended(self, holding: Holding) -> str | None:
        """Why the holder can no longer renew ("its pod <ns>/<name> is gone", "its process <pid> on this machine has
        ended"), or None while it may."""
        ended = self._pod_ended(holding)
        if ended is not None:
            return f"its pod {holding.pod} {ended}"
        process = holder_process.HolderProcess.parse(holding.process)
        if process is not None and process.has_ended():
            return f"its process {process.pid} on this machine has ended"
        return None

    def waited_line(self, run_id: str) -> str:
        """The line saying how a holding of run `run_id` (returned by wait_and_acquire) was taken over."""
        if self.holder_ended:
            return f"took over run {run_id}'s {self} at once: {self.holder_ended}"
        return f"waited for run {run_id}'s {self} to expire (it was killed without releasing it)"

    # -- holding ----------------------------------------------------------------------------------
    def acquire(self, ended: Holding | None = None) -> None:
        """Take the Lease: create it, renew our own, or take over an expired one (or `ended`, a holding whose
        holder can no longer run). GatewayBusyError (one line) when another run holds it."""
        for _ in range(ACQUIRE_ATTEMPTS):
            holding = self.read()
            try:
                if holding is None:
                    self._create()
                elif holding.holder == self.identity:
                    self._write(holding, taking_over=False)
                elif not holding.expired(self._now()) and not (ended is not None and holding.holder == ended.holder):
                    raise self.busy_error(holding)
                else:
                    self._write(holding, taking_over=True)
                    self.took_over = holding if holding.holder else None
            except ConflictError:
                continue  # another runner wrote it between our read and write: read again
            self.held = True
            return
        raise PlatformError(f"could not take {self}: it changed under us {ACQUIRE_ATTEMPTS} times in a row")

    def wait_and_acquire(self, *, for_run: str, timeout_s: float | None = None) -> Holding | None:
        """Take the Lease, first waiting (at most until it expires) while an earlier process of run `for_run`
        holds it: `restore` of a run killed hard, or its resumed attempt; at once when that process's pod has
        ended or, on this machine, the process itself (`holder_ended` says how). Another run holding it is refused
        at once (GatewayBusyError). Returns the holding waited for or taken over, if any."""
        holding = self.read()
        if holding is None or holding.expired(self._now()) or holding.run_id != for_run:
            self.acquire()
            return None
        ended = self._holder_ended(holding)
        if ended is not None:
            self.acquire(ended=holding)
            self.holder_ended = ended
            return holding
        assert holding.renewed is not None
        left = holding.duration_s - (self._now() - holding.renewed).total_seconds()
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else left + self.renew_interval_s + 2)
        while True:
            try:
                self.acquire()
                return holding
            except GatewayBusyError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(1.0)

    def _body(self, holding: Holding | None, *, taking_over: bool) -> dict[str, Any]:
        now = _micro_time(self._now())
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": dict(MANAGED_BY),
            "annotations": self._annotations(),
        }
        if holding is not None:
            metadata["resourceVersion"] = holding.resource_version
        acquired = holding.acquired if holding is not None and not taking_over else None
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration_s,
            "renewTime": now,
            "acquireTime": _micro_time(acquired) if acquired else now,
            "leaseTransitions": (holding.transitions if holding else 0) + (1 if taking_over else 0),
        }
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _annotations(self) -> dict[str, str]:
        """The run, and where its holder runs: its pod, or (in none) its process."""
        annotations = {RUN_ANNOTATION: self.run_id}
        if self.pod:
            annotations[POD_ANNOTATION] = self.pod
        elif self.process is not None:
            annotations[PROCESS_ANNOTATION] = str(self.process)
        return annotations

    def _create(self) -> None:
        call(
            f"create {self}",
            self.coordination.create_namespaced_lease,
            self.namespace,
            self._body(None, taking_over=False),
        )

    def _write(self, holding: Holding, *, taking_over: bool) -> None:
        """Replace the Lease with us as holder; the resourceVersion read with `holding` makes the API
        server answer 409 (ConflictError) when it changed since."""
        call(
            f"renew {self}",
            self.coordination.replace_namespaced_lease,
            self.name,
            self.namespace,
            self._body(holding, taking_over=taking_over),
        )

    def renew(self) -> None:
        """Renew the Lease once; sets `lost` when another run has taken it over."""
        with self._lock:
            if not self.held:
                return
            holding = self.read()
            if holding is None:  # deleted by hand: nobody else holds it
                self._create()
            elif holding.holder != self.identity:
                by = f"run {holding.run_id}" if holding.run_id else repr(holding.holder)
                self.lost = f"{self} on {self.gateway} was taken over by {by}"
                self.held = False
                return
            else:
                self._write(holding, taking_over=False)
            self.renewals += 1

    def check(self) -> None:
        """StopRun when the Lease was lost: another run may be changing the gateway, so no configuration measured
        from then on could be trusted; the sweep ends at once, keeping what it measured before."""
        if self.lost:
            raise StopRun(
                self.lost,
                "the run stops, keeping what it measured: from now on its load would share the "
                "gateway with another run's",
            )

    def start_renewing(self) -> None:
        self._thread = threading.Thread(target=self._renew_loop, name="gateway-sizer-lease", daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_interval_s):
            try:
                self.renew()
            except SizerError:
                self.failed_renewals += 1  # the API server may be back before the Lease expires
            if self.lost:
                return

    def release(self) -> None:
        """Stop renewing and delete the Lease if it is still ours (best effort: otherwise it expires)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.renew_interval_s + 60)
        with self._lock:
            if not self.held:
                return
            self.held = False
            try:
                holding = self.read()
                if holding is None or holding.holder != self.identity:
                    return
                options = {"preconditions": {"resourceVersion": holding.resource_version}}
                call(
                    f"delete {self}", self.coordination.delete_namespaced_lease, self.name, self.namespace, body=options
                )
            except (NotFoundError, ConflictError):
                pass


def _utc(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def _holding(lease: Any) -> Holding:
    spec = lease.spec
    renewed = _utc(spec.renew_time or spec.acquire_time)
    annotations = lease.metadata.annotations or {}
    return Holding(
        holder=spec.holder_identity or None,
        run_id=annotations.get(RUN_ANNOTATION) if spec.holder_identity else None,
        renewed=renewed,
        duration_s=int(spec.lease_duration_seconds or LEASE_DURATION_S),
        resource_version=str(lease.metadata.resource_version),
        acquired=_utc(spec.acquire_time),
        transitions=int(spec.lease_transitions or 0),
        pod=annotations.get(POD_ANNOTATION) if spec.holder_identity else None,
        process=annotations.get(PROCESS_ANNOTATION) if spec.holder_identity else None,
    )


def _own_pod() -> str | None:
    """namespace/name of the pod this process runs in (a Job's, from the downward API), or None."""
    namespace, name = os.environ.get(POD_NAMESPACE), os.environ.get(POD_NAME)
    return f"{namespace}/{name}" if namespace and name else None


def lease_for(
    cluster: Cluster, scenario: Scenario, run_id: str, gateway: str, duration_s: int = LEASE_DURATION_S
) -> GatewayLease:
    """The Lease on the scenario's gateway, in the Locust namespace."""
    envoy = scenario.envoy.workload
    return GatewayLease(
        cluster,
        scenario.kubernetes.namespace,
        gateway,
        envoy.namespace,
        envoy.name,
        run_id,
        duration_s=duration_s,
        renew_interval_s=min(RENEW_INTERVAL_S, duration_s / 4),
    )
