"""What the sweep engine reports as it goes: the catalogue of events. Every hook does nothing here; the console
and the live view override the ones they show, tests and benches may record them.

A new event is one hook declared in `SweepObserver` (its signature and a docstring saying when it fires);
`Broadcast` passes every hook of the catalogue on by itself (HOOKS), so nothing else restates it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.assess import Assessment
    from runner.model import BaselineResult, ConfigResult, LoadLevel, MemoryPoint, Step
    from runner.plan import Configuration, Plan
    from runner.platforms.base import Endpoints
    from runner.results import RunStore


class SweepObserver:
    """Hooks called by the engine: round_started for each round, then for each visit to a configuration
    config_started, load_changed and step_measured for each step, then visit_finished, or config_finished
    after its last visit (config_skipped for one a resumed run had finished)."""

    def run_started(self, store: RunStore, endpoints: Endpoints, plan: Plan) -> None:
        """The platform is up: `store` is where results go, `endpoints` where a person can look."""

    def round_started(self, number: int, planned: int, order: list[Configuration]) -> None:
        """Round `number` (of `planned`, more while an interval is too wide) visits `order`."""

    def config_started(self, position: int, total: int, config: Configuration) -> None:
        """Configuration `position` of `total` in this round is being applied."""

    def config_skipped(self, config: Configuration, result: ConfigResult) -> None:
        """A resumed run already finished `config` (its `result`)."""

    def components_restarted(self, names: list[str]) -> None:
        """Parts of the platform that had died were started again before the configuration."""

    def load_changed(self, level: LoadLevel, phase: str, seconds: float) -> None:
        """The load is now `level`, held `seconds` for `phase` (warm-up, settle, measure)."""

    def step_measured(self, config: Configuration, step: Step) -> None:
        """A window was measured and saved."""

    def visit_finished(self, result: ConfigResult, assessment: Assessment) -> None:
        """A visit ended and the configuration has more rounds: its figures so far."""

    def config_finished(self, result: ConfigResult) -> None:
        """A configuration ended: its knee, capacity and verdict are in `result`."""

    def rounds_finished(self, rounds: int) -> None:
        """Every configuration's rounds are done (`rounds` of them), the platform still running."""

    def baseline_measured(self, baseline: BaselineResult) -> None:
        """The backend was measured directly and through the gateway."""

    def memory_point_started(self, position: int, total: int, label: str) -> None:
        """Memory point `position` of `total` (held connections, extra routes) is being applied."""

    def memory_point_skipped(self, label: str) -> None:
        """A resumed run already measured this memory point."""

    def memory_point_measured(self, point: MemoryPoint) -> None:
        """A memory point was measured (or failed) and saved."""


HOOKS: tuple[str, ...] = tuple(
    name for name, value in vars(SweepObserver).items() if callable(value) and not name.startswith("_")
)  # the catalogue: every hook SweepObserver declares, in order


class Broadcast(SweepObserver):
    """Passes every hook on to each of `observers`, in order (each hook of HOOKS, made by _passed_on)."""

    def __init__(self, *observers: SweepObserver) -> None:
        self.observers = observers


def _passed_on(name: str) -> Callable[..., None]:
    def hook(self: Broadcast, *args: Any, **kwargs: Any) -> None:
        for observer in self.observers:
            getattr(observer, name)(*args, **kwargs)

    hook.__name__ = hook.__qualname__ = name
    hook.__doc__ = getattr(SweepObserver, name).__doc__
    return hook


for _hook in HOOKS:
    setattr(Broadcast, _hook, _passed_on(_hook))
