"""CPU and memory limits for local "pods", through cgroup v1 (cfs quota, cpuacct, memory) or v2.

A `Cgroup` caps and accounts one container the way a kubelet does: a CPU limit is a CFS quota per
period, a memory limit is the hard limit, CPU used comes from cpuacct (v1) or cpu.stat (v2), and the
working set is usage minus inactive file pages (cAdvisor's definition).

Every group the project makes lives under one folder, `gateway-sizer/`, in each hierarchy, so a crashed
run's leftovers are found and removed by walking that folder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from runner.errors import PlatformError

ROOT_NAME = "gateway-sizer"
CFS_PERIOD_US = 100_000  # the kubelet's default CPU CFS period
MOUNTINFO = Path("/proc/self/mountinfo")
_V1_CONTROLLERS = ("cpu", "cpuacct", "memory")
_V1_CPUSET = "cpuset"  # optional: without it, no CPU pinning (isolation), the rest works
_REMOVE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Limits:
    """A container's CPU and memory limits, as a pod spec gives them (None: no limit)."""

    cpu_cores: float | None = None
    memory_bytes: int | None = None

    def apply(self, cgroup: Cgroup) -> None:
        cgroup.set_cpu_limit(self.cpu_cores)
        cgroup.set_memory_limit(self.memory_bytes)


class Cgroup(Protocol):
    """One container's cgroup."""

    name: str

    @property
    def usage_folder(self) -> Path:
        """The folder whose counter gives the CPU used: cpuacct's (v1), the group's (v2)."""
        ...

    @property
    def throttling_folder(self) -> Path | None:
        """v1: the cpu controller's folder (cpu.stat, the CFS quota); v2: None, the usage folder has them."""
        ...

    def add(self, pid: int) -> None: ...
    def procs_files(self) -> list[Path]: ...
    def set_cpu_limit(self, cores: float | None, period_us: int = CFS_PERIOD_US) -> None: ...
    def set_memory_limit(self, limit_bytes: int | None) -> None: ...
    def set_cpus(self, cpus: str | None) -> None: ...
    def cpus(self) -> str | None: ...
    def cpu_quota(self) -> tuple[int, int]: ...
    def cpu_usage_seconds(self) -> float: ...
    def cpu_throttling(self) -> tuple[int, int, float]: ...
    def memory_working_set_bytes(self) -> int: ...
    def memory_limit_bytes(self) -> int | None: ...
    def oom_kills(self) -> int: ...
    def pids(self) -> list[int]: ...
    def remove(self) -> None: ...
    def spec(self) -> dict[str, Any]: ...


def _write(path: Path, value: str) -> None:
    if not path.exists():
        raise PlatformError(
            f"{path} does not exist", "the cgroup controller it belongs to is not enabled for this hierarchy"
        )
    try:
        path.write_text(value)
    except PermissionError:
        raise PlatformError(
            f"cannot write {path}", "run as root, or in a cgroup delegated to you (systemd-run --scope -p Delegate=yes)"
        ) from None
    except OSError as error:
        raise PlatformError(f"cannot write {value!r} to {path}: {error.strerror}") from None


def _read_int(path: Path) -> int:
    return int(path.read_text().split()[0])


def _read_text(path: Path) -> str:
    return path.read_text().strip()


def _make_cpuset_v1(directory: Path) -> None:
    """cgroup v1's cpuset wants cpus and mems set at every level before a task may join: new folders
    start empty, so each one takes its parent's."""
    missing = []
    folder = directory
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for new in reversed(missing):
        new.mkdir()
        for name in ("cpuset.cpus", "cpuset.mems"):
            if not _read_text(new / name):
                _write(new / name, _read_text(new.parent / name))


def _stat(path: Path) -> dict[str, int]:
    values: dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            values[key] = int(value)
    return values


def _pids_in(procs_files: list[Path]) -> list[int]:
    pids: set[int] = set()
    for procs in procs_files:
        with contextlib.suppress(FileNotFoundError):
            pids.update(int(p) for p in procs.read_text().split())
    return sorted(pids)


def _kill_and_rmdir(directories: list[Path], procs_files: list[Path]) -> None:
    """SIGKILL what is still inside, then remove the folders (deepest first); retry while the kernel reaps."""
    deadline = time.monotonic() + _REMOVE_TIMEOUT_S
    while True:
        for pid in _pids_in(procs_files):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        remaining = []
        for directory in sorted(directories, key=lambda p: len(p.parts), reverse=True):
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                remaining.append(directory)
        if not remaining:
            return
        if time.monotonic() > deadline:
            raise PlatformError(f"cannot remove cgroup {remaining[0]}: processes are still inside")
        time.sleep(0.05)


@dataclass
class CgroupV1:
    """A container's folders in the cpu, cpuacct and memory hierarchies (they may share one mount), and
    in the cpuset hierarchy when it is mounted."""

    name: str
    cpu: Path
    cpuacct: Path
    memory: Path
    cpuset: Path | None = None

    @property
    def usage_folder(self) -> Path:
        return self.cpuacct

    @property
    def throttling_folder(self) -> Path | None:
        return self.cpu

    def _dirs(self) -> list[Path]:
        return list(dict.fromkeys([self.cpu, self.cpuacct, self.memory, *([self.cpuset] if self.cpuset else [])]))

    def create(self) -> None:
        for directory in self._dirs():
            if directory == self.cpuset:
                _make_cpuset_v1(directory)
            else:
                directory.mkdir(parents=True, exist_ok=True)

    def set_cpus(self, cpus: str | None) -> None:
        """Pin to `cpus` ("1", "0-2"); None: whatever the parent has."""
        if self.cpuset is None:
            if cpus is not None:
                raise PlatformError("cannot pin CPUs: the cpuset cgroup controller is not mounted")
            return
        _write(
            self.cpuset / "cpuset.cpus", cpus if cpus is not None else _read_text(self.cpuset.parent / "cpuset.cpus")
        )

    def cpus(self) -> str | None:
        return _read_text(self.cpuset / "cpuset.effective_cpus") if self.cpuset else None

    def add(self, pid: int) -> None:
        for directory in self._dirs():
            _write(directory / "cgroup.procs", str(pid))

    def set_cpu_limit(self, cores: float | None, period_us: int = CFS_PERIOD_US) -> None:
        _write(self.cpu / "cpu.cfs_period_us", str(period_us))
        quota = -1 if cores is None else max(1000, round(cores * period_us))
        _write(self.cpu / "cpu.cfs_quota_us", str(quota))

    def set_memory_limit(self, limit_bytes: int | None) -> None:
        _write(self.memory / "memory.limit_in_bytes", str(limit_bytes if limit_bytes else -1))

    def cpu_quota(self) -> tuple[int, int]:
        return _read_int(self.cpu / "cpu.cfs_quota_us"), _read_int(self.cpu / "cpu.cfs_period_us")

    def cpu_usage_seconds(self) -> float:
        return _read_int(self.cpuacct / "cpuacct.usage") / 1e9

    def cpu_throttling(self) -> tuple[int, int, float]:
        stat = _stat(self.cpu / "cpu.stat")
        return stat.get("nr_periods", 0), stat.get("nr_throttled", 0), stat.get("throttled_time", 0) / 1e9

    def memory_working_set_bytes(self) -> int:
        usage = _read_int(self.memory / "memory.usage_in_bytes")
        inactive = _stat(self.memory / "memory.stat").get("total_inactive_file", 0)
        return max(0, usage - inactive)

    def memory_limit_bytes(self) -> int | None:
        limit = _read_int(self.memory / "memory.limit_in_bytes")
        return None if limit >= 2**62 else limit

    def oom_kills(self) -> int:
        """Processes the memory cgroup's OOM killer has killed in this group (0 when not readable)."""
        try:
            return _stat(self.memory / "memory.oom_control").get("oom_kill", 0)
        except (FileNotFoundError, ValueError):
            return 0

    def procs_files(self) -> list[Path]:
        """The cgroup.procs file of each hierarchy: a pid written to all of them joins this group."""
        return [d / "cgroup.procs" for d in self._dirs()]

    def pids(self) -> list[int]:
        return _pids_in(self.procs_files())

    def remove(self) -> None:
        _kill_and_rmdir(self._dirs(), [d / "cgroup.procs" for d in self._dirs()])

    def spec(self) -> dict[str, Any]:
        return {
            "version": 1,
            "name": self.name,
            "cpu": str(self.cpu),
            "cpuacct": str(self.cpuacct),
            "memory": str(self.memory),
            "cpuset": str(self.cpuset) if self.cpuset else None,
        }


@dataclass
class CgroupV2:
    """A container's folder in the unified hierarchy."""

    name: str
    path: Path

    @property
    def usage_folder(self) -> Path:
        return self.path

    @property
    def throttling_folder(self) -> Path | None:
        return None

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def add(self, pid: int) -> None:
        _write(self.path / "cgroup.procs", str(pid))

    def set_cpu_limit(self, cores: float | None, period_us: int = CFS_PERIOD_US) -> None:
        quota = "max" if cores is None else str(max(1000, round(cores * period_us)))
        _write(self.path / "cpu.max", f"{quota} {period_us}")

    def set_memory_limit(self, limit_bytes: int | None) -> None:
        _write(self.path / "memory.max", str(limit_bytes) if limit_bytes else "max")

    def set_cpus(self, cpus: str | None) -> None:
        """Pin to `cpus` ("1", "0-2"); None: whatever the parent has."""
        if not (self.path / "cpuset.cpus").exists():
            if cpus is not None:
                raise PlatformError("cannot pin CPUs: the cpuset controller is not enabled for this cgroup")
            return
        _write(self.path / "cpuset.cpus", cpus or "")

    def cpus(self) -> str | None:
        path = self.path / "cpuset.cpus.effective"
        return _read_text(path) if path.exists() else None

    def cpu_quota(self) -> tuple[int, int]:
        try:
            quota, period = (self.path / "cpu.max").read_text().split()
        except FileNotFoundError:
            return -1, CFS_PERIOD_US
        return (-1 if quota == "max" else int(quota)), int(period)

    def cpu_usage_seconds(self) -> float:
        return _stat(self.path / "cpu.stat")["usage_usec"] / 1e6

    def cpu_throttling(self) -> tuple[int, int, float]:
        stat = _stat(self.path / "cpu.stat")
        return stat.get("nr_periods", 0), stat.get("nr_throttled", 0), stat.get("throttled_usec", 0) / 1e6

    def memory_working_set_bytes(self) -> int:
        try:
            usage = _read_int(self.path / "memory.current")
        except FileNotFoundError:
            return 0
        inactive = _stat(self.path / "memory.stat").get("inactive_file", 0)
        return max(0, usage - inactive)

    def memory_limit_bytes(self) -> int | None:
        try:
            text = (self.path / "memory.max").read_text().strip()
        except FileNotFoundError:
            return None
        return None if text == "max" else int(text)

    def oom_kills(self) -> int:
        """Processes the memory cgroup's OOM killer has killed in this group (0 when not readable)."""
        try:
            return _stat(self.path / "memory.events").get("oom_kill", 0)
        except (FileNotFoundError, ValueError):
            return 0

    def procs_files(self) -> list[Path]:
        return [self.path / "cgroup.procs"]

    def pids(self) -> list[int]:
        return _pids_in(self.procs_files())

    def remove(self) -> None:
        _kill_and_rmdir([self.path], [self.path / "cgroup.procs"])

    def spec(self) -> dict[str, Any]:
        return {"version": 2, "name": self.name, "path": str(self.path)}


def cgroup_from_spec(spec: dict[str, Any]) -> Cgroup:
    """Rebuild a cgroup handle from `Cgroup.spec()` (the exporter runs in another process)."""
    if spec["version"] == 1:
        cpuset = Path(spec["cpuset"]) if spec.get("cpuset") else None
        return CgroupV1(spec["name"], Path(spec["cpu"]), Path(spec["cpuacct"]), Path(spec["memory"]), cpuset)
    return CgroupV2(spec["name"], Path(spec["path"]))


@dataclass(frozen=True)
class CgroupDriver:
    """Where this machine's cgroup hierarchies are, and how to make groups in them."""

    version: int
    mounts: dict[str, Path]  # v1: controller -> mount; v2: {"unified": mount}

    def create(self, relative: str) -> Cgroup:
        """Make (or reuse) `gateway-sizer/<relative>` in every hierarchy used."""
        name = relative.rsplit("/", 1)[-1]
        group: CgroupV1 | CgroupV2
        if self.version == 1:
            cpuset = self.mounts[_V1_CPUSET] / ROOT_NAME / relative if _V1_CPUSET in self.mounts else None
            cpu, cpuacct, memory = (self.mounts[c] / ROOT_NAME / relative for c in _V1_CONTROLLERS)
            group = CgroupV1(name, cpu, cpuacct, memory, cpuset)
        else:
            root = self.mounts["unified"]
            _enable_v2_controllers(root, root / ROOT_NAME, relative)
            group = CgroupV2(name, root / ROOT_NAME / relative)
        try:
            group.create()
        except PermissionError:
            raise PlatformError(
                f"cannot create cgroup {relative}", "run as root, or in a cgroup delegated to you"
            ) from None
        return group

    def remove_tree(self, relative: str = "") -> None:
        """Kill every process under `gateway-sizer/<relative>` and remove the folders."""
        tops = [m / ROOT_NAME / relative for m in dict.fromkeys(self.mounts.values())]
        directories = [d for top in tops if top.is_dir() for d in [top, *(p for p in top.rglob("*") if p.is_dir())]]
        if relative == "":
            directories = [d for d in directories if d not in tops]
        _kill_and_rmdir(directories, [d / "cgroup.procs" for d in directories])

    def children(self, relative: str = "") -> list[str]:
        """Names of the groups directly under `gateway-sizer/<relative>`."""
        top = next(iter(self.mounts.values())) / ROOT_NAME / relative
        return sorted(p.name for p in top.iterdir() if p.is_dir()) if top.is_dir() else []


def _enable_v2_controllers(root: Path, top: Path, relative: str) -> None:
    """cgroup v2 hands controllers down level by level through cgroup.subtree_control."""
    parents = [root, top, *(top / "/".join(relative.split("/")[:i]) for i in range(1, relative.count("/") + 1))]
    for parent in parents:
        parent.mkdir(exist_ok=True)
        available = (parent / "cgroup.controllers").read_text().split()
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        missing = [c for c in ("cpu", "memory", "cpuset") if c in available and c not in enabled]
        if missing:
            _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))


def _mounts() -> list[tuple[str, Path, set[str]]]:
    found = []
    for line in MOUNTINFO.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, right_fields = left.split(), right.split()
        if len(right_fields) >= 3 and right_fields[0] in ("cgroup", "cgroup2"):
            found.append((right_fields[0], Path(fields[4]), set(right_fields[2].split(","))))
    return found


def detect_driver() -> CgroupDriver:
    """Prefer cgroup v2 when its cpu and memory controllers are available, else v1's hierarchies."""
    mounts = _mounts()
    for fstype, path, _options in mounts:
        if fstype == "cgroup2":
            controllers = (path / "cgroup.controllers").read_text().split() if path.exists() else []
            if {"cpu", "memory"} <= set(controllers):
                return CgroupDriver(2, {"unified": path})
    wanted = (*_V1_CONTROLLERS, _V1_CPUSET)
    v1 = {c: path for fstype, path, options in mounts if fstype == "cgroup" for c in wanted if c in options}
    if all(c in v1 for c in _V1_CONTROLLERS):
        return CgroupDriver(1, v1)
    raise PlatformError(
        "no usable cgroup hierarchy: need cgroup v2 with cpu and memory controllers, or v1 cpu, cpuacct, memory",
        "mount the cgroup controllers (or run on a host with systemd's default cgroup v2)",
    )


def unified_driver_without_controllers() -> CgroupDriver | None:
    """The cgroup2 mount even when it has no controllers (for accounting-only use and tests)."""
    for fstype, path, _options in _mounts():
        if fstype == "cgroup2":
            return CgroupDriver(2, {"unified": path})
    return None
