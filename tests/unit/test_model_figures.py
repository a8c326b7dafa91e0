"""The figures derived from a configuration's knee and capacity, each defined once on the model."""

from __future__ import annotations

import pytest

from runner.model import BackendResources, Capacity, ConfigResult, EnvoyResources, Knee


def _config(status: str = "saturated", **fields: object) -> ConfigResult:
    return ConfigResult(
        key="k",
        label="Envoy 500m",
        envoy=EnvoyResources(cpu=0.5, memory="256Mi", concurrency=1),
        backend=BackendResources(replicas=1),
        status=status,
        **fields,
    )


def test_knee_per_core_and_its_interval_come_from_the_valid_knee_only():
    config = _config(knee=Knee(rps=3000, low=2900, high=3150, method="rounds", rounds=5))
    assert config.knee_per_core == 6000
    assert config.knee_per_core_interval == (5800, 6300)
    assert config.knee_cpu_per_request_us(0.9) == pytest.approx(0.9 * 0.5 / 3000 * 1e6)  # 150 µs
    invalid = _config("invalid", knee=Knee(rps=3000))
    assert invalid.knee_per_core is None and invalid.knee_per_core_interval is None
    assert invalid.knee_cpu_per_request_us(0.9) is None
    assert _config(knee=Knee(rps=3000)).knee_per_core_interval is None  # interpolated: no interval


def test_capacity_over_the_knee_is_negative_when_latency_breaks_before_the_threshold():
    above = _config(knee=Knee(rps=2000), capacity=Capacity(rps=2300, broken_at=2400))
    below = _config(knee=Knee(rps=6235), capacity=Capacity(rps=4105, broken_at=4300))
    assert above.capacity_over_knee == pytest.approx(0.15)
    assert below.capacity_over_knee == pytest.approx(4105 / 6235 - 1)  # -34%: issue 20's 500m run
    assert _config("invalid", knee=Knee(rps=2000), capacity=Capacity(rps=2300)).capacity_over_knee is None
    assert Capacity(rps=2000, broken_at=2100).resolution == pytest.approx(0.05)
    assert Capacity(rps=2000).resolution is None


def test_a_plateau_is_an_exponent_below_the_plateau_exponent():
    assert Knee(rps=1, exponent=0.3).plateau and not Knee(rps=1, exponent=0.8).plateau
    assert not Knee(rps=1).plateau  # interpolated: nothing known of the curve
