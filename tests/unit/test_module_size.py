"""One module, one job: no module in runner/ grows past MAX_LINES (issue 22); split it by job before then."""

from __future__ import annotations

from runner.paths import PROJECT_ROOT

MAX_LINES = 450


def test_no_module_in_runner_is_over_450_lines():
    sizes = {path: len(path.read_text().splitlines()) for path in (PROJECT_ROOT / "runner").rglob("*.py")}
    over = {str(path.relative_to(PROJECT_ROOT)): lines for path, lines in sizes.items() if lines > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines: {over}"


MAX_FMT_SKIPS = 34  # the count at bc7fe31 (issue 32): lines are split by job, not joined past the formatter


def test_runner_does_not_join_lines_past_the_formatter():
    skips = {
        str(path.relative_to(PROJECT_ROOT)): text.count("# fmt: skip")
        for path in (PROJECT_ROOT / "runner").rglob("*.py")
        if "# fmt: skip" in (text := path.read_text())
    }
    assert sum(skips.values()) <= MAX_FMT_SKIPS, (
        f"{sum(skips.values())} '# fmt: skip' in runner/ (at most {MAX_FMT_SKIPS}): {skips}"
    )
