"""`recommend` in the install's shape, computed by hand from the recorded run: a DaemonSet's nodes and cores per
pod, a Deployment's replicas with a scale-out efficiency and imbalance, and the worker threads to set."""

from __future__ import annotations

import math

import pytest

from runner.model import Node
from runner.report.daemonset import format_nodes, plan_nodes
from runner.report.replicas import format_replicas, plan_replicas
from runner.report.scale_out import ASSUMED, ScaleOut
from runner.report.series import require_series
from runner.report.sizing import recommend
from runner.report.threads import threads_for
from support.report_data import KNEE_300M, fixture_summary

REQUIRED = 5000 * 1.3  # the knee 30% above a target of 5,000 RPS
PER_CORE_300M = KNEE_300M / 0.3


def _rec(target: float = 5000):
    return recommend(require_series(fixture_summary()), target, 0.3)


def test_a_daemonset_gets_n_plus_one_nodes_at_a_measured_limit():
    plan = plan_nodes(_rec())
    assert (plan.rate.cores, plan.nodes, plan.min_nodes) == (0.3, math.ceil(REQUIRED / KNEE_300M), 5)
    assert plan.on_nodes is None and plan.cores_per_pod == 0.3
    text = "\n".join(format_nodes(plan))
    assert "  nodes:       4 x 300m = 1.20 cores: ceil(6,500 / 1,804) = 4" in text
    assert "  N+1:         5 nodes x 300m = 1.50 cores: with one node lost, the other 4 carry 7,217" in text
    assert "--nodes M sizes each pod" in text and "HPA target" not in text


def test_on_the_nodes_that_run_it_each_pod_is_sized_so_that_one_node_can_be_lost():
    plan = plan_nodes(_rec(), nodes=3, nodes_source="--nodes")
    on = plan.on_nodes
    assert on is not None and on.carrying == 2
    assert on.per_pod.required_rps == pytest.approx(REQUIRED / 2)  # each pod's knee must reach 3,250
    cores = math.ceil(round(REQUIRED / 2 / PER_CORE_300M / 0.1, 9)) / 10  # at 300m's knee per core, up to 100m
    assert plan.cores_per_pod == pytest.approx(cores) == pytest.approx(0.6)
    one = plan_nodes(_rec(), nodes=1, nodes_source="--nodes")
    assert one.on_nodes is not None and one.on_nodes.carrying == 1
    assert one.on_nodes.per_pod.required_rps == pytest.approx(REQUIRED)
    assert "one node has no N+1" in "\n".join(format_nodes(one))


def test_a_measured_efficiency_and_imbalance_size_the_replicas_and_the_hpa():
    """With the per-pod figures (issue 30, item 1): 2 pods served 0.8 (0.7-0.9) of twice one pod's knee, and the
    busiest pod ran 1.1 times the mean."""
    measured = ScaleOut(0.8, (0.7, 0.9), 2, 1.1, True, "paired over 5 rounds")
    plan = plan_replicas(_rec(), 0.9, cores_per_replica=0.3, scale_out=measured)
    assert plan.replicas == math.ceil(REQUIRED / (KNEE_300M * 0.8)) == 5
    assert plan.replicas_interval == (math.ceil(REQUIRED / (KNEE_300M * 0.9)), math.ceil(REQUIRED / (KNEE_300M * 0.7)))
    assert plan.hpa_target_pct == math.floor(100 * 0.9 / (1.3 * 1.1)) == 62
    text = "\n".join(format_replicas(plan))
    assert "ceil(6,500 / (1,804 x 0.80)) = 5; 5-6 within its interval" in text
    assert "floor(100 x 0.9 / ((1 + 0.3) x 1.10 imbalance))" in text
    assert "efficiency 0.80, 95% CI 0.70-0.90, measured at 2 pods against one; imbalance 1.10" in text
    assumed = plan_replicas(_rec(), 0.9, cores_per_replica=0.3)
    assert assumed.scale_out is ASSUMED and assumed.replicas == 4 and assumed.hpa_target_pct == 69
    assert "efficiency assumed 1.00, imbalance assumed 1.00: the run measured one Envoy pod" in "\n".join(
        format_replicas(assumed)
    )
    nodes = plan_nodes(_rec(), cores_per_pod=0.3, nodes=3, scale_out=measured)
    assert nodes.nodes == 5 and nodes.on_nodes is not None
    assert nodes.on_nodes.per_pod.required_rps == pytest.approx(REQUIRED / (2 * 0.8))


def test_threads_name_the_count_the_figures_hold_for_and_the_one_to_set():
    summary = fixture_summary()
    basis = _rec().series.largest  # 300m, measured with one worker thread (envoy.concurrency auto)
    auto = threads_for(basis, 1.1, summary, None)
    assert (auto.measured, auto.rule, auto.production, auto.flag) == (1, "auto", 2, "--concurrency 2")
    lines = "\n".join(auto.lines())
    assert "the figures hold for Envoy with --concurrency 1 at 300m" in lines
    assert "set --concurrency 2 in the envoy container's args for 1100m per pod" in lines
    assert "2 threads at 1100m were not measured (1 at 300m): confirm with make sweep ENVOY_CPUS=1.1" in lines
    same = threads_for(basis, 0.3, summary, None)
    assert same.production == 1 and "(as measured)" in "\n".join(same.lines())
    envoy = basis.config.envoy.model_copy(update={"concurrency": 0})
    default = basis.config.model_copy(update={"envoy": envoy})
    nodes = summary.environment.model_copy(update={"nodes": (Node(name="a", cpu="16"), Node(name="b", cpu="16"))})
    on_nodes = summary.model_copy(update={"configs": [default], "environment": nodes})
    provisioned = threads_for(basis.__class__(default, "knee", basis.rps, None, None), 0.3, on_nodes, None)
    assert (provisioned.rule, provisioned.production) == ("default", 16)
    assert "Envoy's default worker threads, its own count (16 CPUs on the run's nodes)" in provisioned.measured_text
    assert provisioned.flag == "--concurrency 16"
    unknown = summary.model_copy(update={"configs": [default]})  # a local run: no nodes recorded
    unknown_nodes = threads_for(basis.__class__(default, "knee", basis.rps, None, None), 0.3, unknown, None)
    assert unknown_nodes.production is None
    assert "set --concurrency to the CPU count of the nodes the run measured on" in "\n".join(unknown_nodes.lines())
