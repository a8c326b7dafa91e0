"""Where each cgroup version keeps the CPU counters the open-loop generator reads (bench/knee_truth.py):
the protocol's folders, from handles rebuilt from their spec (no cgroup is touched)."""

from __future__ import annotations

from pathlib import Path

from runner.platforms.local.cgroups import cgroup_from_spec


def test_v1_reads_usage_from_cpuacct_and_throttling_from_the_cpu_folder():
    spec = {"version": 1, "name": "envoy", "cpu": "/cg/cpu/x", "cpuacct": "/cg/cpuacct/x", "memory": "/cg/memory/x"}
    group = cgroup_from_spec(spec)
    assert (group.usage_folder, group.throttling_folder) == (Path("/cg/cpuacct/x"), Path("/cg/cpu/x"))
    assert group.spec() == {**spec, "cpuset": None}


def test_v2_reads_both_from_its_one_folder():
    group = cgroup_from_spec({"version": 2, "name": "envoy", "path": "/cg/unified/x"})
    assert (group.usage_folder, group.throttling_folder) == (Path("/cg/unified/x"), None)
