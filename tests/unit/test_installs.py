"""Every program the runner, the tests and the benches start is installed by the Makefile target that needs it (or
comes with every Debian system): a program a test or bench starts for the first time fails here, naming the file
and the line, until an install step provides it. The development machines have tools a fresh CI machine lacks
(tcpdump went missing that way)."""

from __future__ import annotations

import argparse
import ast
import functools
import re
import shlex
from collections.abc import Iterator

from runner.cli import build_parser
from runner.paths import PROJECT_ROOT

SOURCES = ("runner", "locustfiles", "bench", "tests")
SUBPROCESS = {"run", "Popen", "check_output", "check_call", "call"}
# a variable, or a function's return, that holds a command line
ARGV_NAMES = re.compile(r"^(argv|cmd|command|pin|limit|_DIE_WITH_PARENT|\w*_command|\w*_argv)$")
SHELL_WORDS = {"for", "in", "do", "done", "if", "then", "fi", "while"}
# Programs no install step of the project names, and why each is there anyway.
WITHOUT_INSTALL = {
    "make": "what runs `make test` itself",
    "python3": "the Python the Makefile makes its virtualenv with",
    "go": "make go-toolchain (bench/openloop.py builds the open-loop generator with it)",
    "chromium-browser": "chromium's name where Ubuntu ships it (TEST_PACKAGES installs Debian's chromium)",
    # Debian's essential and required packages: on every Debian system before any install
    "sh": "dash",
    "ls": "coreutils",
    "cut": "coreutils",
    "grep": "grep",
    "sed": "sed",
    "awk": "mawk",
    "mount": "mount",
    "umount": "mount",
}
# k8s/cluster/deps.sh installs the cluster's packages in `make cluster-up`, before any cluster test: command -> package
CLUSTER_COMMANDS = {"iptables-save": "iptables", "ip": "iproute2", "sysctl": "procps"}


def _makefile_commands() -> dict[str, str]:
    """command -> Debian package of the Makefile's package lists (SWEEP_PACKAGES, TEST_PACKAGES)."""
    text = (PROJECT_ROOT / "Makefile").read_text().replace("\\\n", " ")
    pairs = {}
    for line in re.findall(r"^[A-Z]+_PACKAGES := (.*)$", text, re.M):
        pairs.update(pair.split(":", 1) for pair in line.split())
    return pairs


def _cluster_packages() -> set[str]:
    text = (PROJECT_ROOT / "k8s" / "cluster" / "deps.sh").read_text()
    match = re.search(r"^PACKAGES=\((.*?)\)", text, re.M | re.S)
    assert match, "k8s/cluster/deps.sh has no PACKAGES=(...) list"
    return set(re.sub(r"#.*", "", match.group(1)).split())


@functools.cache
def _subcommands() -> frozenset[str]:
    """gateway-sizer's own commands: an argument list for runner.cli.main starts with one, and starts no program."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return frozenset(commands.choices)


def _programs_in(argv: ast.expr) -> Iterator[str]:
    """The programs a literal command line starts: its first word, and the one `taskset` runs."""
    if isinstance(argv, ast.IfExp):  # [...] if x else []
        yield from _programs_in(argv.body)
        yield from _programs_in(argv.orelse)
        return
    if not isinstance(argv, ast.List | ast.Tuple):
        return
    words = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else None for e in argv.elts]
    if not words or words[0] is None or words[0] in _subcommands():
        return
    yield words[0]
    if words[0] == "taskset":  # taskset [-a] [-p] -c CPUS PROGRAM ...
        rest = iter(words[1:])
        for word in rest:
            if word == "-c":
                next(rest, None)
            elif word is not None and not word.startswith("-"):
                yield word
                break


def _shell_programs(script: str) -> Iterator[str]:
    """The programs a shell script starts: the first word of each command (after `|`, `;`, `do`, ...)."""
    starts, looping = True, False
    for token in shlex.shlex(script, posix=True, punctuation_chars=True):
        if token == "for":
            looping = True  # for NAME in WORDS; do
        elif token in ("|", ";", "&&", "||", "(", ")", "do", "then"):
            starts, looping = not looping or token == "do", looping and token != "do"
        elif starts and not looping:
            starts = False
            if token not in SHELL_WORDS and "=" not in token and not re.match(r"^\d*[<>]", token):
                yield token


def _shell_runners(tree: ast.AST) -> set[str]:
    """The module's functions that hand their first parameter to a shell (subprocess.run(cmd, shell=True))."""
    found = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or not function.args.args:
            continue
        parameter = function.args.args[0].arg
        for node in ast.walk(function):
            shell = isinstance(node, ast.Call) and any(
                k.arg == "shell" and getattr(k.value, "value", False) for k in node.keywords
            )
            if shell and node.args and getattr(node.args[0], "id", "") == parameter:  # type: ignore[union-attr]
                found.add(function.name)
    return found


def _calls(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, program) for every program a module starts by a literal name."""
    shells = _shell_runners(tree)
    for function in ast.walk(tree):  # return [...] of a function named *_command
        if isinstance(function, ast.FunctionDef) and ARGV_NAMES.match(function.name):
            for node in ast.walk(function):
                if isinstance(node, ast.Return) and node.value is not None:
                    yield from ((node.lineno, p) for p in _programs_in(node.value))
    for node in ast.walk(tree):
        argv_names = isinstance(node, ast.Assign) and [t for t in node.targets if isinstance(t, ast.Name)]
        if argv_names and any(ARGV_NAMES.match(t.id) for t in argv_names):
            yield from ((node.lineno, p) for p in _programs_in(node.value))
        if not isinstance(node, ast.Call) or not node.args:
            continue
        first = node.args[0]
        script = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if isinstance(node.func, ast.Name) and node.func.id in shells and script is not None:
            yield from ((node.lineno, p) for p in _shell_programs(script))
        if not isinstance(node.func, ast.Attribute):
            continue
        owner, name = getattr(node.func.value, "id", ""), node.func.attr
        if owner == "shutil" and name == "which" and script is not None:
            yield node.lineno, script
        elif owner == "subprocess" and name in SUBPROCESS:
            if script is None:
                yield from ((node.lineno, p) for p in _programs_in(first))
            else:
                yield from ((node.lineno, p) for p in _shell_programs(script))


def started_programs() -> dict[str, list[str]]:
    """program -> where it is started (path:line), over the runner, the locustfiles, the benches and the tests."""
    found: dict[str, list[str]] = {}
    for top in SOURCES:
        for path in sorted((PROJECT_ROOT / top).rglob("*.py")):
            for line, program in _calls(ast.parse(path.read_text())):
                found.setdefault(program, []).append(f"{path.relative_to(PROJECT_ROOT)}:{line}")
    return found


def test_every_program_the_suite_and_benches_start_has_an_install_step():
    makefile, cluster = _makefile_commands(), _cluster_packages()
    installed = set(makefile) | set(WITHOUT_INSTALL) | {c for c, p in CLUSTER_COMMANDS.items() if p in cluster}
    started = started_programs()
    # the check sees what it is for: programs started in each of the ways the sources start them
    expected = {"tcpdump", "taskset", "wrk", "gcc", "pkill", "ss", "iptables-save", "chromium", "prlimit", "sh"}
    assert expected <= set(started), sorted(started)
    missing = {program: where for program, where in started.items() if program not in installed}
    assert not missing, "\n".join(
        f"{program} (started at {', '.join(where[:3])}) has no install step: add {program}:<Debian package> to "
        "TEST_PACKAGES in the Makefile (or SWEEP_PACKAGES if `make sweep` needs it)"
        for program, where in sorted(missing.items())
    )


def test_the_lists_name_real_packages_and_commands():
    for command, package in _makefile_commands().items():
        assert re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", command) and re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", package)
    assert set(CLUSTER_COMMANDS.values()) <= _cluster_packages()
