from pathlib import Path

import pytest
import yaml

from runner.errors import ScenarioError, UsageError
from runner.memory_sweep import plan_memory
from runner.paths import SCENARIO_DIR
from runner.plan import plan_sweep
from runner.scenario import Overrides, load_scenario, parse_scenario

MINIMAL = {"name": "t", "envoy": {"cpu": [0.15, 0.3]}}


def test_every_shipped_scenario_validates_and_plans():
    names = sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))
    assert "local" in names
    for name in names:
        scenario = load_scenario(name)
        memory_points = plan_memory(scenario.memory) if scenario.memory else ()
        assert len(plan_sweep(scenario)) + len(memory_points) >= 1, name


def test_defaults_fill_in_and_units_are_converted():
    scenario = parse_scenario({"name": "t", "envoy": {"cpu": ["150m", 1], "memory": "1Gi"}})
    assert scenario.envoy.cpu_cores == (0.15, 1.0)
    assert scenario.envoy.memory_bytes == (2**30,)
    assert scenario.threshold == 0.90
    assert scenario.load.host_header == "external.nginx"
    assert scenario.load.locustfile.is_absolute() and scenario.load.locustfile.is_file()


def test_unknown_key_is_rejected_with_its_path_and_the_closest_allowed_key():
    with pytest.raises(ScenarioError, match=r"load\.stepseconds: unknown field; did you mean step_seconds\?$"):
        parse_scenario({**MINIMAL, "load": {"stepseconds": 5}})
    with pytest.raises(ScenarioError, match=r"load\.zzz: unknown field \(allowed here: .*step_seconds.*workers\)$"):
        parse_scenario({**MINIMAL, "load": {"zzz": 5}})


def test_a_typo_is_named_before_the_problems_it_causes():
    with pytest.raises(ScenarioError) as error:
        parse_scenario({"name": "t", "envoy": {"cpus": [0.5]}, "load": {"workers": 0}})
    assert str(error.value) == (
        "scenario: envoy.cpus: unknown field; did you mean cpu? "
        "(also envoy.cpu: field required; load.workers: input should be greater than or equal to 1)"
    )


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
        (Overrides(workers="1.5"), "WORKERS='1.5' must be a whole number"),
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


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("envoy", "cpu", [600]),
        ("envoy", "cpu", [0.0001]),
        ("envoy", "cpu", ["0.1234"]),
        ("envoy", "cpu", [0.1, "100m"]),
        ("envoy", "cpu", [[0.1]]),
        ("envoy", "memory", "5Ti"),
        ("envoy", "concurrency", 0),
        ("envoy", "concurrency", 10**6),
        ("backend", "replicas", [70000]),
        ("backend", "worker_processes", 1000),
        ("load", "workers", 10**9),
        ("load", "users", [10**9]),
        ("load", "users", list(range(1, 200))),
        ("load", "rps", [float("inf")]),
        ("load", "start_rps", 1e300),
        ("load", "max_rps_per_user", 1e-300),
        ("load", "spawn_rate", 1e-300),
        ("load", "step_seconds", float("inf")),
        ("load", "step_seconds", 7200),
        ("load", "warmup_seconds", float("nan")),
        ("load", "settle_seconds", 1e9),
        ("load", "max_steps", 1e9),
        ("load", "max_seconds_per_config", float("inf")),
        ("load", "latency_slo_ms", 1e12),
        ("load", "path", "http://example.com/"),
        ("load", "path", "//example.com/"),
        ("load", "path", "/a\r\nX-Injected: 1"),
        ("load", "path", "relative"),
        ("load", "host_header", "a\r\nX-Injected: 1"),
        ("load", "host_header", "example.com:99999"),
        ("load", "host_header", "../etc"),
        ("load", "accept_encoding", "gzip\r\nX: 1"),
        ("load", "user_class", "os.system"),
        ("baseline", "users", 10**9),
        ("prometheus", "scrape_interval_seconds", float("inf")),
        ("prometheus", "retry_seconds", 0),
        ("prometheus", "retry_seconds", 1e9),
        ("prometheus", "url", "file:///etc/passwd"),
        ("kubernetes", "rollout_timeout_seconds", float("inf")),
        ("kubernetes", "namespace", 'gateway"loadtest'),
        ("kubernetes", "namespace", "../kube-system"),
        ("kubernetes", "gateway_url", "http://envoy\nX"),
        ("kubernetes", "locust_image", "locust; rm -rf /"),
    ],
)
def test_out_of_bounds_and_unsafe_values_are_refused_naming_the_field(section, field, value):
    raw = {"name": "t", "envoy": {"cpu": [0.5]}, section: {}}
    raw[section] = {**raw[section], field: value}
    with pytest.raises(ScenarioError) as error:
        parse_scenario(raw)
    line = error.value.one_line()
    assert f"{section}.{field}" in line and "\n" not in line and "\r" not in line, line


@pytest.mark.parametrize(
    ("workload", "value"),
    [("envoy", {"namespace": "Project_Contour"}), ("backend", {"name": "nginx/../x"}), ("envoy", {"container": ""})],
)
def test_kubernetes_names_are_dns_1123(workload, value):
    raw = {"name": "t", "envoy": {"cpu": [0.5]}, workload: {}}
    default = {"namespace": "ns", "name": "n", "container": "c"}
    raw[workload] = {**raw[workload], "workload": {**default, **value}}
    with pytest.raises(ScenarioError, match=rf"{workload}\.workload\.{next(iter(value))}: not a DNS-1123"):
        parse_scenario(raw)


def test_host_headers_and_paths_that_stay_on_the_gateway_are_accepted():
    load = {"host_header": "external.nginx:8080", "path": "/api/v1/items?x=1&y=%20"}
    scenario = parse_scenario({**MINIMAL, "load": load})
    assert (scenario.load.host_header, scenario.load.path) == (load["host_header"], load["path"])


def test_the_plan_is_bounded_before_it_is_built():
    raw = {"name": "t", "envoy": {"cpu": [f"{m}m" for m in range(10, 510)], "memory": ["256Mi", "512Mi", "1Gi"]}}
    plan = r"500 envoy\.cpu x 3 envoy\.memory make 1,500 configurations; at most 1,000"
    with pytest.raises(ScenarioError, match=plan):
        parse_scenario(raw)
    with pytest.raises(UsageError, match=r"ENVOY_CPUS='1\.\.2000000' has more than 1000 values"):
        parse_scenario(MINIMAL, Overrides(envoy_cpus="1..2000000"))


def test_the_local_platform_refuses_a_cpu_limit_below_its_cgroup_floor():
    with pytest.raises(ScenarioError, match=r"envoy\.cpu: 5m is below 10m"):
        parse_scenario({"name": "t", "envoy": {"cpu": ["5m"]}})
    assert parse_scenario({"name": "t", "platform": "kubernetes", "envoy": {"cpu": ["5m"]}}).envoy.cpu_cores == (0.005,)


@pytest.mark.parametrize("section", ["envoy", "load"])
def test_a_null_or_wrong_section_with_an_override_is_one_line(section):
    raw = {"name": "t", "envoy": {"cpu": [0.5]}, section: None}
    overrides = Overrides(envoy_cpus="0.5", workers="2")
    assert parse_scenario({**raw, "envoy": None}, overrides).envoy.cpu_cores == (0.5,)
    with pytest.raises(ScenarioError, match=rf"{section}: expected a mapping of fields, got list"):
        parse_scenario({**raw, section: [1]}, overrides)


def test_an_override_is_named_with_the_field_it_set():
    with pytest.raises(ScenarioError, match=r"load\.workers \(WORKERS\): Input should be less than or equal to 256"):
        parse_scenario(MINIMAL, Overrides(workers="1000"))


def test_a_locust_workers_cpu_limit_is_the_local_platforms_and_kubernetes_names_its_own():
    load = {"worker_cpu": "250m"}
    assert parse_scenario({"name": "t", "envoy": {"cpu": [1]}, "load": load}).load.worker_cpu_cores == 0.25
    with pytest.raises(ScenarioError, match=r"load\.worker_cpu: 5m is below 10m"):
        parse_scenario({"name": "t", "envoy": {"cpu": [1]}, "load": {"worker_cpu": "5m"}})
    with pytest.raises(ScenarioError, match=r"load\.worker_cpu: applies to the local platform only; .*kubernetes"):
        parse_scenario({"name": "t", "platform": "kubernetes", "envoy": {"cpu": [1]}, "load": load})
