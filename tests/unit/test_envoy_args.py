"""Envoy's `--concurrency` in a container's args, however the manifest wrote it."""

from __future__ import annotations

import pytest

from runner.platforms.kubernetes.workloads import concurrency_in, with_concurrency

CONTOUR = ["-c", "/config/envoy.json", "--service-cluster $(CONTOUR_NAMESPACE)", "--log-level info"]


@pytest.mark.parametrize(
    "args",
    [
        CONTOUR,
        [*CONTOUR, "--concurrency", "8"],
        ["--concurrency=8", *CONTOUR],
        [*CONTOUR[:2], "--concurrency 8", *CONTOUR[2:]],
        [*CONTOUR, "--concurrency", "8", "--concurrency=4"],
    ],
    ids=["absent", "two-args", "equals", "one-arg-with-space", "given-twice"],
)
def test_with_concurrency_replaces_every_earlier_flag_and_keeps_the_rest_in_order(args):
    patched = with_concurrency(args, 2)
    assert patched == [*CONTOUR, "--concurrency", "2"]
    assert concurrency_in(patched) == 2


def test_no_args_get_just_the_flag():
    assert with_concurrency(None, 1) == ["--concurrency", "1"]


@pytest.mark.parametrize(
    ("args", "workers"),
    [
        (None, None),
        (CONTOUR, None),
        ([*CONTOUR, "--concurrency", "3"], 3),
        (["--concurrency=5"], 5),
        (["--concurrency 6"], 6),
        (["--concurrency", "2", "--concurrency=7"], 7),  # Envoy takes the last one given
        (["--concurrency"], None),  # a flag without its value sets nothing
        (["--concurrency", "many"], None),
    ],
)
def test_concurrency_in_reads_what_envoy_would_run_with(args, workers):
    assert concurrency_in(args) == workers
