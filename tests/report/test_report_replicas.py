"""Replicas, N+1 and the HPA target from a recorded run, computed here by hand and compared with `recommend`."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from runner.model import EnvoyWorkload
from runner.report.manifests import envoy_manifests
from runner.report.replicas import hpa_target_percent, plan_replicas, replicas_for
from runner.report.series import require_series
from runner.report.shape import Gateway, gateway_of_run
from runner.report.sizing import recommend
from runner.results import load_summary
from support.processes import run_sizer
from support.report_data import FIXTURE_RUN, THREE_LIMITS_RUN, copy_run, fixture_summary


def _by_hand(run: Path, target: float, headroom: float) -> dict[str, float]:
    """The whole derivation from summary.json's raw numbers: the knee measured at each saturated limit, the
    measured limit with the fewest cores at N+1, N, N+1, the HPA target and its range."""
    raw = json.loads((run / "summary.json").read_text())
    knees = {c["envoy"]["cpu"]: c["knee"]["rps"] for c in raw["configs"] if c["status"] == "saturated"}
    required = target * (1 + headroom)
    options = []
    for cores, knee in knees.items():
        n = math.ceil(required / knee)
        options.append(((n + 1) * cores, -cores, cores, knee, n))
    _, _, cores, knee, n = min(options)
    hpa = math.floor(100 * raw["threshold"] / (1 + headroom))
    return {"cores": cores, "knee": knee, "replicas": n, "min": n + 1, "max": 2 * (n + 1), "hpa": hpa}


@pytest.mark.parametrize(
    ("run", "target", "headroom"),
    [(FIXTURE_RUN, 5000, 0.3), (FIXTURE_RUN, 20_000, 0.5), (THREE_LIMITS_RUN, 5000, 0.3), (THREE_LIMITS_RUN, 800, 0)],
)
def test_replicas_n_plus_one_and_hpa_target_match_a_hand_computation(tmp_path: Path, run, target, headroom):
    hand = _by_hand(run, target, headroom)
    run_dir = tmp_path / "run"
    shutil.copytree(run, run_dir)
    args = ["recommend", f"--target-rps={target}", f"--headroom={headroom}", "--run", str(run_dir)]
    args.append("--workload-kind=Deployment")  # a local run is Contour's quickstart, a DaemonSet, unless told
    text = run_sizer(*args)
    assert text.returncode == 0, text.stderr
    cpu = f"{round(hand['cores'] * 1000)}m"
    assert f"; {cpu} CPU per replica: the measured limit that runs the fewest cores at N+1" in text.stdout
    assert f"  replicas:    {hand['replicas']} x {cpu} = {hand['replicas'] * hand['cores']:.2f} cores" in text.stdout
    assert f"  N+1:         {hand['min']} x {cpu} = {hand['min'] * hand['cores']:.2f} cores" in text.stdout
    assert f"ceil({target * (1 + headroom):,.0f} / {hand['knee']:,.0f}) = {hand['replicas']}" in text.stdout
    assert f"  HPA target:  {hand['hpa']}% CPU utilization = floor(100 x 0.9 / (1 + {headroom:g}))" in text.stdout
    assert f"  HPA range:   min {hand['min']} (N+1), max {hand['max']} (2 x min)" in text.stdout

    out = run_sizer(*args, "--output=yaml")
    assert out.returncode == 0, out.stderr
    patch, hpa, pdb = yaml.safe_load_all(out.stdout)
    resources = patch["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] and resources["limits"]["cpu"] == cpu
    assert hpa["spec"]["minReplicas"] == hand["min"] and hpa["spec"]["maxReplicas"] == hand["max"]
    metric = hpa["spec"]["metrics"][0]
    assert metric["type"] == "ContainerResource" and metric["containerResource"]["container"] == "envoy"
    assert metric["containerResource"]["target"] == {"type": "Utilization", "averageUtilization": hand["hpa"]}
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "envoy"}}}
    assert {d["metadata"]["namespace"] for d in (patch, hpa, pdb)} == {"projectcontour"}


def test_the_fixture_run_by_hand_in_numbers():
    """The figures the README shows: 4 x 300m, 5 with one lost, HPA at 69%."""
    rec = recommend(require_series(fixture_summary()), 5000, 0.3)
    plan = plan_replicas(rec, 0.9, summary=fixture_summary())
    assert (plan.cores_per_replica, plan.replicas, plan.min_replicas, plan.max_replicas) == (0.3, 4, 5, 10)
    assert plan.knee_per_replica == pytest.approx(1804.34, abs=0.01) and plan.rate.measured
    assert plan.hpa_target_pct == 69
    # At 300m the run measured 72% at 69/90 of the knee (CPU per request falls with load): scale-out earlier.
    assert plan.measured is not None and plan.measured.utilization == pytest.approx(0.72, abs=0.01)
    assert plan.measured.scale_out_rps == pytest.approx(1283, abs=1)


def test_exact_multiples_and_the_formula_edges():
    assert replicas_for(6000, 2000) == 3 and replicas_for(6000.000001, 2000) == 4 and replicas_for(10, 2000) == 1
    assert hpa_target_percent(0.9, 0.3) == 69 and hpa_target_percent(0.9, 0) == 90 and hpa_target_percent(0.9, 10) == 8
    assert hpa_target_percent(0.9, 0.5) == 60  # 90 / 1.5 exactly, not 59 from float noise


def test_cores_per_replica_the_run_did_not_measure_are_sized_at_a_measured_rate_per_core():
    rec = recommend(require_series(fixture_summary()), 5000, 0.3)
    plan = plan_replicas(rec, 0.9, cores_per_replica=2)
    # 300m's knee per core, 1,804 / 0.3 = 6,014, times 2 cores: 12,029 >= 6,500
    assert plan.knee_per_replica == pytest.approx(1804.34 / 0.3 * 2, abs=0.1) and not plan.rate.measured
    assert plan.replicas == 1 and plan.min_replicas == 2
    assert plan.warnings[0].startswith(
        "2 CPU per replica is beyond the largest measured limit (300m): extrapolated 6.7x; sized at 6,014 RPS per core"
    )
    small = plan_replicas(rec, 0.9, cores_per_replica=0.05)  # below 150m: 150m's 3,495 per core, 175 RPS a replica
    assert small.knee_per_replica == pytest.approx(524.26 / 0.15 * 0.05, abs=0.1)
    assert small.replicas == math.ceil(6500 / (524.2586 / 0.15 * 0.05)) and "not measured" in small.warnings[0]


def _kubernetes_run(tmp_path: Path, workload: dict, found: EnvoyWorkload | None = None) -> Path:
    summary = fixture_summary()
    environment = summary.environment.model_copy(update={"envoy_workload": found})
    run_dir = copy_run(tmp_path, summary.model_copy(update={"platform": "kubernetes", "environment": environment}))
    scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    scenario["envoy"]["workload"] = workload
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    return run_dir


AUTO = {"namespace": "edge", "name": "gw", "container": "proxy", "kind": "auto"}


def test_auto_is_the_kind_the_run_found_and_never_turns_a_daemonset_into_a_deployment(tmp_path: Path):
    daemonset = EnvoyWorkload(kind="DaemonSet", namespace="edge", name="gw", container="proxy",
                              selector={"app.kubernetes.io/name": "gw"}, pods=3)  # fmt: skip
    found = gateway_of_run(_kubernetes_run(tmp_path / "a", AUTO, daemonset), load_summary(tmp_path / "a" / "run"))
    assert (found.kind, found.kind_source, found.assumed, found.pods) == ("DaemonSet", "as the run found it", False, 3)
    assert found.labels == {"app.kubernetes.io/name": "gw"}  # the selector as found, not a guess from the name
    unrecorded = _kubernetes_run(tmp_path / "b", AUTO)  # a run from before the kind was recorded
    gw = gateway_of_run(unrecorded, load_summary(unrecorded))
    assert gw.kind == "DaemonSet" and gw.assumed and "assumed" in gw.kind_source  # until 2026-11: Deployment
    out = run_sizer("recommend", "--target-rps=5000", "--output=yaml", "--run", str(unrecorded))
    assert [d["kind"] for d in yaml.safe_load_all(out.stdout)] == ["DaemonSet"], out.stderr
    assert "--workload-kind Deployment for a Deployment install" in out.stdout
    told = gateway_of_run(unrecorded, load_summary(unrecorded), "Deployment")
    assert (told.kind, told.kind_source, told.assumed) == ("Deployment", "from --workload-kind", False)


def test_a_kubernetes_run_names_its_own_gateway(tmp_path: Path):
    deployment = EnvoyWorkload(kind="Deployment", namespace="edge", name="gw", container="proxy",
                               selector={"app": "gw"}, pods=2)  # fmt: skip
    run_dir = _kubernetes_run(tmp_path, AUTO, deployment)
    gw = gateway_of_run(run_dir, load_summary(run_dir))
    assert (gw.namespace, gw.name, gw.container, gw.kind) == ("edge", "gw", "proxy", "Deployment")
    out = run_sizer("recommend", "--target-rps=5000", "--output=yaml", "--run", str(run_dir))
    patch, hpa, pdb = yaml.safe_load_all(out.stdout)
    assert {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in (patch, hpa, pdb)} == {("edge", "gw")}
    assert hpa["spec"]["metrics"][0]["containerResource"]["container"] == "proxy"
    assert patch["spec"]["template"]["spec"]["containers"][0]["name"] == "proxy"


def test_a_daemonset_gets_its_resources_and_why_there_is_no_hpa(tmp_path: Path):
    run_dir = _kubernetes_run(tmp_path, {"namespace": "projectcontour", "name": "envoy", "container": "envoy",
                                         "kind": "DaemonSet"})  # fmt: skip
    out = run_sizer("recommend", "--target-rps=5000", "--output=yaml", "--run", str(run_dir))
    docs = list(yaml.safe_load_all(out.stdout))
    assert [d["kind"] for d in docs] == ["DaemonSet"]
    assert "an HPA cannot scale" in out.stdout and "run it on N+1 = 5 nodes" in out.stdout


def test_local_runs_use_contours_defaults():
    gw = gateway_of_run(FIXTURE_RUN, fixture_summary())
    assert gw == Gateway() and gw.kind == "DaemonSet"
    plan = plan_replicas(recommend(require_series(fixture_summary()), 5000), 0.9)
    with pytest.raises(ValueError, match="a ReplicaPlan does not size a DaemonSet"):
        envoy_manifests(plan, gw, "r")
    text = envoy_manifests(plan, gw.model_copy(update={"kind": "Deployment"}), "r")
    assert text.startswith("# gateway-sizer recommend: Envoy for 5,000 RPS with 30% headroom, run r\n")
