"""Hostile input, generated: scenario YAML and command-line values through the real CLI, in this process.

Whatever comes in, the CLI either accepts it or refuses it with exit code 2 and ONE line on stderr that
names the field (or the variable) at fault; never a traceback, never a run directory for refused input.
The CLI runs in-process (`runner.cli.main(argv)`) with a temporary results folder and cache; the point
where a sweep would create its platform, and where `testbed up` would start one, raise `Accepted` instead,
so nothing is started whatever the input.
"""

from __future__ import annotations

import math
import signal
import string
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import runner.platforms
from runner import cli
from runner import scenario as schema
from runner.commands import report as report_commands
from runner.commands import sweep as sweep_commands
from runner.commands import testbed as testbed_commands
from runner.paths import SCENARIO_DIR
from runner.plan import plan_sweep
from runner.platforms.local.platform import LocalPlatform
from runner.profiles import MAX_BODY_BYTES, MAX_PROFILES, MIN_BODY_BYTES
from runner.quantities import parse_cpu, parse_memory, parse_number_list
from support.examples import FUZZ_SCALE, examples

_FUZZ = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


def fuzz(count: int) -> settings:
    """Hypothesis settings for `count` examples: a fixed set in the gate, `count` x GATEWAY_SIZER_FUZZ fresh ones
    under `make fuzz` (tests/conftest.py); each test's @example()s are inputs that once failed."""
    return settings(_FUZZ, max_examples=examples(count))


def test_the_gate_draws_the_same_examples_on_every_run():
    assert settings.default.derandomize == (FUZZ_SCALE == 1) and settings.default.database is None


RUN = Path(__file__).resolve().parent.parent / "report" / "data" / "local-100m-200m-300m"
MEMORY_RUN = Path(__file__).resolve().parent.parent / "report" / "data" / "local-memory"  # a measured memory model


class Accepted(Exception):
    """The input passed validation: the command got as far as starting something."""


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    accepted: bool
    results: Path

    def check(self, *names: str, ignore: str = "") -> None:
        """Accepted, or refused with exit 2 and one line naming one of `names` (not counting `ignore`, the file's
        path); no run directory if refused."""
        assert "Traceback" not in self.err, self.err
        if currently_in_test_context():  # --hypothesis-show-statistics counts them
            event("accepted" if self.accepted or self.code == 0 else "refused")
        if self.accepted or self.code == 0:
            return
        lines = self.err.splitlines()
        assert self.code == 2, (self.code, self.err)
        assert len(lines) == 1, self.err
        assert lines[0].startswith("gateway-sizer"), lines[0]
        if names:
            line = lines[0].replace(ignore, "") if ignore else lines[0]
            assert any(name.lower() in line.lower() for name in names), (names, lines[0])
        left = list(self.results.iterdir()) if self.results.exists() else []
        assert not left, f"refused input left {left}"


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Iterator:
    """`run_cli(*argv)`: the CLI in this process; `--results` is a fresh folder for `sweep`."""

    def accepted(*args: object, **kwargs: object) -> None:
        raise Accepted

    monkeypatch.setenv("GATEWAY_SIZER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sweep_commands, "RESULTS_ROOT", tmp_path / "default-results")  # never the project's
    monkeypatch.setattr(runner.platforms, "create_platform", accepted)
    monkeypatch.setattr(LocalPlatform, "for_hand_testbed", classmethod(accepted))
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}

    def run(*argv: str) -> Outcome:
        results = Path(tempfile.mkdtemp(dir=tmp_path, prefix="results-"))
        if argv[0] == "sweep" and not any(arg.startswith("--results") for arg in argv):
            argv = (*argv, "--results", str(results))
        capsys.readouterr()
        code, accepted = None, False
        try:
            code = cli.main(list(argv))
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 2
        except Accepted:
            accepted = True
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err, accepted, results)

    yield run
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def assert_bounded(argv: list[str]) -> None:
    """What the CLI accepted is within every bound and safe to send: checked on the validated scenario."""
    args = cli.build_parser().parse_args(argv)
    scenario = sweep_commands.load(args, sweep_commands.overrides_from(args))
    numbers: list[float] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            numbers.append(value)

    walk(scenario.dump())
    assert all(math.isfinite(n) and abs(n) <= schema.MAX_MEMORY_BYTES for n in numbers), numbers
    assert len(plan_sweep(scenario)) <= schema.MAX_CONFIGURATIONS
    floor = schema.MIN_LOCAL_CPU_CORES if scenario.platform == "local" else schema.MIN_CPU_CORES
    assert all(floor <= c <= schema.MAX_CPU_CORES for c in scenario.envoy.cpu_cores)
    assert all(schema.MIN_MEMORY_BYTES <= m <= schema.MAX_MEMORY_BYTES for m in scenario.envoy.memory_bytes)
    load = scenario.load
    assert load.workers <= schema.MAX_WORKERS and max(load.users) <= schema.MAX_USERS
    assert max(scenario.backend.replicas) <= schema.MAX_REPLICAS and load.max_steps <= schema.MAX_STEPS
    assert load.step_s <= schema.MAX_STEP_SECONDS and max(load.warmup_s, load.settle_s) <= schema.MAX_WAIT_SECONDS
    assert scenario.prometheus.scrape_interval_s <= schema.MAX_SCRAPE_INTERVAL_SECONDS
    # The request stays on the gateway: a path, never a URL; a Host header that cannot carry another header.
    assert load.path.startswith("/") and not load.path.startswith("//") and load.path.isascii()
    assert all(c.isprintable() and not c.isspace() for c in load.path), load.path
    assert set(load.host_header) <= set(string.ascii_letters + string.digits + ".-:"), load.host_header
    assert all(c.isprintable() for c in load.accept_encoding + scenario.name)
    assert 1 <= len(scenario.profiles) <= MAX_PROFILES
    assert all(MIN_BODY_BYTES <= (p.body_bytes or 1) <= MAX_BODY_BYTES for p in scenario.profiles)
    assert all(p.path(load.path).startswith("/") for p in scenario.profiles)
    for workload in (scenario.envoy.workload, scenario.backend.workload, scenario.contour.workload):
        assert set(workload.namespace + workload.name) <= set(string.ascii_lowercase + string.digits + ".-")
    memory = scenario.memory
    if memory is not None:  # the memory model: bounded points, each bounded in connections, routes and time
        assert 1 <= len(memory.connections) + len(memory.routes) <= 2 * schema.MAX_MEMORY_POINTS
        assert all(0 <= c <= schema.MAX_HELD_CONNECTIONS for c in memory.connections)
        assert all(0 <= r <= schema.MAX_EXTRA_ROUTES for r in memory.routes)
        assert schema.MIN_REFRESH_SECONDS <= memory.refresh_s <= schema.MAX_REFRESH_SECONDS
        assert schema.MIN_HOLD_SECONDS <= memory.hold_s <= schema.MAX_STEP_SECONDS
        assert memory.settle_s <= schema.MAX_WAIT_SECONDS and 1 <= memory.open_rate <= schema.MAX_OPEN_RATE
        assert 0 <= memory.route_probes <= schema.MAX_ROUTE_PROBES
    overload = scenario.envoy.overload
    if overload is not None:
        assert overload.max_connections is not None or overload.max_heap_bytes is not None
        assert 1 <= (overload.max_connections or 1) <= schema.MAX_OVERLOAD_CONNECTIONS


# Values: numbers in every spelling, ranges, lists, and strings made to break things.
NASTY = [
    "",
    " ",
    "-1",
    "0",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "1e999",
    "1e-999",
    "1e308",
    "9" * 400,
    "0x10",
    "1_000",
    "\uff11\uff12",  # fullwidth 12
    "²",
    "1..",
    "..1",
    "1..2000000",
    "1..1e300",
    "0..1:1e-300",
    "1..6:0",
    "1,,2",
    "0.1'; touch /tmp/pwned; '",
    '0.1"; touch /tmp/pwned; "',
    "$(touch /tmp/pwned)",
    "`id`",
    "a\r\nX-Injected: 1",
    "a\nb",
    "\x00",
    "a\x00b",
    "../../etc/passwd",
    "/etc/passwd",
    "http://example.com/",
    "//example.com/",
    "ü",
    "\u2028",
    "\ufeff",
    "-h",
    "--",
    "--help",
    "=",
    "500m",
    "1Gi",
    "1e3Gi",
    "auto",
    "true",
    "null",
    "~",
    "[0.1]",
    "{a: 1}",
    "&a [*a]",
]
PROFILE_NAMES = ["plain", "tls", "tls-new-connection", "new-connection", "body-16k", "tls-ecdsa-body-1k", "body-0",
                 "body-17m", "body-16384", "tls-", "tls-tls", "plain-tls", "x" * 41]  # fmt: skip
NASTY_CHARS = string.printable + "\x00\x7f\x85\u2028\u202e\ufeff'\"\\üß中🙂"


def _number_text(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(value)


numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=0, max_value=3000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=1000),
    st.decimals(min_value=0, max_value=10, places=4, allow_nan=False).map(lambda d: float(d)),
).map(_number_text)
ranges = st.builds(
    lambda low, high, step: f"{low}..{high}" + (f":{step}" if step is not None else ""),
    numbers,
    numbers,
    st.none() | numbers,
)
plausible_numbers = st.one_of(
    st.integers(min_value=1, max_value=600),
    st.decimals(min_value="0.001", max_value="600", places=3).map(lambda d: f"{d.normalize():f}"),
    st.sampled_from(["1000", "1001", "3600", "3601", "256", "257", "512", "513", "100000", "100001", "0.01", "0.009"]),
).map(str)
values = st.one_of(
    plausible_numbers,
    st.lists(plausible_numbers, min_size=1, max_size=4).map(",".join),
    st.builds(lambda low, n: f"{low}..{low + n}", st.integers(1, 600), st.integers(0, 1200)),
    st.sampled_from(["local", "kubernetes", "lean", "fasthttp", "256Mi", "1Gi,2Gi", "4Ti", "5Ti"]),
    st.lists(st.sampled_from(PROFILE_NAMES), min_size=1, max_size=4).map(",".join),
    st.sampled_from(NASTY),
    numbers,
    ranges,
    st.lists(numbers | ranges, min_size=1, max_size=5).map(",".join),
    st.builds(lambda n, unit: f"{n}{unit}", numbers, st.sampled_from(["m", "Mi", "Gi", "Ti", "k", "x", " ", "mm"])),
    st.text(alphabet=NASTY_CHARS, max_size=30),
)

# Each override: the flag, and the names a refusal must mention (the Make variable or the field).
OPTIONS = {
    "--envoy-cpus": ("ENVOY_CPUS", "envoy.cpu"),
    "--envoy-memory": ("ENVOY_MEMORY", "envoy.memory"),
    "--nginx-replicas": ("NGINX_REPLICAS", "backend.replicas"),
    "--workers": ("WORKERS", "load.workers"),
    "--users": ("USERS", "load.users"),
    "--step-seconds": ("STEP_SECONDS", "load.step_seconds"),
    "--platform": ("PLATFORM", "platform"),
    "--client": ("CLIENT", "load.client"),
    "--arrivals": ("ARRIVALS", "load.arrivals"),
    "--profiles": ("PROFILES", "profiles"),
    "--connections": ("CONNECTIONS", "memory.connections", "memory"),
    "--routes": ("ROUTES", "memory.routes", "memory"),
    "--scenario": ("scenario",),
}
scenario_names = st.one_of(
    st.sampled_from(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))),
    st.sampled_from(["scenarios/local.yaml", "../scenarios/local", "/etc/passwd", "/etc", "/proc/self/pagemap"]),
    st.sampled_from(NASTY),
    st.text(alphabet=NASTY_CHARS, max_size=20),
    st.text(min_size=300, max_size=5000),
)


@fuzz(400)
@given(
    command=st.sampled_from(["sweep", "sweep", "plan"]),
    choices=st.lists(
        st.tuples(st.sampled_from(sorted(OPTIONS)), values, scenario_names),
        min_size=1,
        max_size=3,
        unique_by=lambda c: c[0],
    ),
)
def test_command_line_values_are_accepted_or_refused_in_one_line(run_cli, command, choices):
    argv = [command]
    for flag, value, scenario in choices:
        argv.append(f"{flag}={scenario if flag == '--scenario' else value}")
    names = tuple(name for flag, _, _ in choices for name in OPTIONS[flag])
    outcome = run_cli(*argv)
    outcome.check(*names)
    if outcome.accepted or outcome.code == 0:
        assert_bounded(["plan", *argv[1:]])


@fuzz(100)
@given(value=values)
def test_testbed_envoy_cpu_is_accepted_or_refused_in_one_line(run_cli, value):
    outcome = run_cli("testbed", "up", f"--envoy-cpu={value}")
    outcome.check("--envoy-cpu")
    if outcome.accepted and value:  # an empty --envoy-cpu= is the scenario's first limit
        assert 0.01 <= parse_cpu(value) <= testbed_commands.MAX_TESTBED_CPU


@fuzz(200)
@given(
    command=st.sampled_from(
        [
            "recommend-target",
            "recommend-headroom",
            "recommend-cores",
            "recommend-output",
            "recommend-profile",
            "compare",
            "recommend-connections",
            "recommend-routes",
        ]
    ),
    value=values,
)
# Found by a random run (2026-11-25): `--flag=--` reached the command as an empty list (a TypeError traceback).
@example(command="recommend-target", value="--")
@example(command="recommend-output", value="--")
@example(command="recommend-profile", value="--")
def test_report_options_are_accepted_or_refused_in_one_line(run_cli, command, value):
    if command in ("recommend-connections", "recommend-routes"):
        name = "--" + command.removeprefix("recommend-")
        outcome = run_cli("recommend", f"{name}={value}", "--run", str(MEMORY_RUN))
        outcome.check(name, "recommend needs")  # an empty value leaves recommend with nothing to size
        if outcome.code == 0:
            assert 0 <= float(value) <= 1e8 and float(value) == int(float(value))
            assert "overload manager" in outcome.out
        return
    if command == "compare":
        outcome, name = run_cli("compare", str(RUN), str(RUN), f"--threshold-pct={value}"), "--threshold-pct"
    elif command == "recommend-target":
        outcome, name = run_cli("recommend", f"--target-rps={value}", "--run", str(RUN)), "--target-rps"
    elif command == "recommend-headroom":
        outcome, name = (
            run_cli("recommend", "--target-rps=5000", f"--headroom={value}", "--run", str(RUN)),
            "--headroom",
        )
    elif command == "recommend-cores":
        outcome, name = (
            run_cli("recommend", "--target-rps=5000", f"--cores-per-replica={value}", "--run", str(RUN)),
            "--cores-per-replica",
        )
    elif command == "recommend-profile":
        outcome, name = run_cli("recommend", "--target-rps=5000", f"--profile={value}", "--run", str(RUN)), "profile"
    else:
        outcome, name = run_cli("recommend", "--target-rps=5000", f"--output={value}", "--run", str(RUN)), "--output"
    outcome.check(name)
    if outcome.code == 0 and command == "recommend-output":
        assert value in ("", "text", "yaml")
    elif outcome.code == 0 and command == "recommend-profile":
        assert value in ("", "plain")  # the run measured plain traffic only
    elif outcome.code == 0 and value:  # an empty --cores-per-replica= chooses a measured limit
        assert math.isfinite(float(value))
        if command == "recommend-cores":
            assert report_commands.MIN_CORES_PER_REPLICA <= float(value) <= report_commands.MAX_CORES_PER_REPLICA


# Run names and results folders: paths the system refuses (too long, a file as a folder, NUL) are one line too.
run_names = st.one_of(
    st.sampled_from(NASTY),
    st.text(alphabet=NASTY_CHARS, max_size=30),
    st.text(alphabet="a/.", min_size=250, max_size=6000),
)


@fuzz(100)
@given(command=st.sampled_from(["recommend", "compare", "resume"]), name=run_names)
# Found by hand (2026-11-25): a name the system refuses (ENAMETOOLONG, NUL) was a traceback from Path.is_file().
@example(command="recommend", name="a" * 5000)
@example(command="compare", name="a/" * 3000)
@example(command="resume", name="a\x00b")
def test_run_names_are_found_or_refused_in_one_line(run_cli, command, name):
    if command == "recommend":
        outcome = run_cli("recommend", "--target-rps=5000", f"--run={name}")
    elif command == "compare":
        outcome = run_cli("compare", name, str(RUN))
    else:
        outcome = run_cli("sweep", f"--resume={name}")
    outcome.check("run")


# Relative folders only (made under the test's folder), no "." or ".." part, never empty (that is results/).
folder_parts = st.text(alphabet=NASTY_CHARS.replace("/", ""), min_size=1, max_size=12).filter(lambda p: p not in ".")
relative_folders = st.one_of(
    st.lists(folder_parts, min_size=1, max_size=4).map("/".join),
    st.integers(256, 6000).map(lambda n: "a" * n),  # past NAME_MAX (255)
    st.integers(2049, 3000).map(lambda n: "a/" * n),  # past PATH_MAX (4096), made of short parts
)


@fuzz(30)  # each accepted folder gets a run directory written with fsync: slow on a busy disk
@given(folder=relative_folders)
# Found by hand (2026-11-25): a results folder that cannot be made was a traceback from mkdir().
@example(folder="/dev/null/x")
@example(folder="/proc/1/results")
@example(folder="/etc/passwd")
@example(folder="a" * 5000)
@example(folder="\x00")  # found by this test on its first run
def test_a_results_folder_is_made_or_refused_in_one_line(run_cli, tmp_path, monkeypatch, folder):
    monkeypatch.chdir(tmp_path)  # a relative folder is made here, never in the project
    outcome = run_cli("sweep", "--envoy-cpus=0.25", f"--results={folder}")
    outcome.check("run folder")


# Scenario files: a valid scenario with wrong types, misspelt keys, nested garbage, nulls, huge numbers, nan/inf
# and nasty strings put in.
BASE: dict[str, Any] = {
    "name": "fuzz",
    "platform": "local",
    "envoy": {"cpu": [0.25, 0.5], "memory": "256Mi", "concurrency": "auto"},
    "backend": {"replicas": 1},
    "load": {
        "client": "lean",
        "host_header": "external.nginx",
        "path": "/",
        "workers": 1,
        "mode": "rps",
        "step_seconds": 10,
        "warmup_seconds": 4,
        "settle_seconds": 2,
        "max_steps": 12,
        "spawn_rate": 200,
    },
    "threshold": 0.9,
    "prometheus": {"scrape_interval_seconds": 1},
}
SECTIONS = {
    "envoy": ["cpu", "memory", "concurrency", "guaranteed_qos", "isolation", "workload", "overload"],
    "contour": ["resources", "workload"],
    "backend": ["replicas", "cpu", "memory", "worker_processes", "response_status", "workload"],
    "load": [
        "client",
        "locustfile",
        "user_class",
        "host_header",
        "path",
        "workers",
        "mode",
        "arrivals",
        "accept_encoding",
        "search",
        "users",
        "rps",
        "start_users",
        "start_rps",
        "start_rps_per_core",
        "max_rps_per_user",
        "spawn_rate",
        "step_seconds",
        "warmup_seconds",
        "settle_seconds",
        "max_steps",
        "max_seconds_per_config",
        "knee_interval",
        "capacity_resolution",
        "latency_slo_ms",
    ],
    "baseline": ["enabled", "users", "envoy_cpu"],
    "memory": [
        "connections",
        "routes",
        "rps",
        "hold_seconds",
        "settle_seconds",
        "refresh_seconds",
        "open_rate",
        "cpu",
        "memory",
        "only",
    ],
    "prometheus": ["url", "scrape_interval_seconds", "service", "retry_seconds"],
    "kubernetes": [
        "kubeconfig",
        "context",
        "namespace",
        "locust_image",
        "image_pull_policy",
        "worker_resources",
        "gateway_url",
        "rollout_timeout_seconds",
        "keep_locust",
    ],
}
TOP_LEVEL = ["name", "description", "platform", "threshold", "on_failure", "profiles", *SECTIONS]
NESTED = {
    "workload": ["namespace", "name", "container", "kind"],
    "service": ["namespace", "name", "port"],
    "overload": ["max_connections", "max_heap"],
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 2**31, 2**63, 10**30, 10**400]),
    st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 5e-324, -0.0]),
    st.sampled_from(NASTY),
    st.text(alphabet=NASTY_CHARS, max_size=40),
)
# Values of about the right type, around the bounds, so that some broken scenarios are accepted and checked.
plausible = st.one_of(
    st.integers(min_value=-2, max_value=200_000),
    st.floats(min_value=0, max_value=100_000, allow_nan=False),
    st.sampled_from([1, 2, 64, 65, 100, 101, 256, 257, 512, 513, 1000, 1001, 3600, 3601, 86400, 86401, 100_000]),
    st.sampled_from([0.001, 0.0015, 0.009, 0.01, 0.5, 1.5, 512.0, 512.001, "500m", "0.5m", "1Gi", "4Ti", "5Ti", "1"]),
    st.sampled_from(["auto", "off", "ramp", "fixed", "users", "rps", "fasthttp", "kubernetes", "poisson", "spread"]),
    st.sampled_from(["/", "/api/v1?x=1", "/a b", "//evil/", "/\u00fc", "example.com", "a.b:8080", "a.b:0", "-a.b"]),
    st.sampled_from(["ns", "ns-1", "Ns", "ns_1", "a" * 63, "a" * 64, "a.b", "http://x:9090", "ftp://x", "x"]),
    st.lists(st.integers(min_value=0, max_value=300), max_size=5),
    st.lists(st.sampled_from([0.25, 0.5, "250m", 1, 2]), max_size=4),
    st.lists(
        st.sampled_from([*PROFILE_NAMES, {"name": "big", "body": "256Ki"}, {"name": "t", "tls": True}]), max_size=4
    ),
)
garbage = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8) | st.integers(), children, max_size=3)
    ),
    max_leaves=12,
)


def _misspell(key: str, how: int) -> str:
    """A near miss of `key`: a letter dropped, doubled, swapped, an s added, upper case, '-' for '_'."""
    variants = [key[:-1], key + "s", key[0] + key, key[1] + key[0] + key[2:], key.upper(), key.replace("_", "-")]
    variant = variants[how % len(variants)]
    return variant if variant != key else key + "x"


@st.composite
def mutations(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    """The base scenario with 1-3 things broken, and the keys a refusal may name."""
    data: dict[str, Any] = yaml.safe_load(yaml.safe_dump(BASE))
    named: list[str] = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        kind = draw(st.sampled_from(["value"] * 6 + ["typo", "section", "nested", "extra"]))
        section = draw(st.sampled_from(sorted(SECTIONS)))
        key = draw(st.sampled_from(SECTIONS[section]))
        if kind == "value":
            target = data.setdefault(section, {})
            if not isinstance(target, dict):
                continue
            target[key] = draw(plausible | garbage)
            named += [section, key]
        elif kind == "typo":
            wrong = _misspell(key, draw(st.integers(min_value=0, max_value=5)))
            target = data.setdefault(section, {})
            if not isinstance(target, dict):
                continue
            target[wrong] = target.pop(key, draw(garbage))
            named += [section, wrong, key]
        elif kind == "section":
            top = draw(st.sampled_from(TOP_LEVEL))
            data[top] = draw(garbage)
            named.append(top)
        elif kind == "nested" and section in ("envoy", "backend", "contour", "prometheus"):
            inner = "service" if section == "prometheus" else "workload"
            if section == "envoy":
                inner = draw(st.sampled_from(["workload", "overload"]))
            field = draw(st.sampled_from(NESTED[inner]))
            target = data.setdefault(section, {})
            if not isinstance(target, dict):
                continue
            target[inner] = {**dict.fromkeys(NESTED[inner], "x"), field: draw(garbage)}
            named += [section, inner, field]
        else:
            where = data if draw(st.booleans()) else data.setdefault(section, {})
            if not isinstance(where, dict):
                continue
            extra = draw(st.text(alphabet=NASTY_CHARS, min_size=1, max_size=12))
            where[extra] = draw(garbage)
            named += ["unknown field", extra, section]
    return data, named


@fuzz(500)
@given(mutation=mutations(), command=st.sampled_from(["sweep", "plan"]))
def test_broken_scenarios_are_accepted_or_refused_in_one_line(run_cli, tmp_path, mutation, command):
    data, named = mutation
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    outcome = run_cli(command, "--scenario", str(path))
    outcome.check(*named, "configurations", ignore=str(path))
    if outcome.accepted or outcome.code == 0:
        assert_bounded(["plan", "--scenario", str(path)])


@fuzz(150)
@given(text=st.text(alphabet=NASTY_CHARS + ":-[]{}&*!|>%@` \n\t", max_size=200))
def test_any_file_content_is_accepted_or_refused_in_one_line(run_cli, tmp_path, text):
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "any.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    run_cli("sweep", "--scenario", str(path)).check("scenario", "envoy", "unknown field", ignore=str(path))


# The parsers underneath, straight: finite values or a ValueError, nothing else.
@fuzz(300)
@given(value=garbage | values)
@example(value=10**400)  # a whole number of bytes is exact at any size (the field bounds it): no float() of it
def test_quantity_parsers_return_finite_values_or_raise_value_error(value):
    for parse in (parse_cpu, parse_memory):
        try:
            parsed = parse(value)
        except ValueError:
            continue
        assert parsed > 0 and (isinstance(parsed, int) or math.isfinite(parsed)), parsed
    if isinstance(value, str):
        try:
            numbers = parse_number_list(value, what="X", max_count=1000)
        except ValueError as error:
            assert str(error).startswith("X"), error
        else:
            assert 1 <= len(numbers) <= 1000 and all(math.isfinite(n) for n in numbers)


# Inputs that once gave a traceback, a run directory or an unbounded plan (reliability audit, section 5).
KNOWN_FILES = [
    ("envoy: {cpu: [[0.1]]}\n", "envoy.cpu: not a CPU quantity: [0.1]"),
    ("envoy: {cpu: [0.1], cpus: [0.2]}\n", "envoy.cpus: unknown field; did you mean cpu?"),
    ("envoy: {cpus: [0.2]}\n", "envoy.cpus: unknown field; did you mean cpu? (also envoy.cpu: field required)"),
    (f"name: {'x' * 300}\nenvoy: {{cpu: [0.5]}}\n", "name: 300 characters; at most 64"),
    (f"envoy: {{cpu: [0.5]}}\nload: {{workers: {'9' * 5000}}}\n", "cannot be loaded (Exceeds the limit"),
    ("[" * 2000 + "]" * 2000, "cannot be loaded (maximum recursion depth"),
    ("envoy: {cpu: [0.5]}\nload: {step_seconds: .inf}\n", "load.step_seconds: Input should be a finite number"),
    ("envoy: {cpu: [0.5]}\nload: {settle_seconds: .nan}\n", "load.settle_seconds: Input should be a finite number"),
    ("envoy: {cpu: [0.5]}\nload: {max_steps: 1.0e+9}\n", "load.max_steps: Input should be less than or equal to 100"),
    ("envoy: {cpu: [0.5]}\nload: {spawn_rate: 1e-300}\n", "load.spawn_rate: Input should be greater than or equal"),
    ("envoy: {cpu: [0.5]}\nprometheus: {scrape_interval_seconds: .inf}\n", "prometheus.scrape_interval_seconds"),
    ("envoy: {cpu: [0.5]}\nkubernetes: {rollout_timeout_seconds: .inf}\n", "kubernetes.rollout_timeout_seconds"),
    ('envoy: {cpu: [0.5]}\nload: {client: fasthttp, path: "http://127.0.0.2:9/"}\n', "load.path: not an absolute path"),
    ('envoy: {cpu: [0.5]}\nload: {host_header: "a\\r\\nX-Injected: 1"}\n', "load.host_header: not a host name"),
    ('envoy: {cpu: [0.5], workload: {namespace: "a\\"b", name: e, container: e}}\n', "envoy.workload.namespace"),
]


@pytest.mark.parametrize(("content", "expected"), KNOWN_FILES)
def test_known_hostile_scenarios_are_refused_in_one_line(run_cli, tmp_path, content, expected):
    path = tmp_path / "known.yaml"
    path.write_text(content)
    outcome = run_cli("sweep", "--scenario", str(path))
    outcome.check(expected)
    assert outcome.code == 2


def test_a_file_that_is_not_utf8_or_too_large_is_refused_in_one_line(run_cli, tmp_path):
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\nenvoy: {cpu: [0.5]}\n")
    run_cli("sweep", "--scenario", str(tmp_path / "latin1.yaml")).check("cannot be read (UnicodeDecodeError)")
    (tmp_path / "big.yaml").write_text("# " + "x" * 2**20)
    run_cli("sweep", "--scenario", str(tmp_path / "big.yaml")).check("larger than 1024 KiB")


def test_a_null_section_with_an_override_is_no_traceback(run_cli, tmp_path):
    path = tmp_path / "null.yaml"
    path.write_text("envoy:\n")
    outcome = run_cli("plan", "--scenario", str(path), "--envoy-cpus=0.5")
    assert outcome.code == 0, outcome.err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["sweep", "--envoy-cpus=nan"], "ENVOY_CPUS='nan' is not a number list"),
        (["sweep", "--envoy-cpus=1e999"], "ENVOY_CPUS='1e999' is not a number list"),
        (["sweep", "--envoy-cpus=0.0001"], "envoy.cpu (ENVOY_CPUS): 0.0001 is below 1m"),
        (["sweep", "--envoy-cpus=0.005"], "envoy.cpu: 5m is below 10m, the smallest CPU limit of the local platform"),
        (["plan", "--envoy-cpus=1..2000000"], "ENVOY_CPUS='1..2000000' has more than 1000 values"),
        (["plan", "--step-seconds=inf"], "STEP_SECONDS='inf' is not a number list"),
        (["plan", "--users=1000000000"], "load.users[0] (USERS): Input should be less than or equal to 100000"),
        (["plan", "--workers=1000000000"], "load.workers (WORKERS): Input should be less than or equal to 256"),
        (["plan", "--nginx-replicas=70000"], "backend.replicas[0] (NGINX_REPLICAS): Input should be less than"),
        (["plan", "--envoy-cpus"], "gateway-sizer plan: argument --envoy-cpus: expected one argument"),
        (["testbed", "up", "--envoy-cpu=abc"], "--envoy-cpu must be a CPU quantity, got 'abc'"),
        (["testbed", "up", "--envoy-cpu=nan"], "--envoy-cpu must be a CPU quantity, got 'nan'"),
        (["recommend", "--target-rps=1e300", "--run", str(RUN)], "--target-rps must be at most 1e+09"),
        (["recommend", "--target-rps=5000", "--cores-per-replica=1e3", "--run", str(RUN)], "must be at most 64"),
        (["recommend", "--target-rps=5000", "--cores-per-replica=0", "--run", str(RUN)], "must be at least 0.01"),
        (["recommend", "--target-rps=5000", "--output=json", "--run", str(RUN)], "--output must be text or yaml"),
        (["compare", str(RUN), str(RUN), "--threshold-pct=inf"], "--threshold-pct must be a finite number"),
        (["plan", "--connections=abc"], "CONNECTIONS='abc' is not a number list"),
        (["plan", "--connections=1e999"], "CONNECTIONS='1e999' is not a number list"),
        (["plan", "--routes=-1"], "ROUTES='-1' must be whole numbers from 0"),
        (["plan", "--connections=0,2.5"], "CONNECTIONS='0,2.5' must be whole numbers from 0"),
        (["plan", "--connections=30000"], "memory.connections[0] (CONNECTIONS): Input should be less than or equal"),
        (["plan", "--routes=0..1000000"], "ROUTES='0..1000000' has more than 20 values"),
        (
            ["plan", "--routes=0,20000", "--platform=kubernetes"],
            "memory.routes[1] (ROUTES): Input should be less than or",
        ),
        (["recommend", "--connections=abc", "--run", str(MEMORY_RUN)], "--connections must be a number, got 'abc'"),
        (["recommend", "--connections=1e12", "--run", str(MEMORY_RUN)], "--connections must be at most 1e+08"),
        (["recommend", "--routes=1.5", "--run", str(MEMORY_RUN)], "--routes must be a whole number"),
        (["recommend", "--connections=100", "--run", str(RUN)], "has no memory model"),
        (["recommend", "--run", str(RUN)], "recommend needs --target-rps N (CPU), --connections N"),
        (["recommend", "--target-rps=--", "--run", str(RUN)], "--target-rps must be a number, got '--'"),
        (["recommend", "--target-rps=5000", "--output=--", "--run", str(RUN)], "--output must be text or yaml"),
        (["recommend", "--target-rps=5000", "--profile=--", "--run", str(RUN)], "no traffic profile '--'"),
        (["plan", "--envoy-cpus=--"], "ENVOY_CPUS='--' is not a number list"),
        (["sweep", "--resume=--"], "no run found at --"),
    ],
)
def test_known_hostile_values_are_refused_in_one_line(run_cli, argv, expected):
    outcome = run_cli(*argv)
    outcome.check(expected)
    assert outcome.code == 2
