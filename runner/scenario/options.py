"""Sweep options: one table, from which the command line and the overrides of a scenario are made.

A row names an option once (`envoy_cpus`: the flag --envoy-cpus, the Make variable ENVOY_CPUS, the key in a
run's recorded overrides), the scenario field it sets, how its text is read, its help and examples. argparse's
options (`runner.commands.sweep`) and `Overrides` are built from it; the Makefile's SWEEP_OPTIONS and README.md's
"Sweep options" table are checked against it (tests/unit/test_options.py).

A parser reads only what the command line adds to the YAML (lists and ranges such as `1..6`, one value, whole
numbers, `auto`). The value then goes through the field's own type once, whose message names the field and the
variable: `envoy.cpu (ENVOY_CPUS): CPU must be positive, got -1.0`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.errors import ScenarioError, UsageError
from runner.quantities import parse_number_list, short_repr
from runner.scenario.limits import MAX_CONFIGURATIONS, MAX_MEMORY_POINTS, MAX_STEPS

FieldPath = tuple[str, ...]  # ("envoy", "cpu"): a field as the YAML spells it
Parser = Callable[[str, str], Any]  # (text, variable) -> the field's value; UsageError naming the variable
AUTO = "auto"  # WORKERS=auto: sized from the saved calibration (runner.generator_sizing)


def is_auto(text: str | None) -> bool:
    return text is not None and text.strip().lower() == AUTO


@dataclass(frozen=True)
class Numbers:
    """A number list (`0.25,0.5`, `1..6`, `0.1..0.5:0.1`) of at most `max_count` values; `single`: one number
    (returned as it is, not in a list); `whole`: whole numbers, from `low` when set."""

    max_count: int = MAX_CONFIGURATIONS
    single: bool = False
    whole: bool = False
    low: int | None = None
    example: str = ""

    def __call__(self, text: str, variable: str) -> Any:
        try:
            values = parse_number_list(text, what=variable, max_count=self.max_count)
        except ValueError as error:
            raise UsageError(str(error)) from None
        if self.single and len(values) != 1:
            raise UsageError(f"{variable}={short_repr(text)} must be a single number")
        if self.whole and any(v != int(v) or (self.low is not None and v < self.low) for v in values):
            what = "a whole number" if self.single else "whole numbers"
            start = "" if self.low is None else f" from {self.low}"
            raise UsageError(f"{variable}={short_repr(text)} must be {what}{start}, e.g. {self.example}")
        numbers = [int(v) for v in values] if self.whole else list(values)
        return numbers[0] if self.single else numbers


@dataclass(frozen=True)
class Words:
    """A comma-separated list of names or quantities (`plain,tls`, `512Mi,1Gi`), each stripped."""

    max_count: int = MAX_CONFIGURATIONS

    def __call__(self, text: str, variable: str) -> list[str]:
        words = [word.strip() for word in text.split(",", self.max_count)]
        if len(words) > self.max_count:
            raise UsageError(f"{variable} has more than {self.max_count} values: sweep fewer")
        return words


def _text(text: str, variable: str) -> str:
    """The text as given: the field's type says whether it is one of its words."""
    return text


_WORKERS = Numbers(single=True, whole=True, example="4 or auto")


def _workers(text: str, variable: str) -> Any:
    """`auto` or one whole number."""
    return AUTO if is_auto(text) else _WORKERS(text, variable)


@dataclass(frozen=True)
class Option:
    """One sweep option. `help` may quote in Markdown (README.md shows it; --help without the backquotes)."""

    name: str  # envoy_cpus: the flag --envoy-cpus, the Make variable ENVOY_CPUS
    field: FieldPath | None  # where its value goes in the scenario; None: not a field (SCENARIO)
    parse: Parser
    help: str
    examples: tuple[str, ...]
    sets: tuple[tuple[FieldPath, Any], ...] = ()  # other fields it sets to a fixed value

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def variable(self) -> str:
        return self.name.upper()

    @property
    def fields(self) -> tuple[FieldPath, ...]:
        """Every field the option sets."""
        return (*((self.field,) if self.field else ()), *(path for path, _ in self.sets))

    def cli_help(self) -> str:
        return f"{self.help.replace('`', '')}; e.g. {' or '.join(self.examples)}"


_COUNTS = Numbers(max_count=MAX_MEMORY_POINTS, whole=True, low=0, example="0,1000,5000 or 0..1000:250")

# The table. Order: how the Makefile passes them, the README lists them and --help shows them.
SWEEP_OPTIONS: tuple[Option, ...] = (
    Option("scenario", None, _text, "a name in `scenarios/` or a path (default: `local`)", ("envoy-cpu",)),
    Option("platform", ("platform",), _text, "`local` or `kubernetes`", ("kubernetes",)),
    Option(
        "envoy_cpus",
        ("envoy", "cpu"),
        Numbers(),
        "Envoy CPU limits: a list, a range, a stepped range",
        ("0.25,0.5", "1..6", "0.1..0.5:0.1"),
    ),
    Option("envoy_memory", ("envoy", "memory"), Words(), "Envoy memory limit(s)", ("1Gi", "512Mi,1Gi")),
    Option(
        "envoy_replicas",
        ("envoy", "replicas"),
        Numbers(whole=True, example="1,2 or 1..3"),
        "Envoy pods per configuration, each with the CPU and memory limit (the fleet)",
        ("1,2", "1..3"),
    ),
    Option(
        "envoy_threads",
        ("envoy", "concurrency"),
        Words(),
        "Envoy worker threads, an axis like the CPU list: `production` (the production gateway's own, kubernetes' "
        "default), `auto` (one per started core, local's default), `default` (Envoy's own count: the node's CPUs, "
        "fewer under a CPU limit) or numbers",
        ("1,2,4", "default,2"),
    ),
    Option(
        "nginx_replicas",
        ("backend", "replicas"),
        Numbers(whole=True, example="1,2,3 or 1..3"),
        "backend replica counts",
        ("3", "1,3"),
    ),
    Option(
        "workers",
        ("load", "workers"),
        _workers,
        "Locust workers, or `auto`: sized from the saved calibration (see `gateway-sizer calibrate`)",
        ("4", "auto"),
    ),
    Option(
        "users",
        ("load", "users"),
        Numbers(max_count=MAX_STEPS, whole=True, example="1,2,3 or 1..3"),
        "closed-loop users per step (switches to the users ramp of the reference report)",
        ("4,8,12,16",),
        sets=((("load", "mode"), "users"),),
    ),
    Option("step_seconds", ("load", "step_seconds"), Numbers(single=True), "measuring window per step", ("15",)),
    Option(
        "rounds",
        ("load", "rounds"),
        Numbers(single=True, whole=True),
        "interleaved rounds over every configuration (the knee's interval comes from their scatter)",
        ("5", "8"),
    ),
    Option(
        "max_rounds",
        ("load", "max_rounds"),
        Numbers(single=True, whole=True),
        "more rounds, up to this many, for a configuration whose knee's interval is wider than its target",
        ("10",),
    ),
    Option(
        "latency_slo_ms",
        ("load", "latency_slo_ms"),
        Numbers(single=True),
        "p99 latency SLO in ms: the capacity is the highest rate served with p99 under it (default 250)",
        ("50",),
    ),
    Option("client", ("load", "client"), _text, "Locust client: `lean` or `fasthttp`", ("lean",)),
    Option(
        "arrivals",
        ("load", "arrivals"),
        Words(),
        "arrival models: `poisson`, `uniform`, `synchronized`, or a list",
        ("poisson,synchronized",),
    ),
    Option(
        "profiles",
        ("profiles",),
        Words(),
        "traffic profiles (`plain`, `tls`, `body-16k`, ...), one axis like the CPU list",
        ("plain,tls,tls-new-connection,body-16k",),
    ),
    Option(
        "connections",
        ("memory", "connections"),
        _COUNTS,
        "memory model: held connections per point (whole numbers from 0; adds a `memory` section)",
        ("0,5000,10000",),
    ),
    Option("routes", ("memory", "routes"), _COUNTS, "memory model: extra routes per point", ("0..1000:250",)),
)
OVERRIDES: dict[str, Option] = {option.name: option for option in SWEEP_OPTIONS if option.field is not None}


class Overrides:
    """Sweep options as the user typed them (`Overrides(envoy_cpus="1..6")`; empty or None: not given), each
    parsed once, on first use, into the scenario fields it sets."""

    def __init__(self, **texts: str | None) -> None:
        unknown = sorted(set(texts) - set(OVERRIDES))
        if unknown:
            raise TypeError(f"not a sweep option: {', '.join(unknown)}")
        self.texts: dict[str, str] = {name: text for name in OVERRIDES if (text := texts.get(name)) not in (None, "")}
        self._values: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"Overrides({', '.join(f'{name}={text!r}' for name, text in self.texts.items())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Overrides) and other.texts == self.texts

    __hash__ = None  # type: ignore[assignment]

    def without(self, *names: str) -> Overrides:
        """These overrides but `names`, with the values already parsed kept."""
        rest = Overrides(**{name: text for name, text in self.texts.items() if name not in names})
        if self._values is not None:
            rest._values = {name: value for name, value in self._values.items() if name in rest.texts}
        return rest

    def values(self) -> dict[str, Any]:
        """Each given option's value, parsed once; UsageError naming the variable of the first bad one."""
        if self._values is None:
            self._values = {
                name: OVERRIDES[name].parse(text, OVERRIDES[name].variable) for name, text in self.texts.items()
            }
        return self._values

    def value(self, name: str) -> Any:
        """One option's parsed value, None when not given."""
        return self.values().get(name)

    def apply(self, raw: dict[str, Any]) -> dict[str, Any]:
        """A copy of the raw scenario data with these values set; ScenarioError for a section that is not a
        mapping."""
        data = dict(raw)
        for name, value in self.values().items():
            option = OVERRIDES[name]
            assert option.field is not None
            for path, item in ((option.field, value), *option.sets):
                put_field(data, path, item)
        return data

    def origins(self) -> dict[FieldPath, str]:
        """The scenario fields these overrides set, each with the variable that set it."""
        return {path: OVERRIDES[name].variable for name in self.texts for path in OVERRIDES[name].fields}


def put_field(data: dict[str, Any], path: FieldPath, value: Any) -> None:
    """Set `path` in `data`, copying each section on the way (the raw data stays as it was read)."""
    *sections, key = path
    target = data
    for depth, name in enumerate(sections):
        section = target.get(name)
        if section is None:
            section = {}
        if not isinstance(section, dict):
            where = ".".join(sections[: depth + 1])
            raise ScenarioError(f"{where}: expected a mapping of fields, got {type(section).__name__}")
        copy = target[name] = dict(section)
        target = copy
    target[key] = value
