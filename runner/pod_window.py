"""What one measuring window saw of one Envoy pod of the fleet. Pure data.

A window measures every Envoy pod the platform runs for the configuration (one `PodWindow` each, in
runner.model's `Step.pods`); the window's own utilization is its busiest pod's, and its RPS the fleet's.
"""

from __future__ import annotations

from runner.records import Frozen

ONE_THREAD_CORES = 1.0  # a thread runs on one core at most


def thread_wall_cores(limit_cores: float) -> float:
    """What one thread can use under a pod's CPU limit: one core, or the limit when that is less."""
    return min(ONE_THREAD_CORES, limit_cores)


class PodWindow(Frozen):
    """One Envoy pod in one window: its CPU against its own limit, its CFS throttling, the requests and new
    connections its own counters took, its active connections, and (where the platform reads threads) its
    worker threads.

    `rps` is the pod's share of the window's RPS: the client's rate times the pod's share of Envoy's own
    request counts, so that one pod's rate is the window's. `hottest_worker_share` is the busiest worker
    thread's CPU over what one thread can use under the pod's limit (`thread_wall_cores`).
    """

    pod: str
    cpu_cores: float
    cpu_utilization_min: float
    cpu_utilization_mean: float
    cpu_utilization_max: float
    rps: float
    envoy_rps: float | None = None  # from the pod's own counter (None: not scraped)
    throttled_share: float | None = None
    envoy_cx_rate: float | None = None
    active_connections: float | None = None
    worker_threads: int | None = None  # Envoy's worker threads (--concurrency), as read from the pod
    hottest_worker_cores: float | None = None
    mean_worker_cores: float | None = None
    hottest_worker_share: float | None = None
    cpu_limit_cores: float | None = None  # the pod's CPU limit (None: a window saved before it was recorded)

    @property
    def thread_can_fill_early(self) -> bool:
        """Whether one thread's wall is below the pod's limit, so that a thread at its wall can leave the pod under
        it. Not under a limit of one core or less: there the wall is the limit. Unknown limits count as yes."""
        return self.cpu_limit_cores is None or thread_wall_cores(self.cpu_limit_cores) < self.cpu_limit_cores

    @property
    def worker_spread(self) -> float | None:
        """The hottest worker thread's CPU over the mean worker's (1.0: the threads share the work evenly)."""
        if self.hottest_worker_cores is None or not self.mean_worker_cores:
            return None
        return self.hottest_worker_cores / self.mean_worker_cores
