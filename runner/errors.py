"""Typed errors. Library code raises these; only the CLI turns them into one line and an exit code."""

from __future__ import annotations


class SizerError(Exception):
    """Base error: `str(error)` is one line naming the problem; `hint` says how to fix it."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        """The message and the hint, control characters (line breaks above all) escaped: one line whatever
        it quotes, wherever it lands (the console, summary.json's reasons, the report)."""
        text = f"{self}: {self.hint}" if self.hint else str(self)
        return one_line(text)


def one_line(text: str) -> str:
    """`text` with its control characters escaped (a newline becomes \\n)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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


class WindowDiscarded(PlatformError):
    """A measuring window cannot be trusted (the load stopped, or Locust's master restarted in it)."""


class StopRun(PlatformError):
    """The cluster changed so that the run must not go on (a Gateway created mid-run takes a live run's sizing): the
    sweep stops at once, keeping what it measured, where another error fails only its configuration."""
