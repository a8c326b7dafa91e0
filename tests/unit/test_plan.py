from runner.plan import plan_sweep
from runner.scenario import parse_scenario


def test_plan_is_the_cross_product_with_cpu_varying_fastest():
    scenario = parse_scenario(
        {
            "name": "t",
            "envoy": {"cpu": [1, 2], "memory": ["1Gi", "2Gi"]},
            "backend": {"replicas": [1, 3]},
            "contour": {"resources": [{"cpu": 1, "memory": "1Gi"}, {"cpu": 2, "memory": "1Gi"}]},
        }
    )
    plan = plan_sweep(scenario)
    assert len(plan) == 16
    first, second = plan.configurations[:2]
    assert (first.envoy_cpu_cores, second.envoy_cpu_cores) == (1.0, 2.0)
    assert len({c.key for c in plan.configurations}) == 16


def test_auto_concurrency_is_one_thread_per_started_core():
    scenario = parse_scenario({"name": "t", "envoy": {"cpu": [0.15, 1, 2.5]}})
    assert [c.envoy_concurrency for c in plan_sweep(scenario).configurations] == [1, 1, 3]
    fixed = parse_scenario({"name": "t", "envoy": {"cpu": [0.15, 4], "concurrency": 2}})
    assert [c.envoy_concurrency for c in plan_sweep(fixed).configurations] == [2, 2]


def test_labels_read_like_the_reference_report():
    scenario = parse_scenario({"name": "t", "envoy": {"cpu": [0.15], "memory": "256Mi"}})
    assert plan_sweep(scenario).configurations[0].label == "Envoy 150m CPU / 256Mi, nginx x1, poisson arrivals"
