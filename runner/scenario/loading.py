"""Loading a scenario: find the file, read it once, apply the overrides, validate, and say what is wrong in one line."""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from runner.errors import ScenarioError
from runner.files import is_file
from runner.paths import PROJECT_ROOT, SCENARIO_DIR
from runner.quantities import short_repr
from runner.scenario.limits import MAX_SCENARIO_BYTES
from runner.scenario.models import Scenario
from runner.scenario.options import OVERRIDES, Overrides, put_field

DEFAULT_SCENARIO = "local"
MAX_PROBLEMS_SHOWN = 3


@dataclass(frozen=True)
class ScenarioFile:
    """A scenario file read as YAML, not yet validated."""

    raw: dict[str, Any]
    source: str  # the file's path, as messages show it


def _shown(path: object) -> str:
    """A path as it goes into a one-line message: control characters escaped."""
    text = str(path)
    return text if text.isprintable() else repr(text)[1:-1]


def resolve_scenario_path(name_or_path: str) -> Path:
    """A scenario by path, or by name from `scenarios/` (`local` -> scenarios/local.yaml)."""
    candidates = [Path(name_or_path), SCENARIO_DIR / name_or_path, SCENARIO_DIR / f"{name_or_path}.yaml"]
    for candidate in candidates:
        if is_file(candidate):
            return candidate
    known = ", ".join(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml")))
    raise ScenarioError(f"scenario {short_repr(name_or_path, 80)} not found", f"use a file path or one of: {known}")


def read_scenario(name_or_path: str) -> ScenarioFile:
    """A scenario file by path or name, read and parsed as YAML; ScenarioError names the file."""
    path = resolve_scenario_path(name_or_path)
    try:
        with path.open("rb") as handle:
            content = handle.read(MAX_SCENARIO_BYTES + 1)
        if len(content) > MAX_SCENARIO_BYTES:
            raise ScenarioError(f"scenario {_shown(path)}: larger than {MAX_SCENARIO_BYTES // 2**10} KiB")
        raw = yaml.safe_load(content.decode())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or type(error).__name__
        raise ScenarioError(f"scenario {_shown(path)}:{where} is not valid YAML ({_shown(problem)})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioError(f"scenario {_shown(path)} cannot be read ({type(error).__name__})") from None
    except (ValueError, RecursionError) as error:  # an int too long to convert, nesting too deep
        raise ScenarioError(f"scenario {_shown(path)} cannot be loaded ({_shown(str(error))[:80]})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ScenarioError(f"scenario {_shown(path)}: expected a mapping of fields at the top level")
    raw.setdefault("name", path.stem)
    return ScenarioFile(raw, _shown(path))


def load_scenario(name_or_path: str, overrides: Overrides | None = None) -> Scenario:
    """Read, override and validate a scenario; ScenarioError/UsageError name the file and the field."""
    file = read_scenario(name_or_path)
    return parse_scenario(file.raw, overrides, source=file.source)


def parse_scenario(raw: dict[str, Any], overrides: Overrides | None = None, *, source: str = "scenario") -> Scenario:
    """Validate raw scenario data (after overrides) into a Scenario, checking the locustfile exists."""
    overrides = overrides or Overrides()
    try:
        data = overrides.apply(raw)
    except ScenarioError as error:
        raise ScenarioError(f"{source}: {error}") from None
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(f"{source}: {_describe(error, overrides.origins())}") from None
    locustfile = locate_locustfile(scenario.load.locustfile)
    if locustfile is None:
        raise ScenarioError(
            f"{source}: load.locustfile {short_repr(str(scenario.load.locustfile), 80)} does not exist",
            "point it at a file under locustfiles/ (default locustfiles/gateway.py)",
        )
    return scenario.model_copy(update={"load": scenario.load.model_copy(update={"locustfile": locustfile})})


def locate_locustfile(path: Path) -> Path | None:
    """The locustfile as an absolute path: as given, or relative to the project root."""
    for candidate in (path, PROJECT_ROOT / path):
        if is_file(candidate):
            return candidate.resolve()
    return None


def replace_option(scenario: Scenario, name: str, value: Any, *, source: str = "scenario") -> Scenario:
    """The scenario with the field of sweep option `name` set to `value` (WORKERS=auto's calibrated count), checked
    as that option's value is: the field's bounds, and the message naming the variable."""
    option = OVERRIDES[name]
    assert option.field is not None
    data = scenario.model_dump(mode="json", by_alias=True)
    put_field(data, option.field, value)
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(f"{source}: {_describe(error, {option.field: option.variable})}") from None


def _describe(error: ValidationError, origins: dict[tuple[str, ...], str] | None = None) -> str:
    """The problems of a validation in one line: unknown keys first (with the closest allowed one), then the rest."""
    problems = sorted(error.errors(), key=lambda problem: problem["type"] != "extra_forbidden")
    first, others = problems[0], problems[1:]
    line = _problem(first, origins or {}, full=True)
    shown = [_problem(problem, origins or {}, full=False) for problem in others[: MAX_PROBLEMS_SHOWN - 1]]
    hidden = len(others) - len(shown)
    if hidden:
        shown.append(f"{hidden} more")
    return line + (f" (also {'; '.join(shown)})" if shown else "")


def _problem(problem: Any, origins: dict[tuple[str, ...], str], *, full: bool) -> str:
    loc = tuple(problem["loc"])
    field = _field(loc)
    origin = next((name for prefix, name in origins.items() if loc[: len(prefix)] == prefix), None)
    if origin:
        field += f" ({origin})"
    if problem["type"] == "extra_forbidden":
        allowed = _allowed_fields(loc[:-1])
        match = _closest(loc[-1], allowed)
        if match:
            return f"{field}: unknown field; did you mean {match}?"
        if full and allowed:
            return f"{field}: unknown field (allowed here: {', '.join(allowed)})"
        return f"{field}: unknown field"
    message = str(problem["msg"]).removeprefix("Value error, ")
    if problem["type"] in ("model_type", "model_attributes_type", "dict_type"):
        message = "expected a mapping of fields"  # not "a valid dictionary or instance of WorkloadRef"
    if not full:
        message = message[:1].lower() + message[1:]
    elif problem["type"] != "value_error" and "input" in problem and not isinstance(problem["input"], dict | list):
        message += f" (got {short_repr(problem['input'])})"
    return f"{field}: {_shown(message)}" if field else _shown(message)


def _field(loc: tuple[Any, ...]) -> str:
    """A field's path as the YAML spells it: `load.step_seconds`, `envoy.cpu[1]`."""
    text = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        else:
            name = str(part)
            name = name if name.isprintable() and len(name) <= 40 else short_repr(name)
            text += f".{name}" if text else name
    return text


def _closest(key: Any, allowed: list[str]) -> str | None:
    """The allowed key closest to a misspelt one (case and '-' vs '_' aside), or None."""
    if not isinstance(key, str) or not allowed:
        return None
    folded = {name.lower(): name for name in allowed}
    matches = difflib.get_close_matches(key.lower().replace("-", "_"), list(folded), n=1, cutoff=0.6)
    return folded[matches[0]] if matches else None


def _allowed_fields(loc: tuple[Any, ...]) -> list[str]:
    model: type[BaseModel] = Scenario
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list of models (contour.resources[0])
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        found = _model_in(getattr(field, "annotation", None))
        if found is None:
            return []
        model = found
    return sorted(f.alias or n for n, f in model.model_fields.items())


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class in an annotation such as `Resources | None` or `tuple[Resources, ...] | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, tuple, typing.Annotated):
        for argument in typing.get_args(annotation):
            found = _model_in(argument)
            if found is not None:
                return found
    return None


def first_difference(before: Any, after: Any, path: str = "") -> str | None:
    """The first field (dotted path) whose value differs between two dumped scenarios, else None."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in [*before, *(k for k in after if k not in before)]:
            found = first_difference(before.get(key), after.get(key), f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    return None if before == after else (path or "(the scenario)")
