"""Build and run the open-loop generator in `bench/openloop/` (Go, standard library only).

An HTTP/1.1 load generator independent of Locust, for checking the toolkit's knee against ground truth:
arrivals on an absolute clock (poisson, uniform, synchronized bursts or Poisson clusters) that never wait
for responses, latency from each request's intended send time, and a cgroup's CPU read straight from its
counters. Loopback targets only.

    from openloop import build, run                # from a script in bench/ (or with bench/ on sys.path)
    result = run("http://127.0.0.1:10080", 1000, 10, "poisson", cgroup=envoy_cpuacct_folder, limit_cores=0.3)

    python3 bench/openloop.py --url http://127.0.0.1:10080 --rate 1000 --duration 10 --arrivals poisson

This module imports neither Locust nor the runner package.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent / "openloop"
# the go of every build of the project: a go >= 1.24 on PATH, else the pinned Go it downloads once into the cache
GO_OF_THE_BUILDS = Path(__file__).resolve().parent.parent / "k8s" / "cluster" / "build.sh"


class OpenloopError(RuntimeError):
    """The generator refused its arguments (exit 2) or failed; the message is its stderr."""

    def __init__(self, returncode: int, message: str) -> None:
        super().__init__(message)
        self.returncode = returncode


def cache_dir() -> Path:
    """`$GATEWAY_SIZER_CACHE`, else ~/.cache/gateway-sizer (the rule of runner.paths.cache_dir)."""
    return Path(os.environ.get("GATEWAY_SIZER_CACHE") or Path.home() / ".cache" / "gateway-sizer")


def _sources() -> list[Path]:
    return sorted(
        p for p in SOURCE.iterdir() if p.name == "go.mod" or (p.suffix == ".go" and not p.name.endswith("_test.go"))
    )


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _go() -> str:
    """k8s/cluster/build.sh's go (`make test` fetches it first): not merely the go on PATH, which on Debian 12 can be
    golang-go's 1.19, too old for the generator's go.mod (1.22)."""
    found = subprocess.run(
        [str(GO_OF_THE_BUILDS), "--print-path", "go"], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if found.returncode != 0 or not found.stdout.strip():
        why = (found.stderr.strip().splitlines() or ["no go found"])[-1]
        raise OpenloopError(2, f"no Go toolchain for the generator ({why}); run make test-tools, which fetches one")
    return found.stdout.strip().splitlines()[-1]


def go_env() -> dict[str, str]:
    """Go's caches under the project cache, so nothing lands in the repository; no toolchain downloads."""
    go = cache_dir() / "go"
    return {**os.environ, "GOCACHE": str(go / "build"), "GOMODCACHE": str(go / "mod"), "GOTOOLCHAIN": "local",
            "CGO_ENABLED": "0"}  # fmt: skip


def build() -> Path:
    """The generator's binary, built once per source hash into <cache>/bin/openloop-<hash>/openloop."""
    binary = cache_dir() / "bin" / f"openloop-{source_hash()}" / "openloop"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=binary.parent) as tmp:
        built = Path(tmp) / "openloop"
        result = subprocess.run([_go(), "build", "-trimpath", "-o", str(built), "."], cwd=SOURCE, env=go_env(),
                                capture_output=True, text=True)  # fmt: skip
        if result.returncode != 0:
            raise OpenloopError(result.returncode, f"go build failed: {result.stderr.strip()[-2000:]}")
        built.replace(binary)  # atomic: a concurrent build of the same sources writes the same file
    return binary


def command(url: str, rate: float, seconds: float, arrivals: str, cgroup: str | Path | None = None, *,
            warmup: float | None = None, connections: int | None = None, burst: int | None = None,
            cpu_cgroup: str | Path | None = None, limit_cores: float | None = None, path: str | None = None,
            host: str | None = None, accept_encoding: str | None = None, http: str | None = None,
            timeout: float | None = None, seed: int | None = None,
            dump_intended: str | Path | None = None, rotate: bool = False,
            cluster_mean: float | None = None) -> list[str]:  # fmt: skip
    """The generator's command line; options left at None take the program's defaults."""
    argv = [str(build()), "--url", url, "--rate", repr(float(rate)), "--duration", repr(float(seconds)),
            "--arrivals", arrivals]  # fmt: skip
    options: dict[str, Any] = {
        "cgroup": cgroup, "cpu-cgroup": cpu_cgroup, "warmup": warmup, "connections": connections, "burst": burst,
        "limit-cores": limit_cores, "path": path, "host": host, "accept-encoding": accept_encoding, "http": http,
        "timeout": timeout, "seed": seed, "dump-intended": dump_intended, "cluster-mean": cluster_mean,
    }  # fmt: skip
    for name, value in options.items():
        if value is not None:
            argv += [f"--{name}={value}"]
    return [*argv, "--rotate"] if rotate else argv


def run(url: str, rate: float, seconds: float, arrivals: str, cgroup: str | Path | None = None,
        **options: Any) -> dict[str, Any]:  # fmt: skip
    """Run the generator (warm-up, then `seconds` measured at `rate`) and return its JSON result.

    Keyword options: warmup, connections, burst, cluster_mean, cpu_cgroup, limit_cores, path, host,
    accept_encoding, http ("raw" or "nethttp"), timeout, seed, dump_intended. Raises OpenloopError on a refusal
    or failure.
    """
    argv = command(url, rate, seconds, arrivals, cgroup, **options)
    budget = seconds + float(options.get("warmup") or 2) + 2 * float(options.get("timeout") or 5) + 30
    result = subprocess.run(argv, capture_output=True, text=True, timeout=budget, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise OpenloopError(result.returncode, result.stderr.strip() or f"openloop exited {result.returncode}")
    return json.loads(result.stdout)


if __name__ == "__main__":
    os.execv(build(), ["openloop", *sys.argv[1:]])
