"""The run directory: steps.csv agrees with summary.json after a configuration is redone, and --resume
refuses a scenario or override that would measure something else than the run did."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import runner.generator_sizing
import runner.scenario
from runner.cli import main
from runner.plan import plan_sweep
from runner.results import RunStore, load_summary
from runner.scenario import parse_scenario
from support.steps import make_step

SCENARIO = {"name": "t", "envoy": {"cpu": [0.25, 0.5]}, "load": {"step_seconds": 10}}


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "steps.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_redoing_an_interrupted_configuration_drops_its_old_lines_from_steps_csv(tmp_path):
    scenario = parse_scenario(SCENARIO)
    first, second = plan_sweep(scenario).configurations
    store = RunStore.create(scenario, tmp_path)
    done = store.begin(first)
    for i in range(3):
        store.add_step(done, make_step(i, users=10, rps=100.0 * (i + 1), utilization=0.3 * (i + 1)))
    done.status = "saturated"
    interrupted = store.begin(second)
    store.add_step(interrupted, make_step(0, users=10, rps=999.0, utilization=0.5))
    assert len(_rows(store.run_dir)) == 4

    resumed = RunStore.open(store.run_dir)
    again = resumed.begin(second)
    resumed.add_step(again, make_step(0, users=12, rps=777.0, utilization=0.6))
    rows = _rows(store.run_dir)
    summary = load_summary(store.run_dir)
    assert [float(r["rps"]) for r in rows] == [s.rps for c in summary.configs for s in c.steps]
    assert [float(r["rps"]) for r in rows] == [100.0, 200.0, 300.0, 777.0]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--envoy-cpus", "0.3"], "envoy.cpu"),
        (["--step-seconds", "12"], "load.step_seconds"),
        (["--platform", "kubernetes"], "platform"),
    ],
)
def test_resume_names_the_first_field_an_override_would_change(tmp_path, capsys, extra, field):
    store = RunStore.create(parse_scenario(SCENARIO), tmp_path)
    code = main(["sweep", "--resume", str(store.run_dir), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"gateway-sizer: --resume: {field} differs from what run {store.run_dir.name} measured: "
        "resume without --scenario or overrides, or start a new run\n"
    )


def test_resume_with_an_override_reads_the_runs_scenario_once(tmp_path, monkeypatch):
    store = RunStore.create(parse_scenario(SCENARIO), tmp_path)
    read = runner.scenario.read_scenario
    paths: list[str] = []

    def counted(name):
        paths.append(name)
        return read(name)

    monkeypatch.setattr(runner.scenario, "read_scenario", counted)
    monkeypatch.setattr(runner.generator_sizing, "read_scenario", counted)
    assert main(["sweep", "--resume", str(store.run_dir), "--step-seconds", "12"]) == 2  # refused before it starts
    assert paths == [str(store.run_dir / "scenario.yaml")]
