"""docs/development.md's code map is true: it names every module of runner/ once, and nothing that is not there.

The map is the first code block under "## The code": a line names one module or several of one folder (`a.py,
b.py`), or a folder (`name/`: its `__init__.py`, or a namespace package), two spaces of indent per folder."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from runner.paths import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "development.md"
NAMES = re.compile(r"^[\w.]+(?:\.py|/)(?:, [\w.]+(?:\.py|/))*")


def mapped_modules(text: str) -> list[str]:
    """The runner modules a code map names, as paths (a folder's as its __init__.py), in order."""
    block = text.split("## The code", 1)[1].split("```", 2)[1]
    named: list[str] = []
    folders: list[str] = []
    for line in block.splitlines():
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 2
        match = NAMES.match(stripped)
        if match is None:
            continue
        if depth == 0 and match[0] != "runner/":
            folders = []  # the map's other top-level folders (locustfiles/, tests/ ...)
            continue
        folders = folders[:depth]
        for name in match[0].split(", "):
            if name.endswith("/"):
                named.append("/".join([*folders, name.rstrip("/"), "__init__.py"]))
                folders = [*folders, name.rstrip("/")]
            elif folders:
                named.append("/".join([*folders, name]))
    return named


def runner_modules(root: Path = PROJECT_ROOT) -> set[str]:
    """Every module of runner/, and each folder as its __init__.py (also a folder without one: a namespace
    package, like runner/platforms/kubernetes/)."""
    modules = {str(path.relative_to(root)) for path in (root / "runner").rglob("*.py")}
    return modules | {str(path.parent.relative_to(root) / "__init__.py") for path in (root / "runner").rglob("*.py")}


def test_the_code_map_names_every_runner_module_once():
    named = mapped_modules(DOC.read_text())
    twice = sorted(name for name, count in Counter(named).items() if count > 1)
    missing = sorted(runner_modules() - set(named))
    absent = sorted(set(named) - runner_modules())
    assert not twice, f"named more than once in docs/development.md: {twice}"
    assert not missing, f"not in the code map of docs/development.md: {missing}"
    assert not absent, f"in the code map of docs/development.md but not in runner/: {absent}"


def test_the_map_is_read_by_folder_and_indent():
    text = """## The code

```
runner/            the package
  a.py, b.py       two modules
  sub/             a folder
    c.py           in it
  d.py             back at the top
locustfiles/       gateway.py, not runner's
```
"""
    assert mapped_modules(text) == [
        "runner/__init__.py",
        "runner/a.py",
        "runner/b.py",
        "runner/sub/__init__.py",
        "runner/sub/c.py",
        "runner/d.py",
    ]
