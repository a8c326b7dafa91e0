"""Kubernetes-style quantities: CPU ("500m", 0.5) and memory ("512Mi", "1Gi", 1073741824)."""

from __future__ import annotations

import math
import re

_MEMORY_SUFFIXES = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_MEMORY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(Ki|Mi|Gi|Ti|k|M|G|T)?\s*$")
_CPU_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(m)?\s*$")


def parse_cpu(value: str | float | int) -> float:
    """Cores from a CPU quantity: 0.5, "0.5", "500m" -> 0.5. ValueError for anything else, nan and inf too."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"not a CPU quantity: {short_repr(value)} (use cores like 0.5 or millicores like 500m)")
    if isinstance(value, int | float):
        cores = float(value) if isinstance(value, float) or abs(value) < 10**300 else math.inf
    else:
        match = _CPU_RE.match(value)
        if not match:
            raise ValueError(f"not a CPU quantity: {short_repr(value)} (use cores like 0.5 or millicores like 500m)")
        cores = float(match.group(1)) / (1000 if match.group(2) else 1)
    if not math.isfinite(cores):
        raise ValueError(f"CPU must be a finite number, got {short_repr(value)}")
    if cores <= 0:
        raise ValueError(f"CPU must be positive, got {short_repr(value)}")
    return cores


def parse_memory(value: str | int) -> int:
    """Bytes from a memory quantity: "512Mi" -> 536870912. ValueError for anything else, nan and inf too."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"not a memory quantity: {short_repr(value)} (use e.g. 512Mi or 1Gi)")
    if isinstance(value, int):
        amount = value
    else:
        match = _MEMORY_RE.match(str(value))
        if not match:
            raise ValueError(f"not a memory quantity: {short_repr(value)} (use e.g. 512Mi or 1Gi)")
        size = float(match.group(1)) * _MEMORY_SUFFIXES[match.group(2) or ""]
        if not math.isfinite(size):
            raise ValueError(f"memory must be a finite amount, got {short_repr(value)}")
        amount = int(size)
    if amount <= 0:
        raise ValueError(f"memory must be positive, got {short_repr(value)}")
    return amount


def short_repr(value: object, limit: int = 40) -> str:
    """repr() of a value cut to `limit` characters: error messages stay one short line."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print (sys.get_int_max_str_digits)
        return "a number too long to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_cpu(cores: float) -> str:
    """Kubernetes form of a CPU amount: 0.15 -> "150m", 2.0 -> "2"."""
    millis = round(cores * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_memory(amount: int) -> str:
    """Kubernetes form of a byte count, exact binary suffix where possible: 536870912 -> "512Mi"."""
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = _MEMORY_SUFFIXES[suffix]
        if amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


def parse_number_list(text: str, *, what: str, max_count: int = 1000) -> tuple[float, ...]:
    """Expand "1..6", "0.25,0.5" or "0.1..0.5:0.1" into numbers; ValueError names `what` and the forms.

    Finite numbers only, and at most `max_count` of them: a range is counted before it is expanded.
    """
    forms = "use a list like 0.25,0.5, a range like 1..6 or a stepped range like 0.1..0.5:0.1"
    values: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        expanded = _expand(part)
        if expanded is None:
            raise ValueError(f"{what}={short_repr(text)} is not a number list: {forms}")
        low, step, count = expanded
        if len(values) + count > max_count:
            raise ValueError(f"{what}={short_repr(text)} has more than {max_count} values: sweep fewer")
        if count == 1:
            values.append(low)
        else:
            values.extend(round(low + i * step, 6) for i in range(count))
    if not values:
        raise ValueError(f"{what} is empty: {forms}")
    return tuple(values)


def _expand(part: str) -> tuple[float, float, int] | None:
    """One item of a number list as (first value, step, how many), or None when it is not one."""
    try:
        if ".." not in part:
            value = float(part)
            return (value, 0.0, 1) if math.isfinite(value) else None
        bounds, _, step_text = part.partition(":")
        low_text, _, high_text = bounds.partition("..")
        low, high = float(low_text), float(high_text)
        step = float(step_text) if step_text else 1.0
    except ValueError:
        return None
    if not all(math.isfinite(v) for v in (low, high, step)) or step <= 0 or high < low:
        return None
    intervals = (high - low) / step
    if not math.isfinite(intervals):
        return None
    count = round(intervals)
    if abs(low + count * step - high) > 1e-9 * max(1.0, high):
        return None
    return low, step, count + 1
