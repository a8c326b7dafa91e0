"""The console piped into a CI log at 80 columns: one line per step, never broken inside a figure."""

from __future__ import annotations

from runner.console import ConsoleObserver
from runner.plan import Configuration
from support.steps import make_step


def test_a_step_line_is_one_line_in_a_narrow_piped_log(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    observer = ConsoleObserver()  # as the CLI builds it, writing to a pipe
    step = make_step(3, users=287, rps=1488.2, utilization=0.912, target_rps=1490)
    observer.step_measured(Configuration(0.5, 256 * 2**20, 1, 1), step)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and len(lines[0]) > 80, lines
    assert "CPU  91% (89%-93%)" in lines[0] and "RPS  1,488.2" in lines[0]


def test_the_knee_line_says_how_far_it_can_be_trusted(capsys):
    from runner.model import BackendResources, Capacity, ConfigResult, EnvoyResources, Knee

    config = ConfigResult(
        key="k",
        label="Envoy 500m",
        envoy=EnvoyResources(cpu=0.5, memory="256Mi", concurrency=1),
        backend=BackendResources(replicas=1),
        status="saturated",
        search="knee interval +-4.9%, wider than the +-3% target after 8 windows (window budget spent)",
    )
    with_interval = config.model_copy(
        update={
            "knee": Knee(rps=1440, low=1370, high=1510, method="power-fit", windows=6),
            "capacity": Capacity(rps=1540, broken_at=1580, broken_by="p99 580 ms"),
        }
    )
    interpolated = config.model_copy(update={"knee": Knee(rps=1440)})
    ConsoleObserver().config_finished(with_interval)
    ConsoleObserver().config_finished(interpolated)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "  knee 1,440 RPS, 2,880 per core (95% CI 1,370-1,510, power fit over 6 windows); "
        "capacity 1,540 RPS (broke at 1,580: p99 580 ms)"
    )
    assert lines[1].endswith("(window budget spent)")
    assert lines[2] == "  knee 1,440 RPS, 2,880 per core (interpolated between 2 windows, no interval)"


def test_a_memory_only_run_ends_with_its_fits_not_an_empty_knee_table(capsys):
    from pathlib import Path

    from runner.model import RunSummary

    recorded = Path(__file__).resolve().parent.parent / "report" / "data" / "local-memory" / "summary.json"
    summary = RunSummary.model_validate_json(recorded.read_text())
    ConsoleObserver().summary(summary, "results/x")
    out = capsys.readouterr().out
    assert "Knee (RPS at threshold)" not in out
    assert "memory per held connection: 17.9 KiB per connection (95% CI 17.15-18.74, R^2 0.999" in out
    assert "memory per 1,000 routes:    15.92 MiB per 1,000 routes" in out
