"""What every report says first, for every recorded run and the simulated rounds run: the figure it sizes from
with its interval (or that it has none), the machine's drift during the run (or that one pass did not measure
it), what the clients asked for; and the console's summary, summary.json and report.md agree on each knee,
interval and capacity."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from runner.console import ConsoleObserver
from runner.report import read_scenario, render_files
from runner.report.model import build_report
from runner.results import load_summary
from support.processes import run_sizer
from support.report_data import DATA
from support.rounds import IDENTITY_SHARE
from support.simulated import SimulatedEnvoy

# every recorded run with configurations (a recorded rounds run, tests/report/data/local-rounds, joins by itself)
RECORDED = sorted(p.name for p in DATA.iterdir() if json.loads((p / "summary.json").read_text())["configs"])
RUNS = [*RECORDED, "simulated-rounds"]


@pytest.fixture(params=RUNS)
def run_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A copy of one run's directory."""
    source = (
        request.getfixturevalue("simulated_rounds_run")
        if request.param == "simulated-rounds"
        else (DATA / request.param)
    )
    return Path(shutil.copytree(source, tmp_path / request.param))


def _files(run_dir: Path) -> tuple[str, str]:
    files = render_files(load_summary(run_dir), read_scenario(run_dir))
    return files["report.md"].decode(), files["report.html"].decode()


def _console(run_dir: Path) -> str:
    out = io.StringIO()
    ConsoleObserver(Console(file=out, width=400, highlight=False, soft_wrap=False)).summary(
        load_summary(run_dir), str(run_dir)
    )
    return out.getvalue()


def test_the_report_opens_with_the_figure_it_sizes_from_and_what_that_figure_knows(run_dir: Path):
    summary = load_summary(run_dir)
    report = build_report(summary, read_scenario(run_dir))
    md, html = _files(run_dir)
    lead = md.splitlines()[4]
    assert lead == f"**{report.headline.lead}**"
    basis = report.headline.series.largest if report.headline.series else None
    assert basis is not None
    knee = basis.config.valid_knee
    assert knee is not None
    assert lead.startswith(f"**{basis.per_core:,.0f} RPS per core")
    if knee.interval is not None:  # its interval and where it comes from
        assert f"95% CI {knee.low:,.0f}-{knee.high:,.0f} RPS" in lead
        assert ("interleaved rounds" in lead) == (knee.method == "rounds")
    else:
        assert "no interval" in lead
    for text in (md, html):
        assert "per added Envoy core" not in text and "Sizing rule" not in text  # never a slope between knees
    assert f"{summary.threshold:.0%} of its limit" in md.splitlines()[2]


def test_the_first_screen_names_the_machines_drift_and_the_compression(run_dir: Path):
    summary = load_summary(run_dir)
    md, html = _files(run_dir)
    first_screen = html[: html.index("<h2>")]  # the headline box and its list, above the first table
    rounds = summary.rounds is not None and summary.rounds.control is not None
    if rounds:
        drift = re.search(r"this machine's speed moved \+-(\d+\.\d)% during the run, (\d) rounds", md)
        assert drift is not None, md[:2000]
        assert f"this machine&#39;s speed moved ±{drift[1]}% during the run, {drift[2]} rounds" in first_screen
        assert "steal time" in md.split("- **Machine:**")[1].splitlines()[0]
    else:
        assert "- **Machine:** one pass, no control window" in md
        assert 'id="machine-noise"><b>Machine:</b> one pass, no control window' in first_screen
    assert "clients ask for" in md.split("- **Compression:**")[1].splitlines()[0]
    assert 'id="compression"><b>Compression:</b> ' in first_screen and 'id="rps-per-core"' in first_screen
    assert md.count("Compression: clients ask for") == len([c for c in summary.configs if c.steps])  # per section


def test_console_summary_json_and_report_md_state_the_same_knee_interval_and_capacity(run_dir: Path):
    raw = json.loads((run_dir / "summary.json").read_text())
    md, console = _files(run_dir)[0], _console(run_dir)
    checked = 0
    for config in raw["configs"]:
        if config["status"] != "saturated":
            continue
        knee, capacity = config["knee"], config.get("capacity")
        figure = f"{knee['rps']:,.0f} RPS, {knee['rps'] / config['envoy']['cpu']:,.0f} per core"
        if knee.get("low") is not None:
            figure += f" (95% CI {knee['low']:,.0f}-{knee['high']:,.0f}"
        section = md.split(f"### {config['label']}\n\n")[1].split("\n\n")[0]  # its headline sentence
        assert f"knee {figure}" in section, (figure, section)
        line = next(line for line in console.splitlines() if figure in line)
        assert line  # the console's summary states it
        if capacity is not None:
            broke = f"broke at {capacity['broken_at']:,.0f}" if capacity.get("broken_at") else "not broken"
            stated = f"capacity {capacity['rps']:,.0f} RPS ({broke}"
            assert stated in section and stated in console
        checked += 1
    assert checked, "no saturated configuration to compare"
    drift_line = next(line for line in console.splitlines() if line.startswith("Machine: "))
    assert drift_line.removeprefix("Machine: ") in md.replace("\u00b1", "+-")


def test_the_simulated_rounds_run_leads_with_intervals_ratios_and_growth(simulated_rounds_run: Path):
    report = build_report(load_summary(simulated_rounds_run), read_scenario(simulated_rounds_run))
    headline = report.headline
    assert headline.series is not None and headline.series.scaling.growth is not None
    g = headline.series.scaling.growth.exponent
    assert 1 < g.low < g.value < g.high  # the simulated Envoy's cost falls with load: faster than the limit
    assert headline.scaling.startswith(
        f"Over 250m-1 the knee grows faster than the CPU limit (knee ~ cores^{g.value:.2f}"
    )
    identity = [r for r in headline.profile_ratios if r.label.startswith("identity / plain")]
    uniform = [r for r in headline.arrival_ratios if r.label.startswith("uniform / poisson")]
    assert len(identity) == 6 and len(uniform) == 6  # at each limit, for each arrival model and profile
    assert all(r.interval is not None and r.rounds == 5 for r in identity + uniform)
    # the simulated Envoy serves identity clients at 87% of gzip clients' cost; its utilization grows as RPS^0.8,
    # so the knee ratio is (1 / 0.87)^(1 / 0.8) at every limit
    truth = (1 / IDENTITY_SHARE) ** (1 / SimulatedEnvoy().exponent)
    assert sum(r.low <= truth <= r.high for r in identity) >= 5  # type: ignore[operator]
    assert identity[0].compared == (
        "clients ask for no compression (identity) vs clients ask for compression (Accept-Encoding: gzip, deflate, br)"
    )
    assert headline.compression == (
        "plain: clients ask for compression (Accept-Encoding: gzip, deflate, br); identity: clients ask for no "
        "compression (identity)"
    )


def test_recommend_on_the_rounds_run_carries_the_interval_into_the_cores(simulated_rounds_run: Path, tmp_path: Path):
    run = shutil.copytree(simulated_rounds_run, tmp_path / "run")
    result = run_sizer("recommend", "--target-rps", "20000", "--run", str(run))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    basis = build_report(load_summary(run)).headline.series.largest  # type: ignore[union-attr]
    low, high = basis.per_core_interval  # type: ignore[misc]
    assert lines[0].startswith(f"sized from {basis.per_core:,.0f} RPS per core (95% CI {low:,.0f}-{high:,.0f}) at ")
    assert lines[0].endswith("5 interleaved rounds)")
    cores = 26_000 / basis.per_core
    assert (
        f"({cores:.3f} cores = 26,000 / {basis.per_core:,.0f} RPS per core; {26_000 / high:.3f}-{26_000 / low:.3f} "
        "within its 95% interval" in lines[2]
    )
    assert any(line.startswith("growth: knee ~ cores^") for line in lines)
    assert any("conservative: the knee grows faster than the CPU limit" in line for line in lines)
