"""Which process holds a Lease, recorded so that another process on the same machine can tell that it has ended.

A process is named by the kernel's boot id, its PID and time namespaces and its pid with its start time (field 22 of
/proc/<pid>/stat, clock ticks since boot): a pid used again later has another start time. Containers on one host
share its boot id, so the PID namespace says whether a pid means the same process here. A process has provably ended
when the boot and the namespaces are this process's and /proc/<pid> is gone, names a later process, or is a zombie
(it has exited; only its parent has not reaped it). Anything else (another machine or namespace, /proc unreadable,
not this namespace's or hiding other users' processes, a system without /proc) cannot tell: `own()` is None there,
`has_ended` False. Nothing here depends on cgroups (v1 or v2).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PROC = Path("/proc")
BOOT_ID = PROC / "sys" / "kernel" / "random" / "boot_id"
START_FIELD = 22  # /proc/<pid>/stat: starttime, clock ticks after boot
ENDED_STATES = ("Z", "X")  # zombie, dead: exited, not yet reaped


class HolderProcess(BaseModel):
    """One process, named so that neither another machine's nor a reused pid is taken for it."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    boot_id: str = Field(min_length=1)
    pid_namespace: str = Field(min_length=1)  # "pid:[4026531836]"
    time_namespace: str | None  # "time:[4026531834]"; None on kernels without time namespaces (before 5.6)
    pid: int = Field(gt=0)
    start_ticks: int = Field(ge=0)

    def __str__(self) -> str:
        """The Lease annotation's value: JSON."""
        return self.model_dump_json()

    @classmethod
    def parse(cls, text: str | None) -> HolderProcess | None:
        """The process an annotation names, or None when it names none in this form (edited, another version's)."""
        try:
            return cls.model_validate_json(text or "")
        except ValidationError:
            return None

    def has_ended(self) -> bool:
        """True only when this process provably no longer runs: seen from the same boot and namespaces, its pid is
        gone, names a process started at another time, or a zombie. False whenever that cannot be told."""
        if _here() != (self.boot_id, self.pid_namespace, self.time_namespace):
            return False
        stat = _stat(self.pid)
        if stat is None:
            # gone, unless /proc hides it (another user's, hidepid) or only its stat could not be read
            return not (PROC / str(self.pid)).exists() and not _pids_hidden()
        state, start_ticks = stat
        return start_ticks != self.start_ticks or state in ENDED_STATES


def own() -> HolderProcess | None:
    """This process, or None where it cannot be named (see `named`)."""
    return named(os.getpid())


def named(pid: int) -> HolderProcess | None:
    """Process `pid` of this PID namespace (running, or exited and not yet reaped), or None where it cannot be named:
    no /proc (not Linux), a /proc of another PID namespace, no such process."""
    here, stat = _here(), _stat(pid)
    if here is None or stat is None:
        return None
    boot_id, pid_namespace, time_namespace = here
    return HolderProcess(
        boot_id=boot_id, pid_namespace=pid_namespace, time_namespace=time_namespace, pid=pid, start_ticks=stat[1]
    )


def _here() -> tuple[str, str, str | None] | None:
    """This process's boot id, PID and time namespaces, or None when /proc does not show them (or shows another PID
    namespace's processes: its pids are not ours)."""
    try:
        boot_id = BOOT_ID.read_text().strip()
        pid_namespace = os.readlink(PROC / "self" / "ns" / "pid")
        time = PROC / "self" / "ns" / "time"
        time_namespace = os.readlink(time) if time.exists() else None
        self_pid = int(os.readlink(PROC / "self"))
    except (OSError, ValueError):
        return None
    return (boot_id, pid_namespace, time_namespace) if boot_id and self_pid == os.getpid() else None


def _pids_hidden() -> bool:
    """Whether /proc hides other users' processes (mounted with hidepid=1/2, noaccess/invisible): then a pid
    missing from it proves nothing. True when that cannot be read."""
    try:
        mounts = (PROC / "self" / "mountinfo").read_text().splitlines()
    except OSError:
        return True
    for line in reversed(mounts):  # the last mount on /proc is the one seen
        fields, _, source = line.partition(" - ")
        if fields.split()[4:5] != [str(PROC)]:
            continue
        options = dict(option.partition("=")[::2] for option in source.split()[-1].split(","))
        return options.get("hidepid", "0") not in ("0", "off")
    return True


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start ticks) of process `pid` from /proc/<pid>/stat, or None when it cannot be read."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # after "pid (comm)": comm may hold spaces and parentheses
    try:
        return fields[0], int(fields[START_FIELD - 3])
    except (IndexError, ValueError):
        return None
