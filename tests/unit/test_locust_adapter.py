"""runner.locust is the one place that knows Locust's side: it must agree with the locustfiles.

The locustfiles are read as source (ast), not imported: importing Locust would monkey-patch the test
process with gevent."""

from __future__ import annotations

import ast
from typing import get_args

from runner import locust
from runner.paths import LOCUSTFILE_DIR
from runner.scenario import ArrivalModel


def _module(name: str) -> ast.Module:
    return ast.parse((LOCUSTFILE_DIR / name).read_text())


def _constants(tree: ast.Module) -> dict[str, object]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def test_the_master_extension_serves_the_paths_the_adapter_calls():
    routes = _constants(_module(locust.STATS_EXTENSION))
    assert routes["SNAPSHOT_ROUTE"] == locust.SNAPSHOT_PATH
    assert routes["HEARTBEAT_ROUTE"] == locust.HEARTBEAT_PATH
    assert routes["STATE_ROUTE"] == locust.STATE_PATH
    assert routes["WORKER_REPORT_INTERVAL_S"] == locust.WORKER_REPORT_INTERVAL_S  # what REPORT_LAG_S waits for


def test_the_locustfile_takes_every_option_the_adapter_sends_and_defines_its_user_classes():
    tree = _module("gateway.py")
    flags = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args
        and isinstance(node.args[0], ast.Constant)
    }  # fmt: skip
    options = locust.LocustOptions("h", "/", new_connection=True)
    assert {f"--{key.replace('_', '-')}" for key in options.as_form()} == flags
    assert {arg for arg in options.as_args() if arg.startswith("--")} == flags
    # a flag goes on the command line only when set; its form field says true/false, as Locust's web UI reads it
    assert "--new-connection" not in locust.LocustOptions("h", "/").as_args()
    assert locust.LocustOptions("h", "/").as_form()["new_connection"] == "false"
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert set(locust.USER_CLASSES.values()) <= classes
    assert set(_constants(tree)["ARRIVALS"]) == set(get_args(ArrivalModel))  # type: ignore[call-overload]


def test_the_guard_extension_reads_the_names_the_runner_sets():
    names = _constants(_module(locust.GUARD_EXTENSION))
    assert (names["TARGETS_ENV"], names["TOKEN_ENV"], names["TOKEN_HEADER"]) == (
        locust.TARGETS_ENV, locust.TOKEN_ENV, locust.TOKEN_HEADER,
    )  # fmt: skip
    assert locust.GUARD_EXTENSION in locust.locustfile_arg(LOCUSTFILE_DIR / "gateway.py")
