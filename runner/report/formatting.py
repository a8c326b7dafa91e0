"""Number formats shared by the report's renderers and the CLI's sizing output."""

from __future__ import annotations

from runner.quantities import format_cpu

__all__ = ["cpu", "mebibytes", "millicores", "ms", "percent", "percent_range", "rps", "signed_percent"]

_MIB = 2**20


def rps(value: float | None) -> str:
    """1804.3 -> "1,804"; None -> "-"."""
    return "-" if value is None else f"{value:,.0f}"


def percent(value: float | None, digits: int = 0) -> str:
    """0.904 -> "90%"."""
    return "-" if value is None else f"{value:.{digits}%}"


def signed_percent(value: float | None) -> str:
    """A change in percent with its sign: -7.25 -> "-7.2%", 3 -> "+3.0%"."""
    return "-" if value is None else f"{value:+.1f}%"


def ms(value: float | None) -> str:
    """Latency in milliseconds: 30.0 -> "30 ms"."""
    return "-" if value is None else f"{value:,.0f} ms"


def mebibytes(value: float | None) -> str:
    """Bytes as MiB with one decimal: 21295104 -> "20.3 MiB"."""
    return "-" if not value else f"{value / _MIB:,.1f} MiB"


def cpu(cores: float | None) -> str:
    """Kubernetes CPU form: 0.15 -> "150m"."""
    return "-" if cores is None else format_cpu(cores)


def millicores(cores: float | None) -> str:
    """Small CPU figures with a decimal: 0.0034 -> "3.4m"."""
    return "-" if cores is None else f"{cores * 1000:,.1f}m"


def percent_range(low: float, high: float) -> str:
    """ "58%-70%", as the reference report writes CPU utilization."""
    return f"{low:.0%}-{high:.0%}"
