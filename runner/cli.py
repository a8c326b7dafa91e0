"""The `gateway-sizer` command: its parser, and `main`, which turns every typed error into one line and its exit
code. The commands live in runner.commands."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from runner.commands import fetch, report, sweep, testbed
from runner.errors import SizerError, one_line

EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block) naming the argument, exit code 2 as for any bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {one_line(message)} (see {self.prog} --help)\n")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # `--flag=--`: argparse (3.11) takes that "--" for the end of the options and hands the command an empty
        # list, which no check expects (a TypeError in float()); the value is the text "--", refused in one line.
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            return self._get_value(action, "--")
        return super()._get_values(action, arg_strings)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gateway-sizer", description="Find how many Envoy cores a gateway needs.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (sweep, testbed, report, fetch):
        module.add_commands(commands)
    return parser


class Stopped(KeyboardInterrupt):
    """A stop signal other than Ctrl-C, handled as Ctrl-C is; `signum` gives the exit code (128 + it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop_signals_as_interrupt() -> None:
    """SIGTERM and SIGHUP (a closed terminal) stop a run as Ctrl-C does: cleanly, with what was measured saved."""

    def handler(signum: int, frame: object) -> None:
        raise Stopped(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)
    # A runner started in the background of a script inherits SIGINT ignored (and Python then keeps it
    # so): `kill -INT` would do nothing. A sweep holds load, so it always honours SIGINT as Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    _stop_signals_as_interrupt()
    try:
        return func(args)
    except SizerError as error:
        print(f"gateway-sizer: {error.one_line()}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt as stop:
        name = str(stop) if isinstance(stop, Stopped) else "SIGINT"
        print(
            f"gateway-sizer: interrupted by {name}; everything started was stopped, measured steps are saved",
            file=sys.stderr,
        )
        return 128 + stop.signum if isinstance(stop, Stopped) else EXIT_INTERRUPTED
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
