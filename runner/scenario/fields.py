"""The scenario's field types: each an annotated type whose validators parse and bound one kind of value.

A validator raises ValueError with a short message; the model that uses the type adds the field's path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator

from runner.quantities import format_cpu, format_memory, parse_cpu, parse_memory, short_repr
from runner.scenario.limits import (
    MAX_CONCURRENCY,
    MAX_CONFIGURATIONS,
    MAX_CPU_CORES,
    MAX_EXTRA_ROUTES,
    MAX_HELD_CONNECTIONS,
    MAX_MEMORY_BYTES,
    MAX_MEMORY_POINTS,
    MAX_NAME_LENGTH,
    MAX_REPLICAS,
    MAX_RPS,
    MAX_STEPS,
    MAX_TEXT_LENGTH,
    MAX_USERS,
    MIN_CPU_CORES,
    MIN_MEMORY_BYTES,
)


def _as_tuple(value: Any) -> Any:
    if value is None or isinstance(value, list | tuple):
        return value
    return (value,)


def at_most(limit: int, what: str) -> Callable[[Any], Any]:
    """A check, before the items are parsed, that a list is not longer than `limit`."""

    def check(values: Any) -> Any:
        if isinstance(values, list | tuple) and len(values) > limit:
            raise ValueError(f"{len(values)} {what}; at most {limit}")
        return values

    return check


def _cores(value: Any) -> float:
    """A CPU quantity within MIN_CPU_CORES..MAX_CPU_CORES, in whole millicores."""
    cores = parse_cpu(value)
    if cores < MIN_CPU_CORES:
        raise ValueError(f"{short_repr(value)} is below 1m, the smallest CPU limit")
    if cores > MAX_CPU_CORES:
        raise ValueError(f"{cores:g} cores is more than {MAX_CPU_CORES:g} (MAX_CPU_CORES)")
    if abs(cores * 1000 - round(cores * 1000)) > 1e-6:
        raise ValueError(f"{short_repr(value)} is finer than 1m: use whole millicores, e.g. {format_cpu(cores)}")
    return cores


def _bytes(value: Any) -> int:
    """A memory quantity within MIN_MEMORY_BYTES..MAX_MEMORY_BYTES."""
    amount = parse_memory(value)
    if not MIN_MEMORY_BYTES <= amount <= MAX_MEMORY_BYTES:
        limits = f"{format_memory(MIN_MEMORY_BYTES)}..{format_memory(MAX_MEMORY_BYTES)}"
        raise ValueError(f"{short_repr(value)} is outside {limits}")
    return amount


def _cpu(value: Any) -> Any:
    return None if value is None else _cores(value)


def _memory(value: Any) -> Any:
    return None if value is None else _bytes(value)


def _cpus(value: Any) -> Any:
    values = at_most(MAX_CONFIGURATIONS, "CPU limits")(_as_tuple(value))
    return values if values is None else tuple(_cores(v) for v in values)


def _memories(value: Any) -> Any:
    values = at_most(MAX_CONFIGURATIONS, "memory limits")(_as_tuple(value))
    return values if values is None else tuple(_bytes(v) for v in values)


def _distinct(values: tuple[Any, ...]) -> tuple[Any, ...]:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{value:g} is listed twice" if isinstance(value, float) else f"{value} is listed twice")
        seen.add(value)
    return values


THREAD_WORDS = ("auto", "default", "production")  # envoy.concurrency's words (runner/scenario/models.py)


def _concurrency(value: Any) -> int | Literal["auto", "default", "production"]:
    if isinstance(value, str) and value.strip() in THREAD_WORDS:
        return value.strip()  # type: ignore[return-value]  # one of THREAD_WORDS
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,4}\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CONCURRENCY:
        raise ValueError(
            f"use auto, default, production or a whole number of threads from 1 to {MAX_CONCURRENCY}, got "
            f"{short_repr(value)}"
        )
    return value


def _text_check(limit: int, *, lines: bool = False) -> Callable[[str], str]:
    """Free text: at most `limit` characters and no control characters (newlines and tabs when `lines`)."""

    def check(text: str) -> str:
        if len(text) > limit:
            raise ValueError(f"{len(text)} characters; at most {limit}")
        allowed = "\n\t" if lines else ""
        if any(not c.isprintable() and c not in allowed for c in text):
            raise ValueError("contains a control character (a line break, NUL, ...)")
        return text

    return check


def _name(text: str) -> str:
    if not text.strip():
        raise ValueError("is empty")
    return _text_check(MAX_NAME_LENGTH)(text)


_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_RE = re.compile(rf"({_HOST_LABEL}(?:\.{_HOST_LABEL})*)(?::([0-9]{{1,5}}))?")
_DNS_LABEL_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
_DNS_1035_RE = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
_PATH_RE = re.compile(r"/[!-~]*")  # printable ASCII, no space: percent-encode anything else
_HEADER_VALUE_RE = re.compile(r"[ -~]*")
_IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _host(text: str) -> str:
    match = _HOST_RE.fullmatch(text)
    if match is None or len(match.group(1)) > 253 or (match.group(2) and not 1 <= int(match.group(2)) <= 65535):
        raise ValueError("not a host name: letters, digits and '-' in dot-separated labels, optionally :port")
    return text


def _path(text: str) -> str:
    if len(text) > MAX_TEXT_LENGTH or not _PATH_RE.fullmatch(text) or text.startswith("//"):
        raise ValueError("not an absolute path: start with one '/', no scheme or host, no spaces or control characters")
    return text


def _header_value(text: str) -> str:
    if len(text) > 256 or not _HEADER_VALUE_RE.fullmatch(text):
        raise ValueError("not a header value: printable ASCII, at most 256 characters, no line breaks")
    return text


def _dns_label(text: str) -> str:
    if not _DNS_LABEL_RE.fullmatch(text):
        raise ValueError("not a DNS-1123 label: lowercase letters, digits and '-', at most 63, e.g. projectcontour")
    return text


def _dns_subdomain(text: str) -> str:
    if len(text) > 253 or not all(_DNS_LABEL_RE.fullmatch(label) for label in text.split(".")):
        raise ValueError("not a DNS-1123 name: lowercase letters, digits, '-' and '.', e.g. envoy")
    return text


def _service_name(text: str) -> str:
    if not _DNS_1035_RE.fullmatch(text):
        raise ValueError("not a Service name: a lowercase letter, then letters, digits and '-', at most 63")
    return text


def _url(text: str) -> str:
    _text_check(MAX_TEXT_LENGTH)(text)
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in text):
        raise ValueError("not an http(s) URL, e.g. http://prometheus.example:9090")
    return text


def _image(text: str) -> str:
    if len(text) > 512 or not _IMAGE_RE.fullmatch(text):
        raise ValueError("not an image reference, e.g. locustio/locust:2.47.0")
    return text


def _identifier(text: str) -> str:
    if len(text) > 100 or not _IDENTIFIER_RE.fullmatch(text):
        raise ValueError("not a Python class name, e.g. LeanGatewayUser")
    return text


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()}")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]  # YAML's true is not 1
Float = Annotated[float, BeforeValidator(_not_bool)]
Cores = Annotated[float, BeforeValidator(_cpu)]
OptionalCores = Annotated[float | None, BeforeValidator(_cpu)]
OptionalBytes = Annotated[int | None, BeforeValidator(_memory)]
CoresList = Annotated[tuple[float, ...], BeforeValidator(_cpus), Field(min_length=1), AfterValidator(_distinct)]
BytesList = Annotated[tuple[int, ...], BeforeValidator(_memories), Field(min_length=1), AfterValidator(_distinct)]
ReplicaCounts = Annotated[
    tuple[Annotated[Int, Field(ge=1, le=MAX_REPLICAS)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(at_most(MAX_CONFIGURATIONS, "replica counts")),
    Field(min_length=1),
    AfterValidator(_distinct),
]
UserCounts = Annotated[
    tuple[Annotated[Int, Field(ge=1, le=MAX_USERS)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(at_most(MAX_STEPS, "steps")),
    Field(min_length=1),
]
Rates = Annotated[
    tuple[Annotated[Float, Field(gt=0, le=MAX_RPS)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(at_most(MAX_STEPS, "steps")),
]
ConnectionCounts = Annotated[
    tuple[Annotated[Int, Field(ge=0, le=MAX_HELD_CONNECTIONS)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(at_most(MAX_MEMORY_POINTS, "connection counts")),
    AfterValidator(_distinct),
]
RouteCounts = Annotated[
    tuple[Annotated[Int, Field(ge=0, le=MAX_EXTRA_ROUTES)], ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(at_most(MAX_MEMORY_POINTS, "route counts")),
    AfterValidator(_distinct),
]
Concurrency = Annotated[int | Literal["auto", "default", "production"], PlainValidator(_concurrency)]
# Envoy's worker-thread counts to sweep (an axis, like the CPU list): each a number or one of THREAD_WORDS
ConcurrencyList = Annotated[
    tuple[Concurrency, ...],
    BeforeValidator(_as_tuple),
    BeforeValidator(at_most(MAX_CONFIGURATIONS, "thread counts")),
    Field(min_length=1),
    AfterValidator(_distinct),
]
Name = Annotated[str, AfterValidator(_name)]
Text = Annotated[str, AfterValidator(_text_check(MAX_TEXT_LENGTH, lines=True))]
PathText = Annotated[str, AfterValidator(_text_check(MAX_TEXT_LENGTH))]
HostName = Annotated[str, AfterValidator(_host)]
RequestPath = Annotated[str, AfterValidator(_path)]
HeaderValue = Annotated[str, AfterValidator(_header_value)]
DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsSubdomain = Annotated[str, AfterValidator(_dns_subdomain)]
ServiceName = Annotated[str, AfterValidator(_service_name)]
Url = Annotated[str, AfterValidator(_url)]
Image = Annotated[str, AfterValidator(_image)]
ClassName = Annotated[str, AfterValidator(_identifier)]
ArrivalModel = Literal["poisson", "uniform", "synchronized"]


def _locustfile(path: Path) -> Path:
    _text_check(MAX_TEXT_LENGTH)(str(path))
    return path


def _arrivals(value: Any) -> Any:
    legacy = {"spread": "uniform"}  # the name scenarios before 2026-11-23 gave uniform spacing
    values = _as_tuple(value)
    return tuple(legacy.get(v, v) if isinstance(v, str) else v for v in values) if values is not None else None


ArrivalsList = Annotated[
    tuple[ArrivalModel, ...],
    BeforeValidator(_arrivals),
    Field(min_length=1, max_length=3),
    AfterValidator(_distinct),
]

Locustfile = Annotated[Path, AfterValidator(_locustfile)]
