"""A Lease holder's process as this machine's /proc names it: ended only when provably so, never a reused pid taken
for it, never a process of another machine or PID namespace judged from here."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from runner.platforms.kubernetes import holder_process
from runner.platforms.kubernetes.holder_process import HolderProcess, named, own


def _started(*command: str) -> tuple[subprocess.Popen[bytes], HolderProcess]:
    child = subprocess.Popen(list(command))
    process = named(child.pid)  # running, or exited and not yet reaped
    assert process is not None
    return child, process


def test_this_process_is_named_by_its_boot_namespaces_pid_and_start_and_has_not_ended():
    this = own()
    assert this is not None and this.pid == os.getpid()
    assert this.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert this.pid_namespace == os.readlink("/proc/self/ns/pid") and this.pid_namespace.startswith("pid:[")
    assert HolderProcess.parse(str(this)) == this  # the annotation reads back as written
    assert not this.has_ended()  # the same process: no takeover


def test_a_process_that_exited_has_ended_once_reaped_and_as_a_zombie():
    child, process = _started(sys.executable, "-c", "import time; time.sleep(30)")
    assert not process.has_ended()
    child.kill()
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped: a zombie
    assert Path(f"/proc/{child.pid}").exists() and process.has_ended()
    child.wait()
    assert not Path(f"/proc/{child.pid}").exists() and process.has_ended()


def test_a_pid_that_names_a_process_started_at_another_time_has_ended():
    this = own()
    assert this is not None
    assert this.model_copy(update={"start_ticks": this.start_ticks + 1}).has_ended()


def test_a_process_of_another_machine_or_namespace_is_never_judged_ended_from_here():
    child, process = _started(sys.executable, "-c", "pass")
    child.wait()
    assert process.has_ended()
    for elsewhere in (
        {"boot_id": str(uuid.uuid4())},
        {"pid_namespace": "pid:[1]"},
        {"time_namespace": "time:[1]"},
    ):
        assert not process.model_copy(update=elsewhere).has_ended(), elsewhere


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "12345",
        "{}",
        '{"boot_id": "b", "pid_namespace": "pid:[1]", "time_namespace": null, "pid": "7"}',
        '{"boot_id": "b", "pid_namespace": "pid:[1]", "time_namespace": null, "pid": 0, "start_ticks": 1}',
    ],
)
def test_an_annotation_in_another_form_names_no_process(text):
    assert HolderProcess.parse(text) is None


def test_without_proc_nothing_is_named_and_nothing_judged_ended(monkeypatch, tmp_path):
    """A system without /proc (not Linux): the Lease names no process and a recorded one is waited out."""
    this = own()
    assert this is not None
    monkeypatch.setattr(holder_process, "PROC", tmp_path / "no-proc")
    monkeypatch.setattr(holder_process, "BOOT_ID", tmp_path / "no-proc" / "boot_id")
    assert own() is None and named(1) is None
    assert not this.model_copy(update={"start_ticks": this.start_ticks + 1}).has_ended()
