"""Locust's web UI during a real local sweep: the gateway-sizer tabs show what the runner is measuring,
read off the page in headless Chromium as a person watching the run would see them."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from runner.paths import PROJECT_ROOT, state_dir
from support.chromium import Chromium
from support.processes import SIZER

LEVELS = [150, 250, 350, 450, 550, 650]
OPEN_TAB = """(name => {
  const tab = [...document.querySelectorAll('[role=tab]')].find(t => t.textContent.trim().toLowerCase() === name);
  if (!tab) return 'no tab ' + name + ' among ' + [...document.querySelectorAll('[role=tab]')].map(t => t.textContent);
  tab.click(); return 'ok';
})"""
TABLE_ROWS = """JSON.stringify([...document.querySelectorAll('table tbody tr')].map(
  row => [...row.querySelectorAll('td')].map(cell => cell.textContent.trim())))"""


def _tab_rows(chromium: Chromium, name: str, predicate, timeout_s: float = 30) -> list[list[str]]:
    """Open a tab and wait until its table's rows satisfy `predicate` (the UI refreshes every 2 s)."""
    assert chromium.evaluate(f"{OPEN_TAB}({json.dumps(name)})") == "ok"
    deadline = time.monotonic() + timeout_s
    rows: list[list[str]] = []
    while time.monotonic() < deadline:
        rows = json.loads(chromium.evaluate(TABLE_ROWS))
        if predicate(rows):
            return rows
        time.sleep(1)
    pytest.fail(f"the {name} tab never showed what was expected: {rows}")


@pytest.mark.slow
@pytest.mark.parallel_safe
@pytest.mark.timeout(600)
def test_the_web_ui_tabs_show_the_run_live(tmp_path: Path):
    scenario = yaml.safe_load((PROJECT_ROOT / "scenarios" / "local.yaml").read_text())
    scenario["envoy"]["cpu"] = [0.25]
    scenario["load"].update(search="fixed", rps=LEVELS, step_seconds=3, warmup_seconds=1, settle_seconds=1)
    path = tmp_path / "ui.yaml"
    path.write_text(yaml.safe_dump(scenario))
    command = [*SIZER, "sweep", "--scenario", str(path), "--free-ports", "--results", str(tmp_path)]
    sweep = subprocess.Popen(command, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        summary_path = tmp_path / "latest" / "summary.json"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert sweep.poll() is None, sweep.communicate()
            configs = json.loads(summary_path.read_text())["configs"] if summary_path.exists() else []
            if configs and len(configs[0]["steps"]) >= 2:  # summary.json exists before its first configuration
                break
            time.sleep(0.5)
        record = json.loads((state_dir() / f"sweep-{sweep.pid}.json").read_text())
        summary = json.loads(summary_path.read_text())
        label, steps = summary["configs"][0]["label"], summary["configs"][0]["steps"]
        with Chromium() as chromium:
            chromium.navigate(record["urls"]["locust"])
            run = _tab_rows(chromium, "gateway sizer", lambda rows: any(r[:1] == ["Configuration"] for r in rows))
            windows = _tab_rows(chromium, "sizer windows", lambda rows: len(rows) >= 2)
            errors = chromium.errors()
    finally:
        sweep.terminate()
        sweep.communicate(timeout=120)
    values = dict((r[0], r[1]) for r in run if len(r) == 2)
    assert values["Run"].startswith(summary["run_id"])
    assert values["Configuration"] == f"1/1: {label}"
    assert values["Envoy CPU limit"].startswith("0.25 cores; knee at 90%")
    assert values["Runner last heard"].endswith("s ago")
    assert values["Round"] == f"1 of {scenario['load']['rounds']}"  # interleaved rounds: the first
    first = next(r for r in windows if r[0] == "1")  # the newest first; window 1 as summary.json has it
    assert first[1] == f"{steps[0]['target_rps']:,.0f}" and first[2] == f"{steps[0]['rps']:,.0f}"
    assert first[4].startswith(f"{steps[0]['cpu_utilization_mean']:.0%}")
    assert first[6] == "1" and first[7] in ("steady", "throttled")  # the window's round and regime
    assert not [e for e in errors if "favicon" not in e], errors
