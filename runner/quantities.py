"""Kubernetes-style quantities: CPU ("500m", 0.5) and memory ("512Mi", "1Gi", 1073741824)."""

from __future__ import annotations

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
    """Cores from a CPU quantity: 0.5, "0.5", "500m" -> 0.5."""
    if isinstance(value, bool):
        raise ValueError(f"not a CPU quantity: {value!r}")
    if isinstance(value, int | float):
        cores = float(value)
    else:
        match = _CPU_RE.match(value)
        if not match:
            raise ValueError(f"not a CPU quantity: {value!r} (use cores like 0.5 or millicores like 500m)")
        cores = float(match.group(1)) / (1000 if match.group(2) else 1)
    if cores <= 0:
        raise ValueError(f"CPU must be positive, got {value!r}")
    return cores


def parse_memory(value: str | int) -> int:
    """Bytes from a memory quantity: "512Mi" -> 536870912."""
    if isinstance(value, bool):
        raise ValueError(f"not a memory quantity: {value!r}")
    if isinstance(value, int):
        amount = value
    else:
        match = _MEMORY_RE.match(str(value))
        if not match:
            raise ValueError(f"not a memory quantity: {value!r} (use e.g. 512Mi or 1Gi)")
        amount = int(float(match.group(1)) * _MEMORY_SUFFIXES[match.group(2) or ""])
    if amount <= 0:
        raise ValueError(f"memory must be positive, got {value!r}")
    return amount


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


def parse_number_list(text: str, *, what: str) -> tuple[float, ...]:
    """Expand "1..6", "0.25,0.5" or "0.1..0.5:0.1" into numbers; ValueError names `what` and the forms."""
    forms = "use a list like 0.25,0.5, a range like 1..6 or a stepped range like 0.1..0.5:0.1"
    values: list[float] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            if ".." in part:
                bounds, _, step_text = part.partition(":")
                low_text, _, high_text = bounds.partition("..")
                low, high = float(low_text), float(high_text)
                step = float(step_text) if step_text else 1.0
                if step <= 0 or high < low:
                    raise ValueError
                count = round((high - low) / step)
                if abs(low + count * step - high) > 1e-9 * max(1.0, high):
                    raise ValueError
                values.extend(round(low + i * step, 6) for i in range(count + 1))
            else:
                values.append(float(part))
    except ValueError:
        raise ValueError(f"{what}={text!r} is not a number list: {forms}") from None
    if not values:
        raise ValueError(f"{what} is empty: {forms}")
    return tuple(values)
