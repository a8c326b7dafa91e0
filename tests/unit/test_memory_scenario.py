"""The scenario's `memory` section, `envoy.overload`, the CONNECTIONS and ROUTES overrides, and the plan of
memory points."""

from __future__ import annotations

import pytest

from runner.errors import ScenarioError, UsageError
from runner.memory_sweep import memory_configuration, plan_memory
from runner.plan import Configuration, plan_sweep
from runner.scenario import (
    MAX_EXTRA_ROUTES,
    MAX_HELD_CONNECTIONS,
    MAX_MEMORY_POINTS,
    MAX_REFRESH_SECONDS,
    Overrides,
    parse_scenario,
)

BASE = {"name": "m", "envoy": {"cpu": [0.25, 0.5], "memory": ["256Mi", "1Gi"]}}


def scenario(memory=None, overrides=None, **top):
    raw = {**BASE, **top}
    if memory is not None:
        raw["memory"] = memory
    return parse_scenario(raw, overrides)


def test_memory_section_defaults_to_the_sweeps_largest_limits_and_runs_after_the_knees():
    s = scenario({"connections": [5000, 0, 1000], "routes": [500, 0]})
    spec = s.memory
    assert spec is not None and spec.rps == 50 and spec.hold_s == 30 and spec.refresh_s == 25 and not spec.only
    points = plan_memory(spec)
    assert [(p.connections, p.routes) for p in points] == [(0, 0), (1000, 0), (5000, 0), (0, 500)]
    assert points[0].key == "connections=0,routes=0"
    config = memory_configuration(s, routes=500)
    assert (config.envoy_cpu_cores, config.envoy_memory_bytes, config.extra_routes) == (0.5, 2**30, 500)
    assert len(plan_sweep(s)) == 4  # the knee configurations still run


def test_memory_only_plans_no_knee_configuration_and_takes_its_own_limits():
    s = scenario({"only": True, "connections": [0, 100], "cpu": "300m", "memory": "2Gi"})
    assert plan_sweep(s).configurations == ()
    config = memory_configuration(s)
    assert (config.envoy_cpu_cores, config.envoy_memory_bytes) == (0.3, 2 * 2**30)


def test_extra_routes_change_the_configuration_key_only_when_there_are_some():
    plain = Configuration(0.5, 2**30, 1, 1)
    assert plain.key == "envoy=500m/1Gi,contour=-,nginx=1,arrivals=poisson"  # runs saved before still match
    routed = Configuration(0.5, 2**30, 1, 1, extra_routes=250)
    assert routed.key.endswith(",routes=250") and "250 extra routes" in routed.label


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        ({}, "memory: list connection counts"),
        ({"connections": [MAX_HELD_CONNECTIONS + 1]}, "memory.connections[0]: Input should be less than or equal"),
        ({"routes": [MAX_EXTRA_ROUTES + 1]}, "memory.routes[0]: Input should be less than or equal"),
        ({"connections": [-1]}, "memory.connections[0]: Input should be greater than or equal to 0"),
        ({"connections": [10, 10]}, "memory.connections: 10 is listed twice"),
        ({"connections": list(range(MAX_MEMORY_POINTS + 1))}, f"at most {MAX_MEMORY_POINTS}"),
        ({"connections": [10], "refresh_seconds": 61}, f"less than or equal to {MAX_REFRESH_SECONDS:g}"),
        ({"connections": [10], "hold_seconds": 1}, "memory.hold_seconds: Input should be greater than or equal to 5"),
        ({"connections": [10], "open_rate": 0}, "memory.open_rate"),
        ({"connections": [10], "conections": [1]}, "memory.conections: unknown field; did you mean connections?"),
        ({"connections": [10], "rps": float("nan")}, "memory.rps: Input should be a finite number"),
        ({"connections": [True]}, "memory.connections[0]: expected a number, got true"),
        ({"connections": [10], "cpu": "5m"}, "memory.cpu: 5m is below 10m"),
    ],
)
def test_bad_memory_fields_are_refused_naming_the_field(memory, message):
    with pytest.raises(ScenarioError) as refused:
        scenario(memory)
    assert message in str(refused.value), str(refused.value)


def test_the_memory_model_runs_on_kubernetes_and_the_overload_settings_are_local_only_so_far():
    assert scenario({"routes": [0, 100], "route_probes": 5}, platform="kubernetes").memory.route_probes == 5
    with pytest.raises(ScenarioError, match=r"memory\.route_probes: .*less than or equal to 200"):
        scenario({"routes": [10], "route_probes": 201}, platform="kubernetes")
    envoy = {**BASE["envoy"], "overload": {"max_connections": 9}}
    with pytest.raises(ScenarioError, match=r"envoy\.overload: applies to the local platform only"):
        parse_scenario({**BASE, "platform": "kubernetes", "envoy": envoy})


def test_overload_takes_a_connection_cap_a_heap_limit_or_both():
    envoy = {**BASE["envoy"], "overload": {"max_connections": 4000, "max_heap": "200Mi"}}
    overload = parse_scenario({**BASE, "envoy": envoy}).envoy.overload
    assert overload is not None and (overload.max_connections, overload.max_heap_bytes) == (4000, 200 * 2**20)
    for bad, message in (({}, "set max_connections, max_heap or both"), ({"max_connections": 0}, "greater than or")):
        with pytest.raises(ScenarioError, match=message):
            parse_scenario({**BASE, "envoy": {**BASE["envoy"], "overload": bad}})


def test_connections_and_routes_overrides_create_or_replace_the_memory_lists():
    s = scenario(overrides=Overrides(connections="0,5000,10000", routes="0..1000:500"))
    assert s.memory is not None
    assert (s.memory.connections, s.memory.routes) == ((0, 5000, 10000), (0, 500, 1000))
    kept = scenario({"routes": [0, 100], "rps": 10}, Overrides(connections="1000"))
    assert kept.memory is not None and (kept.memory.connections, kept.memory.routes, kept.memory.rps) == (
        (1000,),
        (0, 100),
        10,
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (Overrides(connections="abc"), "CONNECTIONS='abc' is not a number list"),
        (Overrides(connections="-5"), "CONNECTIONS='-5' must be whole numbers from 0"),
        (Overrides(routes="1.5"), "ROUTES='1.5' must be whole numbers from 0"),
        (Overrides(routes="0..100000"), f"ROUTES='0..100000' has more than {MAX_MEMORY_POINTS} values"),
    ],
)
def test_bad_override_values_are_refused_naming_the_variable(overrides, message):
    with pytest.raises(UsageError, match=message):
        scenario(overrides=overrides)


def test_an_out_of_bounds_override_names_the_field_and_the_variable():
    with pytest.raises(ScenarioError, match=r"memory.connections\[0\] \(CONNECTIONS\): Input should be less than"):
        scenario(overrides=Overrides(connections="1000000"))
