"""What one measuring window saw of one Envoy pod of the fleet. Pure data.

A window measures every Envoy pod the platform runs for the configuration (one `PodWindow` each, in
runner.model's `Step.pods`); the window's own utilization is its busiest pod's, and its RPS the fleet's.
"""

from __future__ import annotations

from runner.records import Frozen


class PodWindow(Frozen):
    """One Envoy pod in one window: its CPU against its own limit, its CFS throttling, the requests and new
    connections its own counters took, its active connections, and (where the platform reads threads) its
    worker threads.

    `rps` is the pod's share of the window's RPS: the client's rate times the pod's share of Envoy's own
    request counts, so that one pod's rate is the window's. `hottest_worker_share` is the busiest worker
    thread's CPU over what one thread can use under the pod's limit (one core, or the limit when it is less).
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

    @property
    def worker_spread(self) -> float | None:
        """The hottest worker thread's CPU over the mean worker's (1.0: the threads share the work evenly)."""
        if self.hottest_worker_cores is None or not self.mean_worker_cores:
            return None
        return self.hottest_worker_cores / self.mean_worker_cores
