from pathlib import Path

import pytest
import yaml

from runner.errors import ScenarioError, UsageError
from runner.plan import plan_sweep
from runner.scenario import SCENARIO_DIR, Overrides, load_scenario, parse_scenario

MINIMAL = {"name": "t", "envoy": {"cpu": [0.15, 0.3]}}


def test_every_shipped_scenario_validates_and_plans():
    names = sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
    assert "local" in names
    for name in names:
        scenario = load_scenario(name)
        assert len(plan_sweep(scenario)) >= 1, name


def test_defaults_fill_in_and_units_are_converted():
    scenario = parse_scenario({"name": "t", "envoy": {"cpu": ["150m", 1], "memory": "1Gi"}})
    assert scenario.envoy.cpu_cores == (0.15, 1.0)
    assert scenario.envoy.memory_bytes == (2**30,)
    assert scenario.threshold == 0.90
    assert scenario.load.host_header == "external.nginx"
    assert scenario.load.locustfile.is_absolute() and scenario.load.locustfile.is_file()


def test_unknown_key_is_rejected_with_its_path_and_the_allowed_keys():
    with pytest.raises(ScenarioError, match=r"load\.stepseconds: unknown field \(allowed here: .*step_seconds"):
        parse_scenario({**MINIMAL, "load": {"stepseconds": 5}})


def test_bad_value_is_rejected_with_its_path():
    with pytest.raises(ScenarioError, match=r"threshold: .*less than or equal to 1"):
        parse_scenario({**MINIMAL, "threshold": 1.5})
    with pytest.raises(ScenarioError, match=r"envoy\.cpu"):
        parse_scenario({"name": "t", "envoy": {"cpu": ["lots"]}})


def test_missing_locustfile_is_one_clear_error():
    with pytest.raises(ScenarioError, match=r"load\.locustfile 'missing\.py' does not exist"):
        parse_scenario({**MINIMAL, "load": {"locustfile": "missing.py"}})


def test_malformed_yaml_names_the_line(tmp_path: Path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nenvoy: [\n")
    with pytest.raises(ScenarioError, match=r"broken\.yaml: line \d+ is not valid YAML"):
        load_scenario(str(path))


def test_overrides_replace_scenario_values():
    overrides = Overrides(envoy_cpus="1..3", nginx_replicas="1,3", workers="4", users="4,8", step_seconds="20")
    scenario = parse_scenario(MINIMAL, overrides)
    assert scenario.envoy.cpu_cores == (1.0, 2.0, 3.0)
    assert scenario.backend.replicas == (1, 3)
    assert scenario.load.workers == 4
    assert scenario.load.users == (4, 8) and scenario.load.mode == "users"
    assert scenario.load.step_s == 20
    assert len(plan_sweep(scenario)) == 6


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (Overrides(envoy_cpus="abc"), "ENVOY_CPUS='abc' is not a number list"),
        (Overrides(workers="1.5"), "WORKERS='1.5' must be whole numbers"),
        (Overrides(workers="1,2"), "WORKERS='1,2' must be a single number"),
        (Overrides(envoy_cpus="-1"), "ENVOY_CPUS"),
    ],
)
def test_bad_overrides_are_usage_errors(overrides, message):
    with pytest.raises(UsageError, match=message):
        parse_scenario(MINIMAL, overrides)


def test_unknown_scenario_name_lists_the_known_ones():
    with pytest.raises(ScenarioError) as error:
        load_scenario("nope")
    assert "scenario 'nope' not found: use a file path or one of:" in error.value.one_line()
    assert "local" in error.value.one_line()


def test_resolved_scenario_dumps_to_yaml_that_loads_back(tmp_path: Path):
    scenario = parse_scenario(MINIMAL, Overrides(envoy_cpus="0.2"))
    path = tmp_path / "resolved.yaml"
    path.write_text(yaml.safe_dump(scenario.dump()))
    assert load_scenario(str(path)) == scenario
