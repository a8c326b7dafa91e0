"""A window counts only what the run's own Locust workers sent (runner.measure.check_workers): a stranger that
joins the master mid-run, or a worker lost, discards it."""

from __future__ import annotations

import pytest

from runner.errors import WindowDiscarded
from runner.locust import Snapshot, WorkerStatus
from runner.measure import check_workers


def _snapshot(*workers: tuple[str, str]) -> Snapshot:
    return Snapshot(0.0, "running", 4, {}, {}, {}, tuple(WorkerStatus(i, s, 2, 10.0) for i, s in workers))


RUNS = (("pod-a_1", "running"), ("pod-b_2", "running"))


def test_the_runs_own_workers_pass():
    check_workers(2, _snapshot(*RUNS), _snapshot(*RUNS))


def test_a_stranger_that_joined_mid_window_discards_it():
    with pytest.raises(WindowDiscarded, match=r"2 then 3 Locust workers .* not the run's 2 \(the workers changed\)"):
        check_workers(2, _snapshot(*RUNS), _snapshot(*RUNS, ("stranger_3", "running")))


def test_a_stranger_there_all_along_or_a_worker_lost_discards_it():
    with pytest.raises(WindowDiscarded, match=r"3 then 3 .* not the run's 2: .* stranger"):
        check_workers(2, _snapshot(*RUNS, ("stranger_3", "running")), _snapshot(*RUNS, ("stranger_3", "running")))
    lost = (RUNS[0], ("pod-b_2", "missing"))  # its heartbeats stopped: it sends nothing
    with pytest.raises(WindowDiscarded, match=r"1 then 1 .* not the run's 2"):
        check_workers(2, _snapshot(*lost), _snapshot(*lost))
