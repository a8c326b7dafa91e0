import pytest

from runner.quantities import format_cpu, format_memory, parse_cpu, parse_memory, parse_number_list


@pytest.mark.parametrize(("text", "cores"), [("500m", 0.5), ("1", 1.0), (2, 2.0), ("0.15", 0.15), (0.3, 0.3)])
def test_cpu_quantities_parse_to_cores(text, cores):
    assert parse_cpu(text) == pytest.approx(cores)


@pytest.mark.parametrize("bad", ["abc", "-1", "0", "1.5x", True])
def test_bad_cpu_quantities_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_cpu(bad)


@pytest.mark.parametrize(("text", "size"), [("512Mi", 512 * 2**20), ("1Gi", 2**30), ("1G", 10**9), (1024, 1024)])
def test_memory_quantities_parse_to_bytes(text, size):
    assert parse_memory(text) == size


def test_formatting_round_trips_kubernetes_forms():
    assert format_cpu(0.15) == "150m"
    assert format_cpu(2.0) == "2"
    assert format_memory(512 * 2**20) == "512Mi"
    assert format_memory(3 * 2**30) == "3Gi"


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("1..6", (1, 2, 3, 4, 5, 6)),
        ("0.25,0.5", (0.25, 0.5)),
        ("0.1..0.5:0.1", (0.1, 0.2, 0.3, 0.4, 0.5)),
        ("2", (2,)),
        ("1..2,4", (1, 2, 4)),
    ],
)
def test_number_lists_expand_ranges(text, values):
    assert parse_number_list(text, what="ENVOY_CPUS") == pytest.approx(values)


@pytest.mark.parametrize("bad", ["abc", "", "1..", "3..1", "0.1..0.5:0", "0.1..0.55:0.1", "1,,2"])
def test_bad_number_lists_name_the_variable_and_the_forms(bad):
    with pytest.raises(ValueError, match=r"ENVOY_CPUS.*(number list|empty).*1\.\.6"):
        parse_number_list(bad, what="ENVOY_CPUS")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1" * 400, 10**400, [0.1], {"cpu": 1}, None, "nan", "inf"])
def test_cpu_quantities_are_finite_numbers_or_strings(bad):
    with pytest.raises(ValueError, match="CPU"):
        parse_cpu(bad)


@pytest.mark.parametrize("bad", ["9" * 400 + "Ti", "1e3Gi", [1], {"a": 1}, None, True, "nan", "-1Mi"])
def test_bad_memory_quantities_are_value_errors(bad):
    with pytest.raises(ValueError, match="memory"):
        parse_memory(bad)


@pytest.mark.parametrize("bad", ["nan", "inf", "1e999", "-inf..1", "0..inf", "0..1:1e-320", "nan..1"])
def test_number_lists_hold_finite_numbers_only(bad):
    with pytest.raises(ValueError, match=r"ENVOY_CPUS.*not a number list"):
        parse_number_list(bad, what="ENVOY_CPUS")


@pytest.mark.parametrize("text", ["1..2000000", "1..1e300", "0..1:1e-9", "1..600,1..600", ",".join(["1"] * 1001)])
def test_number_lists_are_counted_before_they_are_expanded(text):
    with pytest.raises(ValueError, match=r"more than 1000 values"):
        parse_number_list(text, what="ENVOY_CPUS", max_count=1000)
    assert len(parse_number_list("1..1000", what="ENVOY_CPUS", max_count=1000)) == 1000
