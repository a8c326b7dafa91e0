"""The table of sweep options (runner/scenario/options.py) is the one definition: the Makefile, the CLI and README.md
say the same, and each row's examples set exactly its fields. Adding an option is a row plus its use; these
tests say what else is missing (the Makefile's pair, the README's row)."""

from __future__ import annotations

import argparse
import re

import pytest

from runner.cli import build_parser
from runner.commands.sweep import overrides_from
from runner.errors import UsageError
from runner.paths import PROJECT_ROOT
from runner.scenario import AUTO, OVERRIDES, SWEEP_OPTIONS, Overrides, parse_scenario

MINIMAL = {"name": "t", "envoy": {"cpu": [0.25]}}
SWEEP_COMMANDS = [["sweep"], ["plan"], ["calibrate"], ["testbed", "up"]]


def _makefile_variable(name: str) -> str:
    """A Makefile variable's value, its continuation lines joined."""
    text = (PROJECT_ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(rf"^{name} :?= (.*)$", text, re.M)
    assert match, f"the Makefile has no {name}"
    return match.group(1)


def test_the_makefile_passes_every_option_in_the_table_order():
    pairs = [tuple(word.split(":", 1)) for word in _makefile_variable("SWEEP_OPTIONS").split()]
    expected = [(option.variable, option.flag) for option in SWEEP_OPTIONS]
    line = " ".join(f"{variable}:{flag}" for variable, flag in expected)
    assert pairs == expected, f"the Makefile's SWEEP_OPTIONS should be: {line}"
    assert _makefile_variable("SIZER_VARS").startswith("$(foreach option,$(SWEEP_OPTIONS),")
    assert "$(SWEEP_OPTIONS)" in _makefile_variable("SWEEP_ARGS")


def _subparser(parser: argparse.ArgumentParser, path: list[str]) -> argparse.ArgumentParser:
    for name in path:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = commands.choices[name]
    return parser


@pytest.mark.parametrize("command", SWEEP_COMMANDS, ids=" ".join)
def test_every_sweep_command_takes_every_option_in_the_table(command):
    parser = _subparser(build_parser(), command)
    flags = {flag: action for action in parser._actions for flag in action.option_strings}
    for option in SWEEP_OPTIONS:
        action = flags[option.flag]
        assert (action.dest, action.metavar) == (option.name, option.variable)
        assert action.help == option.cli_help() and "`" not in action.help
    argv = [*command, *(f"{option.flag}=x{i}" for i, option in enumerate(SWEEP_OPTIONS))]
    args = build_parser().parse_args(argv)
    assert [getattr(args, option.name) for option in SWEEP_OPTIONS] == [f"x{i}" for i in range(len(SWEEP_OPTIONS))]
    assert overrides_from(args).texts == {name: f"x{i + 1}" for i, name in enumerate(OVERRIDES)}


def _readme_rows() -> list[str]:
    text = (PROJECT_ROOT / "README.md").read_text()
    section = text.split("\n## Sweep options\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")]


def test_the_readme_table_is_the_option_table():
    expected = ["| variable | meaning | example |", "| --- | --- | --- |"] + [
        f"| `{option.variable}` | {option.help} | {' '.join(f'`{e}`' for e in option.examples)} |"
        for option in SWEEP_OPTIONS
    ]
    assert _readme_rows() == expected, "README.md's Sweep options table should read:\n" + "\n".join(expected)


def _leaves(data: dict, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The paths of the values in nested mappings: {"load": {"users": [4]}} -> {("load", "users")}."""
    paths: set[tuple[str, ...]] = set()
    for key, value in data.items():
        paths |= _leaves(value, (*prefix, key)) if isinstance(value, dict) else {(*prefix, key)}
    return paths


@pytest.mark.parametrize("option", OVERRIDES.values(), ids=lambda option: option.variable)
def test_each_example_sets_exactly_the_options_fields_and_validates(option):
    for example in option.examples:
        overrides = Overrides(**{option.name: example})
        data = overrides.apply({})
        assert _leaves(data) == set(option.fields), (example, data)
        assert overrides.origins() == dict.fromkeys(option.fields, option.variable)
        if overrides.value(option.name) != AUTO:  # WORKERS=auto: tests/unit/test_generator_sizing.py
            parse_scenario(MINIMAL, overrides)


@pytest.mark.parametrize("option", OVERRIDES.values(), ids=lambda option: option.variable)
def test_a_bad_value_is_refused_naming_the_variable(option):
    with pytest.raises(UsageError) as error:
        parse_scenario(MINIMAL, Overrides(**{option.name: "nope"}))
    assert option.variable in error.value.one_line()


def test_the_table_names_each_option_and_field_once():
    names = [option.name for option in SWEEP_OPTIONS]
    fields = [field for option in SWEEP_OPTIONS for field in option.fields]
    assert len(set(names)) == len(names) and len(set(fields)) == len(fields)
    with pytest.raises(TypeError, match="not a sweep option: envoy_cpu"):
        Overrides(envoy_cpu="1")


def test_each_value_is_parsed_once_and_kept_without_the_others():
    overrides = Overrides(envoy_cpus="0.25,0.5", workers="auto", users="")
    assert overrides.texts == {"envoy_cpus": "0.25,0.5", "workers": "auto"}  # empty: not given
    assert overrides.values() is overrides.values() and overrides.value("envoy_cpus") == [0.25, 0.5]
    rest = overrides.without("workers")
    assert rest.texts == {"envoy_cpus": "0.25,0.5"} and rest.values()["envoy_cpus"] is overrides.value("envoy_cpus")
