"""Driving the load: ask the platform's load generator for a level, wait for the users to spawn and the
load to settle, stop it, and build the meter that measures a window at a configuration's CPU limit."""

from __future__ import annotations

import contextlib
import math

from runner.clock import SYSTEM_CLOCK, Clock
from runner.errors import SizerError
from runner.locust import LoadTarget, LocustOptions
from runner.measure import StepMeter
from runner.model import LoadLevel
from runner.observer import SweepObserver
from runner.platforms.base import Platform
from runner.scenario import LoadSpec

SPAWN_MARGIN_S = 1.0


class LoadDriver:
    """Sets and stops the load on one platform, reporting each phase to the observer."""

    def __init__(
        self, *, platform: Platform, load: LoadSpec, observer: SweepObserver, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.platform = platform
        self.load = load
        self.observer = observer
        self.clock = clock
        self.users = 0  # users running now

    def set(self, level: LoadLevel, phase: str, hold_s: float, *, arrivals: str, target: LoadTarget) -> None:
        """Ask for `level` sent to `target`, then wait for the spawn and `hold_s`."""
        options = LocustOptions.from_load(self.load, level.user_rps, arrivals, target)
        self.platform.locust.swarm(level.users, self.load.spawn_rate, target.url, options)
        spawn_s = math.ceil(abs(level.users - self.users) / self.load.spawn_rate) + SPAWN_MARGIN_S
        wait_s = max(hold_s, spawn_s)
        self.users = level.users
        self.observer.load_changed(level, phase, wait_s)
        self.clock.sleep(wait_s)
        self.platform.check()

    def stop(self) -> None:
        """Stop the load; a generator that cannot be reached has no load to stop."""
        self.users = 0
        with contextlib.suppress(SizerError):
            self.platform.locust.stop()

    def meter(self, envoy_cpu_cores: float) -> StepMeter:
        return StepMeter(
            locust=self.platform.locust,
            metrics=self.platform.metrics,
            selectors=self.platform.selectors,
            envoy_cpu_limit_cores=envoy_cpu_cores,
            capacities=self.platform.capacities(),
            clock=self.clock,
            alive=self.platform.check,
            steal=self.platform.cpu_steal,
            workers=self.load.workers,
        )
