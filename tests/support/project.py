"""The project's folders, and the code outside tests/ that tests load.

bench/ and locustfiles/ are folders of scripts that import each other by bare name (`from openloop import
build`, `from lean_http import LeanHttpClient`), as their runners put the script's folder on the path. Neither
goes on the test process's path: a bench module is loaded from its file (`bench_module`), and a locustfile is
only ever imported in a child process, which gets the folder through PYTHONPATH (`child_env`), as Locust puts
a locustfile's folder on its path. Importing Locust would monkey-patch the test process (gevent).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from runner.paths import LOCUSTFILE_DIR, PROJECT_ROOT, cache_dir

TESTS = PROJECT_ROOT / "tests"
BENCH = PROJECT_ROOT / "bench"
LOCUSTFILES = LOCUSTFILE_DIR
K8S = PROJECT_ROOT / "k8s"
CACHE = cache_dir()


def bench_module(name: str) -> ModuleType:
    """bench/<name>.py, loaded from its file once (under its own name, as a bench script imports it)."""
    if (loaded := sys.modules.get(name)) is not None and Path(loaded.__file__ or "") == BENCH / f"{name}.py":
        return loaded
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"bench/{name}.py not found"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def child_env(*folders: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a Python child that imports from `folders` (tests/ for the support
    package, LOCUSTFILES for a locustfile's modules), ahead of any PYTHONPATH already set."""
    paths = [str(folder) for folder in folders]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **extra}
