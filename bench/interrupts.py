"""Interrupts: SIGINT, SIGTERM and SIGKILL at random points of short local sweeps, and what they leave.

Each trial starts a short sweep (two configurations of a fixed schedule, 3 s windows, 2 rounds; with
GATEWAY_SIZER_BENCH_TINY 2 levels and 1 round), waits a random time, sends a random signal, and then counts:
- leaks: processes still running in the sweep's cgroup tree, the tree itself, its ports still listening
  (after SIGKILL, once `gateway-sizer testbed down` has run, as the README says to);
- load left running right after a SIGKILL (Locust alive before any clean-up);
- completed configurations lost: finished in summary.json before the signal, not finished after it;
- whether `--resume` then completes the run.

    .venv/bin/python bench/interrupts.py [--trials 20] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from _runs import REPO, TINY, default_scenario

from runner.paths import state_dir
from runner.platforms.local.cgroups import ROOT_NAME, detect_driver

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
LEVELS = [150, 300, 450]
ROUNDS = 2
# A tiny run (the test that runs every bench): 2 levels and 1 round, so the configurations and the resume end
# sooner. Its --seed 3 sends SIGKILL 11.1 s in, still inside the first configuration: the test bed is up about 4 s
# in, and the configuration's warm-up and two windows take some 15 s from there (the third level came after them).
TINY_LEVELS, TINY_ROUNDS = LEVELS[:2], 1


def _scenario(folder: Path) -> Path:
    scenario = default_scenario()
    scenario["name"] = "interrupts"
    scenario["envoy"]["cpu"] = [0.25, 0.3]
    levels, rounds = (TINY_LEVELS, TINY_ROUNDS) if TINY else (LEVELS, ROUNDS)
    scenario["load"].update(search="fixed", rps=levels, step_seconds=3, warmup_seconds=1, settle_seconds=1,
                            rounds=rounds)  # fmt: skip
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def _tree(pid: int) -> list[Path]:
    driver = detect_driver()
    return [
        m / ROOT_NAME / f"sweep-{pid}" for m in set(driver.mounts.values()) if (m / ROOT_NAME / f"sweep-{pid}").exists()
    ]


def _pids(pid: int, pods: tuple[str, ...] = ()) -> list[int]:
    found = []
    for top in _tree(pid):
        for procs in top.rglob("cgroup.procs"):
            if not pods or procs.parent.name in pods:
                found += [int(p) for p in procs.read_text().split()]
    return sorted(set(found))


def _alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and not stat.read_text().split(") ")[1].startswith("Z"):
            left.append(pid)
    return left


def _listening(ports: list[int]) -> list[int]:
    busy = []
    for port in ports:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                busy.append(port)
    return busy


def _finished(results: Path) -> set[str]:
    path = results / "latest" / "summary.json"
    if not path.exists():
        return set()
    configs = json.loads(path.read_text())["configs"]
    return {c["key"] for c in configs if c["status"] in ("saturated", "not-saturated", "invalid")}


def _sizer(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runner", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    leaks: int
    load_left: int
    lost: int
    resumed: bool | None
    traceback: bool
    honoured: bool  # the runner ended with the signal's exit code (130, 143; killed by SIGKILL)


def trial(rng: random.Random, number: int) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="gateway-sizer-interrupt-") as folder:
        results = Path(folder)
        command = [sys.executable, "-m", "runner", "sweep", "--scenario", str(_scenario(results)), "--free-ports",
                   "--results", str(results)]  # fmt: skip
        sweep = subprocess.Popen(command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
        delay, signum = rng.uniform(0.5, 45.0), rng.choice(SIGNALS)
        time.sleep(delay)
        started, before = _pids(sweep.pid), _finished(results)
        record = state_dir() / f"sweep-{sweep.pid}.json"
        urls = json.loads(record.read_text())["urls"] if record.exists() else {}
        ports = [int(u.rsplit(":", 1)[1]) for u in urls.values()]
        ended = sweep.poll() is not None
        if not ended:
            sweep.send_signal(signum)
        _, stderr = sweep.communicate(timeout=120)
        load_left: list[int] = []
        if signum == signal.SIGKILL and not ended:
            time.sleep(2)
            load_left = _alive(_pids(sweep.pid, ("locust-master", "locust-worker-0")))
            _sizer("testbed", "down", timeout=120)
        leaks = {
            "processes": len(_alive(started)),
            "cgroups": len(_tree(sweep.pid)),
            "ports": len(_listening(ports)),
        }
        lost = len(before - _finished(results))
        resumed = None
        if (results / "latest" / "summary.json").exists():
            again = _sizer("sweep", "--resume", str((results / "latest").resolve()), "--free-ports")
            resumed = again.returncode == 0 and json.loads((results / "latest" / "summary.json").read_text())[
                "status"] == "complete"  # fmt: skip
        name = "none (ended first)" if ended else signal.Signals(signum).name
        traceback = "Traceback" in stderr
        expected = -signal.SIGKILL if signum == signal.SIGKILL else 128 + signum
        honoured = ended or sweep.returncode == expected
        print(f"trial {number:>2}: {name:<18} after {delay:4.1f} s: leaks {leaks}, load left {len(load_left)}, "
              f"completed lost {lost}, traceback {traceback}, exit {sweep.returncode}, "
              f"resume completes {resumed}", flush=True)  # fmt: skip
        return Outcome(sum(leaks.values()), len(load_left), lost, resumed, traceback, honoured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    outcomes = [trial(rng, n + 1) for n in range(args.trials)]
    print(
        f"{len(outcomes)} interrupts: leaks {sum(o.leaks for o in outcomes)}, load left running "
        f"{sum(o.load_left for o in outcomes)}, completed configurations lost {sum(o.lost for o in outcomes)}, "
        f"tracebacks {sum(o.traceback for o in outcomes)}, signals not honoured (wrong exit code) "
        f"{sum(not o.honoured for o in outcomes)}, resumes completed "
        f"{sum(o.resumed is True for o in outcomes)} of {sum(o.resumed is not None for o in outcomes)}"
    )


if __name__ == "__main__":
    main()
