"""report.md, report.html and the plots, rendered from a real run's summary.json."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser

from PIL import Image

from runner.model import BaselineResult, RunSummary
from runner.report import read_scenario, render_files
from runner.report.model import build_report
from support.report_data import FIXTURE_RUN, change_step, fixture_summary
from support.steps import make_step

PNG = b"\x89PNG\r\n\x1a\n"


class _Tags(HTMLParser):
    """Counts tags and collects every URL the page would load or link to."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.urls: list[str] = []
        self.table_ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        values = dict(attrs)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]
        if tag == "table":
            self.table_ids.append(values.get("id") or values.get("class") or "")


def _render(summary: RunSummary | None = None) -> dict[str, bytes]:
    return render_files(summary or fixture_summary(), read_scenario(FIXTURE_RUN))


def test_markdown_reads_straight_down_from_the_figure_with_its_interval():
    md = _render()["report.md"].decode()
    lines = md.splitlines()
    assert lines[0] == "# Envoy gateway sizing report"
    assert lines[4] == (
        "**6,014 RPS per core at the knee of Envoy 300m CPU (1,804 RPS; no interval: one pass, interpolated between 2 "
        "windows); plain traffic (plain HTTP, keep-alive), synchronized arrivals; clients ask for compression "
        "(Accept-Encoding: gzip, deflate, br).**"
    )
    assert (
        "- **Machine:** one pass, no control window: how far this machine's speed moved during the run was not "
        "measured" in md
    )
    order = ["## Knee at each CPU limit", "## Sizing", "## Knees", "## Conclusions", "## Plots",
             "## Results per configuration", "## Test environment"]  # fmt: skip
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    one_pass = "no interval: one pass, interpolated between 2 windows"
    assert f"| 150m | knee | 524 | - | 3,495 | - | 1.00x | - | {one_pass} |" in md
    assert f"| 300m | knee | 1,804 | - | 6,014 | - | 1.72x | - | {one_pass} |" in md
    # a target beyond 300m: 6,500 / 6,014 per core = 1.08 cores
    assert "| 5,000 | 6,500 | 1100m | - | 64Mi | 6,014 RPS per core at the knee of Envoy 300m CPU, beyond the" in md
    # CPU per request at the knee = 90% x limit / knee: 0.9 x 0.15 / 524.26 = 258 µs; 0.9 x 0.3 / 1,804 = 150 µs
    assert f"| 150m | 256Mi | 1 | 1 | 524 | - | {one_pass} | 3,495 | 258 µs | - | - | saturated |  |" in md
    assert f"| 300m | 256Mi | 1 | 1 | 1,804 | - | {one_pass} | 6,014 | 150 µs | - | - | saturated |  |" in md
    # one reference-style table per configuration, rows ordered by offered load, CPU as min-max, each window's regime
    header = "| Step | Users | Offered RPS | RPS | Envoy RPS | CPU utilization | CPU per request | Regime | p95 | p99 |"
    assert md.count(header) == 2
    assert (
        "| 4 | 37 | 730 | 730 | 730 | 99%-100% | 204 µs | - | 30 ms | 46 ms | 0.0% | At the limit: CPU at 99%, past "
        "the 90% threshold; this limit's maximum throughput. p95 latency 15x the lightest step's (30 ms vs 2 ms). |"
    ) in md
    assert md.index("| 1 | 8 | 150 | 150 |") < md.index("| 6 | 28 | 542 |") < md.index("| 5 | 30 | 588 |")
    assert "| Envoy | Gateway data plane: the system under test | 1.40.0; CPU limits 150m, 300m; memory 256Mi" in md
    assert "| Locust | Load generator | 2.47.0; 1 master + 2 worker(s); fasthttp client; open-loop target RPS" in md
    assert "| Host | Machine that ran the sweep | AMD EPYC, 2 cores, 23.5 GiB, Linux 6.18.44-fc-v657, cgroup v1" in md
    assert "make sweep SCENARIO=local ENVOY_CPUS=0.15,0.3" in md
    assert "Contour |" not in md.split("## Knees")[1].split("\n\n")[1]  # no Contour column when none was set
    assert "RPS per added Envoy core" not in md and "x cores -" not in md and "Sizing rule" not in md


def test_every_plot_is_a_png_the_markdown_links_and_the_html_embeds():
    files = _render()
    plots = sorted(name for name in files if name.startswith("plots/"))
    assert plots == [
        "plots/cost_vs_rps.png",
        "plots/cpu_vs_rps.png",
        "plots/knee_per_core.png",
        "plots/latency_vs_rps.png",
        "plots/rps_vs_users.png",
    ]
    md, html = files["report.md"].decode(), files["report.html"].decode()
    for name in plots:
        assert files[name].startswith(PNG)
        width, height = Image.open(io.BytesIO(files[name])).size
        assert width >= 600 and height >= 350
        assert f"]({name})" in md
    assert html.count('src="data:image/png;base64,') == len(plots)


def test_html_is_self_contained_and_holds_every_table():
    page = _Tags()
    page.feed(_render()["report.html"].decode())
    external = [u for u in page.urls if not u.startswith(("data:", "#"))]
    assert external == []
    assert page.tags.get("script") is None and page.tags.get("link") == 1  # the inline data: favicon only
    assert page.table_ids == [
        "series-table", "examples-table", "knee-table", "steps", "steps", "environment-table", "run-table",
    ]  # fmt: skip
    assert page.tags["img"] == 5


def test_both_formats_lay_out_the_same_columns_from_one_list():
    files = _render()
    md, html = files["report.md"].decode(), files["report.html"].decode()
    report = build_report(fixture_summary(), read_scenario(FIXTURE_RUN))
    for table in (report.tables.knees, report.tables.series, report.tables.examples, report.sections[0].steps):
        assert table is not None
        headers = [h.text for h in table.headers]
        assert "| " + " | ".join(headers) + " |" in md
        numeric = ' class="n"'
        assert "".join(f"<th{numeric if h.numeric else ''}>{h.text}</th>" for h in table.headers) in html


def test_status_and_reason_are_rendered_whatever_they_are():
    summary = fixture_summary()
    summary.configs[1].status = "invalid"
    summary.configs[1].reason = "add Locust workers: generator at 97% CPU <b>|</b>"
    files = _render(summary)
    md, html = files["report.md"].decode(), files["report.html"].decode()
    reason = "add Locust workers: generator at 97% CPU <b>\\|</b>"
    assert f"| 300m | 256Mi | 1 | 1 | - | - | - | - | - | - | - | invalid | {reason} |" in md
    # one valid knee left: sized from it, and the report says the growth with the limit is not measured
    assert "**3,495 RPS per core at the knee of Envoy 150m CPU" in md
    assert "- **Growth:** One CPU limit (150m): how the knee per core changes with the limit is not measured" in md
    assert '<span class="status status-invalid">invalid</span>' in html
    assert "add Locust workers: generator at 97% CPU &lt;b&gt;|" in html
    assert "Status invalid: add Locust workers" in md  # its interpolated knee is not presented as one
    assert "plots/knee_per_core.png" in files  # one knee is still plotted


def test_an_interrupted_run_reports_what_finished():
    summary = fixture_summary()
    summary.status, summary.reason, summary.finished_at = "interrupted", "stopped by Ctrl-C or SIGTERM", None
    summary.configs[1].status, summary.configs[1].knee = "running", None
    report = build_report(summary)
    assert report.notes == (
        "The run is interrupted (stopped by Ctrl-C or SIGTERM): this report covers the configurations that finished.",
    )
    md = render_files(summary)["report.md"].decode()
    assert "| 300m | 256Mi | 1 | 1 | - | - | - | - | - | - | - | running |  |" in md
    assert "| Duration | - |" in md


def test_a_measured_baseline_gets_its_section_and_conclusion():
    summary = fixture_summary()
    assert "Baseline" not in render_files(summary)["report.md"].decode()
    summary.baseline = BaselineResult(
        users=20,
        envoy_cpu_cores=0.3,
        direct=make_step(rps=4000.0, p95_ms=3.0, utilization=0.0),
        gateway=make_step(rps=3280.0, p95_ms=9.0, utilization=0.97),
    )
    files = render_files(summary)
    md, html = files["report.md"].decode(), files["report.html"].decode()
    assert "through the gateway it serves **82% of direct**" in md
    assert "| nginx directly | 4,000 | 3 ms | - |" in md and "| through Envoy | 3,280 | 9 ms | 97% |" in md
    assert "1. **Every configuration" in md
    assert (
        "**Through Envoy (300m CPU) nginx served 82% of its direct throughput with the same load.** (direct 4,000 RPS"
        in md
    )
    assert re.search(r"<b>82% of direct</b>", html) and 'id="baseline-table"' in html


def test_a_window_mean_outside_its_min_max_still_plots():
    summary = fixture_summary()
    # as measured in a real sweep: mean 0.9040 with max 0.8992
    change_step(summary, 0, 1, cpu_utilization_min=0.8917, cpu_utilization_mean=0.9040, cpu_utilization_max=0.8992)
    assert "plots/cpu_vs_rps.png" in render_files(summary)
