"""One module, one job: no module in runner/ grows past MAX_LINES (issue 22); split it by job before then."""

from __future__ import annotations

from runner.paths import PROJECT_ROOT

MAX_LINES = 450


def test_no_module_in_runner_is_over_450_lines():
    sizes = {path: len(path.read_text().splitlines()) for path in (PROJECT_ROOT / "runner").rglob("*.py")}
    over = {str(path.relative_to(PROJECT_ROOT)): lines for path, lines in sizes.items() if lines > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines: {over}"
