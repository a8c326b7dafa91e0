"""Windows sized from the scrape interval (runner/scenario/windows.py): a scenario for kube-prometheus-stack's
30 s scrape gets windows that hold its scrapes and a time budget in windows, unless it sets them; one it sets too
short for a single scrape is refused in one line."""

from __future__ import annotations

import pytest

from runner.errors import ScenarioError
from runner.scenario import parse_scenario


def _scenario(load: dict | None = None, scrape_s: float = 1.0):
    raw = {"name": "w", "envoy": {"cpu": [1]}, "prometheus": {"scrape_interval_seconds": scrape_s}}
    return parse_scenario({**raw, "load": load or {}})


def test_a_fast_scrape_keeps_the_default_window_and_budget():
    assert (_scenario().load.step_s, _scenario().load.max_config_s) == (10.0, 600.0)
    assert _scenario(scrape_s=2).load.step_s == 10.0


def test_a_30_s_scrape_gets_windows_of_three_scrapes_and_a_budget_of_sixty_windows():
    load = _scenario(scrape_s=30).load
    assert (load.step_s, load.max_config_s) == (90.0, 5400.0)


def test_what_the_scenario_sets_is_kept():
    load = _scenario({"step_seconds": 45, "max_seconds_per_config": 900}, scrape_s=30).load
    assert (load.step_s, load.max_config_s) == (45.0, 900.0)
    assert _scenario({"step_seconds": 45}, scrape_s=30).load.max_config_s == 2700.0


def test_a_window_shorter_than_one_scrape_is_refused_with_the_fix():
    with pytest.raises(ScenarioError, match=r"load.step_seconds 8 is shorter than .* 30: .* at least 90"):
        _scenario({"step_seconds": 8}, scrape_s=30)


def test_the_derived_windows_survive_a_dump_and_a_reload():
    scenario = _scenario(scrape_s=30)
    again = parse_scenario(scenario.dump())
    assert (again.load.step_s, again.load.max_config_s) == (90.0, 5400.0)
