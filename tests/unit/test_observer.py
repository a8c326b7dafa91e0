"""The engine's events: SweepObserver is the catalogue, Broadcast passes each of its hooks on by itself.

What can break: a hook Broadcast does not pass on (the catalogue read wrong), arguments lost on the way, the
observers' order, and an observer overriding a hook under a name or with parameters the catalogue no longer
has (it would never be called, or be called wrong)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from runner.console import ConsoleObserver
from runner.live import LiveState
from runner.observer import HOOKS, Broadcast, SweepObserver

# Public methods an observer may have besides hooks: what its owner calls on it directly.
OWN_METHODS = {ConsoleObserver: {"summary"}, LiveState: {"snapshot"}}


class Recorder(SweepObserver):
    """An observer that records every hook it gets, with its arguments, into a shared list."""

    def __init__(self, name: str, calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]]) -> None:
        self.name, self.calls = name, calls

    def __getattribute__(self, attribute: str) -> Any:
        if attribute in HOOKS:
            name, calls = object.__getattribute__(self, "name"), object.__getattribute__(self, "calls")
            return lambda *args, **kwargs: calls.append((name, attribute, args, kwargs))
        return object.__getattribute__(self, attribute)


def test_the_catalogue_is_every_hook_sweep_observer_declares():
    declared = [name for name, member in inspect.getmembers(SweepObserver, inspect.isfunction) if name[0] != "_"]
    assert sorted(HOOKS) == sorted(declared) and len(HOOKS) >= 14
    assert "config_finished" in HOOKS and "memory_point_measured" in HOOKS


@pytest.mark.parametrize("hook", HOOKS)
def test_broadcast_passes_every_hook_to_every_observer_in_order_with_its_arguments(hook):
    calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = []
    broadcast = Broadcast(Recorder("first", calls), Recorder("second", calls))
    parameters = list(inspect.signature(getattr(SweepObserver, hook)).parameters)[1:]
    values = [object() for _ in parameters]
    getattr(broadcast, hook)(*values[:1], **dict(zip(parameters[1:], values[1:], strict=True)))
    expected_kwargs = dict(zip(parameters[1:], values[1:], strict=True))
    assert calls == [
        ("first", hook, tuple(values[:1]), expected_kwargs),
        ("second", hook, tuple(values[:1]), expected_kwargs),
    ]
    assert getattr(Broadcast, hook).__doc__ == getattr(SweepObserver, hook).__doc__


@pytest.mark.parametrize("observer", [ConsoleObserver, LiveState], ids=lambda c: c.__name__)
def test_an_observer_overrides_only_hooks_of_the_catalogue_with_their_parameters(observer):
    own = {name for name, member in vars(observer).items() if inspect.isfunction(member) and name[0] != "_"}
    assert own - set(HOOKS) <= OWN_METHODS[observer], (
        f"not in the catalogue: {own - set(HOOKS) - OWN_METHODS[observer]}"
    )
    for hook in own & set(HOOKS):
        overridden = list(inspect.signature(getattr(observer, hook)).parameters)
        declared = list(inspect.signature(getattr(SweepObserver, hook)).parameters)
        assert overridden == declared, hook
    assert own & set(HOOKS), "it overrides some hooks"


def test_an_observer_with_a_hook_the_catalogue_lacks_is_found():
    class Renamed(SweepObserver):
        def config_done(self, result: object) -> None:  # a hook renamed in the catalogue, not here
            pass

    OWN_METHODS[Renamed] = set()
    try:
        with pytest.raises(AssertionError, match="config_done"):
            test_an_observer_overrides_only_hooks_of_the_catalogue_with_their_parameters(Renamed)
    finally:
        del OWN_METHODS[Renamed]
