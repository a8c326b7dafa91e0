"""report.html in headless Chromium: tables and plots present and visible, the answer on the first screen, no errors.

Leaves screenshots in the run directory and copies under /tmp/gateway-sizer-report/ to look at.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from support.chromium import Chromium
from support.processes import run_sizer
from support.report_data import copy_run

SCREENSHOT_COPIES = Path("/tmp/gateway-sizer-report")
WIDTH, HEIGHT = 1280, 900

LAYOUT = """JSON.stringify((() => {
  const box = el => { const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return {top: r.top + scrollY, width: r.width, height: r.height,
            shown: s.display !== 'none' && s.visibility !== 'hidden' && parseFloat(s.opacity) > 0}; };
  return {
    viewport: innerHeight,
    tables: [...document.querySelectorAll('table')].map(t => ({id: t.id || t.className, rows: t.rows.length,
                                                               ...box(t)})),
    images: [...document.images].map(i => ({alt: i.alt, complete: i.complete, natural: i.naturalWidth, ...box(i)})),
    answer: {text: document.querySelector('#rps-per-core').textContent,
             ...box(document.querySelector('#rps-per-core'))},
    answerBox: {left: document.querySelector('.big').getBoundingClientRect().left,
                ...box(document.querySelector('.big'))},
    noise: {text: document.querySelector('#machine-noise').textContent,
            ...box(document.querySelector('#machine-noise'))},
    headings: [...document.querySelectorAll('h2')].map(h => h.textContent),
  };
})())"""


@pytest.mark.slow
def test_report_html_renders_in_chromium(tmp_path: Path):
    run_dir = copy_run(tmp_path)
    result = run_sizer("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    with Chromium(WIDTH, HEIGHT) as chromium:
        chromium.open(run_dir / "report.html")
        page = json.loads(chromium.evaluate(LAYOUT))
        first_screen = chromium.screenshot()
        full_page = chromium.screenshot(full_page=True)
        errors, urls = chromium.errors(), chromium.requested_urls()
    (run_dir / "report-screenshot.png").write_bytes(first_screen)
    (run_dir / "report-fullpage.png").write_bytes(full_page)
    SCREENSHOT_COPIES.mkdir(exist_ok=True)
    for name in ("report-screenshot.png", "report-fullpage.png", "report.html"):
        shutil.copy(run_dir / name, SCREENSHOT_COPIES / name)

    assert errors == [], errors
    assert [u for u in urls if not u.startswith(("file://", "data:"))] == []

    tables = {t["id"]: t for t in page["tables"]}
    assert list(tables) == ["series-table", "examples-table", "knee-table", "steps", "environment-table", "run-table"]
    assert len(page["tables"]) == 7  # two step tables share the class
    for table in page["tables"]:
        assert table["shown"] and table["width"] > 600 and table["height"] > 50, table
    assert tables["series-table"]["rows"] == 3 and tables["knee-table"]["rows"] == 3
    assert tables["examples-table"]["rows"] == 5

    assert len(page["images"]) == 5
    for image in page["images"]:
        assert image["complete"] and image["natural"] > 0, image
        assert image["shown"] and image["width"] > 300 and image["height"] > 150, image

    # what a capacity-review reader sees first: the knee per core it sizes from, the machine's noise, the knees
    assert page["answer"]["text"] == "6,014" and page["answer"]["shown"]
    assert page["answer"]["top"] < 200
    assert page["noise"]["text"].startswith("Machine: one pass, no control window") and page["noise"]["shown"]
    assert page["noise"]["top"] + page["noise"]["height"] < page["viewport"]
    assert tables["series-table"]["top"] < page["viewport"]
    assert page["headings"][:3] == ["Knee at each CPU limit", "Sizing", "Knees"]

    shot = Image.open(io.BytesIO(first_screen)).convert("RGB")
    assert shot.size == (WIDTH, HEIGHT)
    assert len(shot.getcolors(maxcolors=1_000_000)) > 50  # text and the answer box, not a blank page
    answer_box = page["answerBox"]
    inside = (round(answer_box["left"] + answer_box["width"] / 2), round(answer_box["top"] + 4))  # its top padding
    assert shot.getpixel(inside) == (31, 95, 191)  # the answer box is drawn, in its blue


SECTIONS = """JSON.stringify((() => {
  const box = el => { const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return {width: r.width, height: r.height, shown: s.display !== 'none' && s.visibility !== 'hidden'}; };
  const section = id => { const s = document.getElementById(id); if (!s) return null;
    return {tables: Object.fromEntries([...s.querySelectorAll('table')].map(t => [t.id, {rows: t.rows.length,
              cells: [...t.rows].slice(1).map(r => [...r.cells].map(c => c.textContent.trim())), ...box(t)}])),
            images: [...s.querySelectorAll('figure')].map(f => ({id: f.id, natural: f.querySelector('img').naturalWidth,
              ...box(f.querySelector('img'))})),
            text: s.innerText}; };
  const main = document.querySelector('main'), pad = parseFloat(getComputedStyle(main).paddingLeft) * 2;
  const fleet = document.getElementById('fleet-headline');
  return {profiles: section('profiles'), memory: section('memory'), plots: section('plots'),
          sizing: section('sizing'), fleet: section('fleet'), page: main.clientWidth - pad,
          fleetHeadline: fleet && {text: fleet.textContent, bottom: fleet.getBoundingClientRect().bottom + scrollY,
                                   viewport: innerHeight, ...box(fleet)}};
})())"""
DATA = Path(__file__).resolve().parent / "data"


def _sections(tmp_path: Path, run: str) -> dict:
    run_dir = tmp_path / run
    shutil.copytree(DATA / run, run_dir)
    result = run_sizer("report", str(run_dir))
    assert result.returncode == 0, result.stderr
    with Chromium(WIDTH, HEIGHT) as chromium:
        chromium.open(run_dir / "report.html")
        page = json.loads(chromium.evaluate(SECTIONS))
        errors = chromium.errors()
        SCREENSHOT_COPIES.mkdir(exist_ok=True)
        (SCREENSHOT_COPIES / f"{run}-fullpage.png").write_bytes(chromium.screenshot(full_page=True))
    assert errors == [], errors
    for section in (s for s in page.values() if isinstance(s, dict) and "tables" in s):
        for name, table in section["tables"].items():
            assert table["shown"] and table["width"] > 400 and table["rows"] >= 2, table
            assert table["width"] <= page["page"] + 1, (name, table["width"], page["page"])  # no column cut off
        for image in section["images"]:
            assert image["natural"] > 0 and image["shown"] and image["width"] > 300 and image["height"] > 150, image
    return page


@pytest.mark.slow
def test_the_profile_section_shows_each_profiles_knee_cost_and_the_handshake_cost_in_chromium(tmp_path: Path):
    page = _sections(tmp_path, "local-profiles")
    profiles = page["profiles"]
    rows = profiles["tables"]["profile-table"]["cells"]
    assert [r[1] for r in rows] == ["plain", "tls", "tls-new-connection", "body-16k"], rows
    assert all(r[-1] == "saturated" and r[7].endswith("\u00b5s") for r in rows), rows
    (cost,) = profiles["tables"]["connection-cost-table"]["cells"]
    assert cost[1:3] == ["tls-new-connection", "tls"] and cost[3].endswith("\u00b5s"), cost
    assert "profiles" in [i["id"] for i in page["plots"]["images"]]  # knee per profile, drawn


@pytest.mark.slow
def test_the_memory_section_shows_fits_tables_and_plots_in_chromium(tmp_path: Path):
    memory = _sections(tmp_path, "local-memory")["memory"]
    assert set(memory["tables"]) == {"memory-examples", "memory-points"}, memory["tables"]
    assert [i["id"] for i in memory["images"]] == ["memory_vs_connections", "memory_vs_routes"]
    assert "KiB per connection" in memory["text"] and "MiB per 1,000 routes" in memory["text"]


@pytest.mark.slow
def test_the_contour_route_figures_show_with_their_plot_in_chromium(tmp_path: Path):
    memory = _sections(tmp_path, "kubernetes-routes")["memory"]
    rows = memory["tables"]["contour-routes"]["cells"]
    assert [r[0] for r in rows] == ["0", "10", "100", "1,000"], rows
    assert all(r[1].endswith("m") and r[2].endswith("MiB") for r in rows), rows  # Contour's CPU and memory
    assert all(r[6].endswith(" s") and r[7].endswith(" s") for r in rows[1:]), rows  # p50, p99 where routes were added
    assert "memory_route_programming" in [i["id"] for i in memory["images"]]
    assert "Route programming: p50 " in memory["text"]


@pytest.mark.slow
def test_a_fleet_runs_report_names_the_fleet_on_its_first_screen_in_chromium(tmp_path: Path):
    page = _sections(tmp_path, "local-fleet")
    headline = page["fleetHeadline"]
    assert headline["text"].startswith("Fleet: 2 pods of 250m (1 worker thread each): knee per pod"), headline
    assert "fleet knee" in headline["text"] and "scale-out efficiency" in headline["text"]
    assert headline["shown"] and headline["bottom"] < headline["viewport"]  # on the first screen
    rows = page["fleet"]["tables"]["fleet-table"]["cells"]
    assert [r[:3] for r in rows] == [["250m", "2", "1"]], rows  # CPU per pod, pods, worker threads per pod
