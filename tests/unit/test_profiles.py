"""Traffic profiles: parsing and refusals, the plan axis, what the load generator and the backend are told,
the guard on connection reuse, and the report's comparison worked out by hand."""

from __future__ import annotations

import zlib

import pytest
from pydantic import TypeAdapter, ValidationError

from runner.errors import ScenarioError
from runner.guards import GuardContext, connections_off_profile
from runner.knee import find_knee
from runner.locust import LoadTarget, LocustOptions
from runner.model import BackendResources, ConfigResult, EnvoyResources, Knee, RunSummary
from runner.plan import plan_sweep
from runner.platforms.local import envoy, nginx
from runner.profiles import PLAIN_PROFILE, ProfileList, TrafficProfile, parse_short
from runner.report.model import build_report
from runner.report.series import build_series
from runner.scenario import Overrides, load_scenario, parse_scenario
from support.steps import make_step

PROFILES = TypeAdapter(ProfileList)


def profile(name: str) -> TrafficProfile:
    return PROFILES.validate_python([name])[0]


@pytest.mark.parametrize(
    ("name", "tls", "new", "body", "key"),
    [
        ("plain", False, False, None, "rsa-2048"),
        ("tls", True, False, None, "rsa-2048"),
        ("tls-ecdsa", True, False, None, "ecdsa-p256"),
        ("new-connection", False, True, None, "rsa-2048"),
        ("tls-new-connection", True, True, None, "rsa-2048"),
        ("body-16k", False, False, 16384, "rsa-2048"),
        ("body-1m", False, False, 2**20, "rsa-2048"),
        ("body-700", False, False, 700, "rsa-2048"),
        ("tls-ecdsa-new-connection-body-1k", True, True, 1024, "ecdsa-p256"),
    ],
)
def test_short_names_spell_the_profile(name, tls, new, body, key):
    found = profile(name)
    assert (found.name, found.tls, found.new_connection, found.body_bytes, found.tls_key) == (name, tls, new, body, key)
    assert found.path("/") == (f"/size/{body}" if body else "/")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("tlsnew-connection", "not a profile name"),
        ("new-connectionbody-1k", "not a profile name"),
        ("body-0", "positive"),
        ("body-17m", "MAX_BODY_BYTES"),
        ({"name": "plain", "tls": True}, "kept for plain HTTP"),
        ({"name": "x", "tls": "maybe"}, "valid boolean"),
        ({"name": "x", "sni": "a"}, "Extra inputs"),
        ({"name": "Bad Name"}, "not a profile name"),
    ],
)
def test_a_bad_profile_is_refused(value, says):
    with pytest.raises(ValidationError, match=says):
        PROFILES.validate_python([value])


def test_profiles_are_an_axis_and_plain_keys_stay_as_before():
    scenario = load_scenario("local", Overrides(profiles="plain,tls-new-connection", envoy_cpus="0.25,0.5"))
    configs = plan_sweep(scenario).configurations
    assert [(c.profile.name, c.envoy_cpu_cores) for c in configs] == [
        ("plain", 0.25), ("plain", 0.5), ("tls-new-connection", 0.25), ("tls-new-connection", 0.5)
    ]  # fmt: skip
    # a run measured before profiles existed resumes and compares with the same keys
    assert configs[0].key == "envoy=250m/256Mi,contour=-,nginx=1,arrivals=poisson"
    assert configs[2].key.endswith(",arrivals=poisson,profile=tls-new-connection")
    assert configs[2].label.endswith("tls-new-connection traffic")


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (Overrides(profiles="tls,tls"), "profile tls is listed twice"),
        (Overrides(profiles="new-connection", client="fasthttp"), "needs load.client: lean"),
        (Overrides(profiles="brotli"), "'brotli' is not a profile name"),
    ],
)
def test_a_profile_that_cannot_run_is_refused_before_anything_starts(overrides, says):
    with pytest.raises(ScenarioError) as refused:
        load_scenario("local", overrides)
    line = refused.value.one_line()
    assert "\n" not in line and "profiles" in line and says.split(": ")[-1] in line, line


def test_the_backend_serves_body_files_that_do_not_compress(tmp_path):
    replica = nginx.NginxReplica(0, 18080, body_sizes=(1024, 16384))
    conf = nginx.prepare(replica, tmp_path).read_text()
    assert "location /size/" in conf and "default_type application/octet-stream" in conf
    body = (tmp_path / "html" / "size" / "16384").read_bytes()
    assert len(body) == 16384 and body == nginx.body(16384)
    assert len(zlib.compress(body, 9)) > 0.99 * len(body)  # Envoy's gzip could not shrink it either


def test_a_tls_bootstrap_has_contours_https_listener(tmp_path):
    tls = envoy.TlsListener(10443, tmp_path / "c.crt", tmp_path / "c.key")
    config = envoy.bootstrap(envoy.EnvoyLayout(10080, 9901, (18080,), host_header="gw.example", tls=tls))
    listeners = {item["name"]: item for item in config["static_resources"]["listeners"]}
    assert set(listeners) == {"ingress_http", "ingress_https"}
    chain = listeners["ingress_https"]["filter_chains"][0]
    assert chain["filter_chain_match"] == {"server_names": ["gw.example"]}
    manager = chain["filters"][0]["typed_config"]
    assert manager["stat_prefix"] == "ingress_https"
    assert '"gw.example"' in manager["http_filters"][0]["typed_config"]["default_source_code"]["inline_string"]
    [secret] = config["static_resources"]["secrets"]
    assert secret["tls_certificate"]["private_key"]["filename"] == str(tmp_path / "c.key")
    plain = envoy.bootstrap(envoy.EnvoyLayout(10080, 9901, (18080,)))
    assert [item["name"] for item in plain["static_resources"]["listeners"]] == ["ingress_http"]
    assert "secrets" not in plain["static_resources"]


def test_the_guard_names_connection_reuse_that_is_not_the_profiles():
    new = GuardContext(threshold=0.9, workers=1, profile=profile("tls-new-connection"))
    kept = GuardContext(threshold=0.9, workers=1, profile=PLAIN_PROFILE)
    shared = make_step(0, users=100, rps=1000.0, utilization=0.5, envoy_cx_rate=400.0)
    assert connections_off_profile(shared, [], new).detail.startswith("only 40% of requests opened a new connection")
    assert connections_off_profile(shared, [], kept).detail.startswith("40% of requests opened a new connection")
    assert (
        connections_off_profile(make_step(0, users=100, rps=1000.0, utilization=0.5, envoy_cx_rate=995.0), [], new)
        is None
    )
    assert (
        connections_off_profile(make_step(0, users=100, rps=1000.0, utilization=0.5, envoy_cx_rate=3.0), [], kept)
        is None
    )
    past = make_step(0, users=100, rps=1000.0, utilization=0.95, envoy_cx_rate=400.0)
    assert connections_off_profile(past, [], new) is None  # scrapes of a throttled Envoy come late
    assert connections_off_profile(make_step(0, users=100, rps=1000.0, utilization=0.5), [], new) is None


def _config(name: str, cores: float, knee: float | None, cx_per_request: float) -> ConfigResult:
    found = profile(name)
    suffix = "" if found.is_plain else f",profile={name}"
    steps = [
        make_step(i, users=int(rps / 5), rps=rps, utilization=u, envoy_cx_rate=rps * cx_per_request)
        for i, (rps, u) in enumerate([(100.0, 0.3), (200.0, 0.6), (400.0, 0.95)])
    ]
    return ConfigResult(
        key=f"envoy={cores * 1000:.0f}m/256Mi,contour=-,nginx=1,arrivals=poisson{suffix}",
        label=f"Envoy {cores * 1000:.0f}m, {name}",
        envoy=EnvoyResources(cpu_cores=cores, memory="256Mi", concurrency=1),
        backend=BackendResources(replicas=1),
        arrivals="poisson",
        profile=found,
        status="saturated" if knee else "not-saturated",
        knee=Knee(rps=knee, low=knee * 0.95, high=knee * 1.05) if knee else None,
        steps=steps,
    )


def test_the_comparison_gives_each_profiles_cost_and_a_handshakes_worked_out_by_hand():
    summary = RunSummary(
        run_id="r", platform="local", scenario="s", threshold=0.9, started_at="2026-11-24T00:00:00+00:00",
        configs=[
            _config("plain", 0.5, 2000.0, 0.0),
            _config("tls", 0.5, 1500.0, 0.0),
            _config("tls-new-connection", 0.5, 300.0, 1.0),
            _config("plain", 0.25, 1000.0, 0.0),
            _config("tls-new-connection", 0.25, None, 1.0),
        ],
    )  # fmt: skip
    comparison = build_report(summary, headroom=0.3).profiles
    assert comparison is not None and comparison.first == "plain"
    rows = {(r.row.profile, r.row.cpu_cores): r for r in comparison.rows}
    # CPU per request at a knee: 90% of 0.5 cores over the knee
    assert rows[("plain", 0.5)].row.cpu_per_request_us == pytest.approx(225.0)
    assert rows[("tls", 0.5)].row.cpu_per_request_us == pytest.approx(300.0)
    assert rows[("tls-new-connection", 0.5)].row.cpu_per_request_us == pytest.approx(1500.0)
    ratio = rows[("tls-new-connection", 0.5)].vs_first
    assert ratio is not None and ratio.value == pytest.approx(0.15) and ratio.interval is None  # one pass
    assert rows[("tls-new-connection", 0.5)].cores_per_1k_rps == pytest.approx(1000 * 1.3 * 0.5 / 300)
    assert rows[("tls-new-connection", 0.25)].row.knee is None and rows[("tls-new-connection", 0.25)].vs_first is None
    # the handshake: tls-new-connection minus its keep-alive twin tls, per connection
    [cost] = comparison.connection_costs
    assert (cost.new, cost.kept, cost.tls, cost.cpu_cores) == ("tls-new-connection", "tls", True, 0.5)
    assert cost.us_per_connection == pytest.approx(1200.0)
    assert cost.requests_equivalent == pytest.approx(4.0)
    assert cost.interval is None  # one pass: no rounds to scatter
    # sizing reads the first profile only
    plain, tls = build_series(summary), build_series(summary, "tls")
    assert plain is not None and tls is not None
    assert [r.cores for r in plain.rates] == [0.25, 0.5]
    assert [r.rps for r in tls.rates] == [1500.0]


def test_one_profile_makes_no_comparison():
    summary = RunSummary(
        run_id="r", platform="local", scenario="s", threshold=0.9, started_at="2026-11-24T00:00:00+00:00",
        configs=[_config("plain", 0.5, 2000.0, 0.0)],
    )  # fmt: skip
    assert build_report(summary, headroom=0.3).profiles is None


def test_compression_is_a_profile_axis_that_reaches_the_load_generator():
    identity = TrafficProfile(**parse_short("tls-identity"))
    assert identity.tls and identity.accept_encoding == "identity"
    assert "no compression (identity)" in identity.description
    load = parse_scenario({"name": "x", "envoy": {"cpu": [0.5]}, "load": {"accept_encoding": "gzip, deflate, br"}}).load
    asked = LocustOptions.from_load(load, 5.0, "poisson", LoadTarget("http://g", "h", "/", False, "identity"))
    default = LocustOptions.from_load(load, 5.0, "poisson", LoadTarget("http://g", "h", "/"))
    assert asked.as_form()["accept_encoding"] == "identity"
    assert default.as_form()["accept_encoding"] == "gzip, deflate, br"  # a profile that says nothing: the scenario's
    with pytest.raises(ValueError, match="plain HTTP with keep-alive"):
        TrafficProfile(name="plain", accept_encoding="identity")


def _rounds_config(name: str, knee: float, drifts: list[float]) -> ConfigResult:
    """Envoy 500m measured in len(drifts) rounds: in round r the curve u = 0.9 (rps / knee_r)^0.8 through
    windows at 75% and 105% of knee_r = knee / drift_r (a slower machine lowers the knee), no noise."""
    rates = [(r, share * knee / drift, share) for r, drift in enumerate(drifts, start=1) for share in (0.75, 1.05)]
    steps = [
        make_step(i, round=r, users=10, rps=rps, utilization=0.9 * share**0.8,
                  envoy_cx_rate=rps if "new" in name else 0.0)
        for i, (r, rps, share) in enumerate(rates)
    ]  # fmt: skip
    config = _config(name, 0.5, knee, 1.0 if "new" in name else 0.0)
    return config.model_copy(update={"steps": steps, "knee": find_knee(steps, 0.9).knee})


def test_a_handshakes_cost_has_an_interval_from_the_scatter_between_rounds():
    # round by round, both profiles see the same machine: tls-new-connection's cost per request is
    # 0.45e6 / 300 = 1,500 us and tls's 0.45e6 / 1,500 = 300 us at nominal speed, a handshake 1,200 us;
    # a round on a machine 10% slower raises both and the handshake with them
    def cost(drifts: list[float]):
        summary = RunSummary(
            run_id="r", platform="local", scenario="s", threshold=0.9, started_at="2026-11-24T00:00:00+00:00",
            configs=[_rounds_config("tls", 1500.0, drifts), _rounds_config("tls-new-connection", 300.0, drifts)],
        )  # fmt: skip
        comparison = build_report(summary, headroom=0.3).profiles
        assert comparison is not None
        [found] = comparison.connection_costs
        return found

    steady = cost([1.0, 1.0, 1.0, 1.0])
    assert steady.interval is not None and steady.interval.rounds == 4
    assert steady.interval.value == pytest.approx(1200.0, rel=1e-6) == steady.us_per_connection
    assert steady.interval.low == pytest.approx(1200.0, rel=1e-6) == steady.interval.high
    drifting = cost([0.9, 1.0, 1.1, 1.0])
    assert drifting.interval is not None and drifting.interval.low < 1200.0 < drifting.interval.high
    assert 0.05 < drifting.interval.half_width < 0.3  # the rounds' +-10% is in it, t(3) widened
