"""Typed errors. Library code raises these; only the CLI turns them into one line and an exit code."""

from __future__ import annotations


class SizerError(Exception):
    """Base error: `str(error)` is one line naming the problem; `hint` says how to fix it."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        text = str(self)
        return f"{text}: {self.hint}" if self.hint else text


class UsageError(SizerError):
    """Bad input from the user: a scenario, an override or a command-line value."""

    exit_code = 2


class ScenarioError(UsageError):
    """A scenario file that does not parse or does not validate."""


class PlatformError(SizerError):
    """A platform could not start, apply a configuration or clean up."""


class UnreachableError(UsageError):
    """A service the run depends on (Prometheus, a cluster, Locust's master) cannot be reached."""


class ToolMissingError(UsageError):
    """A binary or package the platform needs is not installed."""


class LoadGeneratorError(SizerError):
    """Locust's master rejected a request or its workers did not connect."""
