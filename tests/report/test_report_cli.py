"""`report`, `recommend` and `compare` as a user runs them: files, output, exit codes, one-line errors."""

from __future__ import annotations

from pathlib import Path

from runner.commands.report import report_after_sweep
from support.processes import one_line, run_sizer
from support.report_data import THREE_LIMITS_RUN, copy_run, fixture_summary


def test_report_writes_markdown_html_and_plots_into_the_run(tmp_path: Path):
    run_dir = copy_run(tmp_path)
    result = run_sizer("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"wrote {run_dir / 'report.md'}", f"wrote {run_dir / 'report.html'}"]
    assert (run_dir / "report.md").read_text().startswith("# Envoy gateway sizing report")
    assert sorted(p.name for p in (run_dir / "plots").iterdir()) == [
        "cost_vs_rps.png",
        "cpu_vs_rps.png",
        "knee_per_core.png",
        "latency_vs_rps.png",
        "rps_vs_users.png",
    ]
    assert not list(run_dir.rglob(".*.tmp"))


def test_report_on_a_folder_that_is_not_a_run(tmp_path: Path):
    one_line(run_sizer("report", str(tmp_path)), "no run found", "make sweep")


def test_recommend_prints_first_the_figure_it_sizes_from_then_cores_and_memory(tmp_path: Path):
    result = run_sizer("recommend", "--target-rps", "5000", "--run", str(copy_run(tmp_path)))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "sized from 6,014 RPS per core at the knee of Envoy 300m CPU (1,804 RPS; no interval: one pass, interpolated "
        "between 2 windows)"
    )
    assert lines[1] == "Envoy for 5,000 RPS with 30% headroom (a knee at 6,500 RPS):"
    assert lines[2].split()[:7] == ["cpu:", "1100m", "(1.081", "cores", "=", "6,500", "/"]
    assert lines[3].split()[:2] == ["memory:", "64Mi"]
    # the compression the clients asked for, from the run's scenario.yaml
    assert (
        "plain traffic (plain HTTP, keep-alive), synchronized arrivals; clients ask for compression " in result.stdout
    )
    assert "warning: extrapolated 3.6x beyond the largest measured limit (300m)" in result.stdout
    assert " x cores " not in result.stdout and "intercept" not in result.stdout


def test_recommend_headroom_changes_the_answer(tmp_path: Path):
    result = run_sizer("recommend", "--target-rps", "1000", "--headroom", "0", "--run", str(copy_run(tmp_path)))
    assert result.returncode == 0, result.stderr
    # 1,000 lies between 150m's knee (524) and 300m's (1,804): 300m reaches it
    assert "cpu:     300m" in result.stdout and "extrapolated" not in result.stdout


def test_recommend_rejects_nonsense_in_one_line(tmp_path: Path):
    run = str(copy_run(tmp_path))
    one_line(run_sizer("recommend", "--target-rps", "-100", "--run", run), "positive", "--target-rps 5000")
    one_line(run_sizer("recommend", "--target-rps", "lots", "--run", run), "must be a number, got 'lots'")
    one_line(run_sizer("recommend", "--target-rps", "100", "--headroom", "-1", "--run", run), "--headroom")


def test_recommend_rejects_a_latency_target_shape_or_node_count_that_means_nothing_in_one_line(tmp_path: Path):
    run = str(copy_run(tmp_path))
    base = ("recommend", "--target-rps=5000", "--run", run)
    one_line(run_sizer(*base, "--slo-p99-ms=abc"), "--slo-p99-ms must be a number, got 'abc'", "--slo-p99-ms 50")
    one_line(run_sizer(*base, "--slo-p99-ms=0"), "--slo-p99-ms must be a positive number of milliseconds, got 0")
    one_line(run_sizer(*base, "--slo-p99-ms=-5"), "--slo-p99-ms must be a positive number of milliseconds, got -5")
    one_line(run_sizer(*base, "--slo-p99-ms=inf"), "--slo-p99-ms must be a finite number")
    one_line(run_sizer(*base, "--workload-kind=statefulset"), "--workload-kind must be DaemonSet, Deployment or auto")
    one_line(run_sizer(*base, "--nodes=0"), "--nodes must be at least 1, got 0")
    one_line(run_sizer(*base, "--nodes=2.5"), "--nodes must be a whole number of nodes, got '2.5'")
    one_line(run_sizer(*base, "--nodes=3", "--workload-kind=Deployment"), "--nodes sizes a DaemonSet's pods")
    one_line(run_sizer(*base, "--slo-p99-ms=1"), "no window at any measured limit served p99 <= 1 ms",
             "150m: the lowest p99 there was 3 ms at 150 RPS")  # fmt: skip


def test_recommend_at_a_latency_target_says_where_it_bound_and_sizes_from_it(tmp_path: Path):
    """The fixture's windows at 300m read p99 63 ms at 1,676 RPS, below its knee (1,804): at 50 ms latency binds
    first there and sizes the answer; at 150m it does not (46 ms at 730 RPS, past its knee of 524)."""
    run = str(copy_run(tmp_path))
    base = ("recommend", "--target-rps=5000", "--run", run, "--workload-kind=Deployment")
    result = run_sizer(*base, "--slo-p99-ms=50")
    assert result.returncode == 0, result.stderr
    assert "Latency: p99 <= 50 ms (--slo-p99-ms):" in result.stdout
    assert "  at 150m: did not bind: served within it up to 730 RPS, the most measured, past the knee 524" in (
        result.stdout
    )
    assert "  at 300m: bound before the 90% CPU threshold: capacity 1,250 RPS (broke at 1,676: p99 63 ms" in (
        result.stdout
    )
    assert "per replica: 1,250 RPS at 300m (capacity, measured" in result.stdout
    without = run_sizer(*base)
    assert "Latency: p99 <= 250 ms (the run's load.latency_slo_ms; --slo-p99-ms sizes for another):" in without.stdout
    assert "per replica: 1,804 RPS at 300m (knee, measured" in without.stdout


def test_recommend_needs_a_valid_knee(tmp_path: Path):
    one = fixture_summary()
    one.configs[1].status, one.configs[1].reason = "invalid", "add Locust workers: generator at 97% CPU"
    result = run_sizer("recommend", "--target-rps", "1000", "--run", str(copy_run(tmp_path, one, "one")))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("sized from 3,495 RPS per core at the knee of Envoy 150m CPU")
    assert "one CPU limit measured, so how the rate per core changes with the limit is not known" in result.stdout
    one.configs[0].status = "failed"
    one_line(
        run_sizer("recommend", "--target-rps", "1000", "--run", str(copy_run(tmp_path, one, "none"))),
        "has no valid knee",
        "generator at 97% CPU",
    )


def test_compare_exits_non_zero_on_a_regression_only(tmp_path: Path):
    a = copy_run(tmp_path, name="a")
    same = run_sizer("compare", str(a), str(a))
    assert same.returncode == 0, same.stderr
    assert "no regression beyond -5%, judged by the threshold alone" in same.stdout
    slower = fixture_summary()
    slower.configs[1].knee = slower.configs[1].knee.model_copy(update={"rps": slower.configs[1].knee.rps * 0.92})
    b = copy_run(tmp_path, slower, "b")
    result = run_sizer("compare", str(a), str(b))
    assert result.returncode == 1, result.stderr
    assert "1,804         1,660   -8.0%  regression" in result.stdout
    assert run_sizer("compare", str(a), str(b), "--threshold-pct", "10").returncode == 0
    one_line(run_sizer("compare", str(a), str(b), "--threshold-pct", "-2"), "--threshold-pct must be 0 or more")
    one_line(run_sizer("compare", str(a), str(tmp_path / "nowhere")), "no run found")
    one_line(run_sizer("compare", "", ""), "compare needs two runs")  # what `make compare` alone passes


def test_a_sweep_that_ended_early_still_gets_its_report(tmp_path: Path, capsys):
    summary = fixture_summary()
    summary.status = "interrupted"
    summary.configs[1].status, summary.configs[1].knee = "running", None
    run_dir = copy_run(tmp_path, summary)
    report_after_sweep(run_dir, summary)
    assert (run_dir / "report.html").is_file() and (run_dir / "report.md").is_file()
    assert capsys.readouterr().out.strip() == f"Report: {run_dir / 'report.html'}"


def test_no_report_before_any_configuration_finished(tmp_path: Path, capsys):
    summary = fixture_summary()
    for config in summary.configs:
        config.status = "running"
    run_dir = copy_run(tmp_path, summary)
    report_after_sweep(run_dir, summary)
    assert not (run_dir / "report.html").exists()
    assert capsys.readouterr().out == ""


def test_a_failing_report_does_not_hide_the_sweep_outcome(tmp_path: Path, capsys):
    summary = fixture_summary()
    run_dir = copy_run(tmp_path, summary)
    (run_dir / "plots").write_text("a file where the plots folder goes")
    report_after_sweep(run_dir, summary)  # must not raise
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gateway-sizer: report not written (")
    assert f"run `gateway-sizer report {run_dir}`" in err[0]


def test_compare_two_real_runs(tmp_path: Path):
    a = copy_run(tmp_path)
    result = run_sizer("compare", str(a), str(THREE_LIMITS_RUN))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["A", "B"]
    assert lines[0].startswith("A: 20261122-125816-local: one pass or no control window")
    assert lines[1].startswith("B: 20261122-134316-local: one pass or no control window")
    assert "Envoy 300m CPU / 256Mi, nginx x1         1,804         1,762   -2.3%" in result.stdout
    assert "Envoy 150m CPU / 256Mi, nginx x1           524             -       -  only in A" in result.stdout
    assert "Envoy 100m CPU / 256Mi, nginx x1             -           282       -  only in B" in result.stdout
    assert lines[-1] == "no regression beyond -5%, judged by the threshold alone"
    assert run_sizer("compare", str(a), str(THREE_LIMITS_RUN), "--threshold-pct", "2").returncode == 1
