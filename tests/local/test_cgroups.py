"""cgroup limits and accounting on this machine's real hierarchies (v1 here; v2 where mounted)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from runner.errors import PlatformError
from runner.platforms.local.cgroups import cgroup_from_spec, detect_driver, unified_driver_without_controllers

BUSY_LOOP = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


@pytest.fixture
def group_name(request) -> str:
    name = f"test-cg-{os.getpid()}-{request.node.name[:20]}"
    yield name
    detect_driver().remove_tree(name)


def _cores_used(group, seconds: float) -> float:
    before, start = group.cpu_usage_seconds(), time.monotonic()
    time.sleep(seconds)
    return (group.cpu_usage_seconds() - before) / (time.monotonic() - start)


def _start_in(group, code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], preexec_fn=lambda: group.add(os.getpid()))


def test_cpu_limit_caps_a_busy_loop_like_a_kubelet(group_name):
    group = detect_driver().create(f"{group_name}/busy")
    group.set_cpu_limit(0.2)
    assert group.cpu_quota() == (20000, 100000)
    process = _start_in(group, BUSY_LOOP)
    try:
        time.sleep(0.5)
        used = _cores_used(group, 3.0)
    finally:
        process.kill()
        process.wait()
    assert 0.12 < used <= 0.23, f"busy loop used {used:.3f} cores under a 0.2 limit"


def test_unlimited_group_lets_a_busy_loop_use_a_core(group_name):
    group = detect_driver().create(f"{group_name}/free")
    group.set_cpu_limit(None)
    assert group.cpu_quota()[0] == -1
    process = _start_in(group, BUSY_LOOP)
    try:
        time.sleep(0.5)
        used = _cores_used(group, 2.0)
    finally:
        process.kill()
        process.wait()
    assert used > 0.4, f"an unlimited busy loop got only {used:.2f} cores"


def test_memory_limit_kills_a_process_that_exceeds_it(group_name):
    group = detect_driver().create(f"{group_name}/oom")
    group.set_memory_limit(64 * 2**20)
    assert group.memory_limit_bytes() == 64 * 2**20
    process = _start_in(group, "x = bytearray(256 * 2**20)\nimport time; time.sleep(5)")
    assert process.wait(timeout=20) == -9  # the OOM killer's SIGKILL


def test_working_set_follows_allocations(group_name):
    group = detect_driver().create(f"{group_name}/mem")
    code = "x = bytearray(80 * 2**20)\nfor i in range(0, len(x), 4096): x[i] = 1\nimport time; time.sleep(30)"
    process = _start_in(group, code)
    try:
        deadline = time.monotonic() + 10
        while group.memory_working_set_bytes() < 80 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert group.memory_working_set_bytes() >= 80 * 2**20
    finally:
        process.kill()
        process.wait()


def test_remove_kills_what_is_inside_and_deletes_the_folders(group_name):
    group = detect_driver().create(f"{group_name}/gone")
    process = _start_in(group, "import time; time.sleep(60)")
    time.sleep(0.2)
    assert group.pids() == [process.pid]
    group.remove()
    assert process.wait(timeout=5) == -9
    assert all(not p.exists() for p in group._dirs())


def test_spec_round_trips_for_another_process(group_name):
    group = detect_driver().create(f"{group_name}/spec")
    group.set_cpu_limit(0.5)
    assert cgroup_from_spec(group.spec()).cpu_quota() == (50000, 100000)


def test_unified_hierarchy_accounts_cpu_and_names_a_missing_controller(group_name):
    main = detect_driver()
    driver = main if main.version == 2 else unified_driver_without_controllers()  # v1 hosts: the cgroup2 mount
    if driver is None:
        pytest.fail("no cgroup2 hierarchy is mounted (the local platform reads cpu.stat there on cgroup v1 hosts)")
    group = driver.create(f"{group_name}/v2")
    process = _start_in(group, BUSY_LOOP)
    try:
        time.sleep(0.5)
        assert _cores_used(group, 1.0) > 0.3  # cpu.stat's usage_usec works without the cpu controller
        if "cpu" not in (driver.mounts["unified"] / "cgroup.controllers").read_text().split():
            with pytest.raises(PlatformError, match=r"cpu\.max does not exist"):
                group.set_cpu_limit(0.2)
    finally:
        process.kill()
        process.wait()
        driver.remove_tree(group_name)
