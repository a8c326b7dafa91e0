"""Master-side extension: `GET /gateway-sizer/snapshot` returns Locust's aggregated counters per second.

The web UI's `/stats/requests` only offers totals and a rolling 10 s rate. A sweep needs the requests,
failures and latency histogram of an exact measuring window, so this route exposes what Locust keeps
internally: requests and failures per second (keyed by the second the request finished on the worker)
and the cumulative response-time histogram. Load this file next to the locustfile on the master:
`locust -f locustfiles/gateway.py,locustfiles/gateway_sizer_stats.py --master`.
"""

from __future__ import annotations

import time

from locust import events
from locust.runners import MasterRunner

SNAPSHOT_ROUTE = "/gateway-sizer/snapshot"
KEEP_SECONDS = 900


@events.init.add_listener
def _register_snapshot_route(environment, runner=None, web_ui=None, **_kwargs) -> None:
    if web_ui is None:
        return

    @web_ui.app.route(SNAPSHOT_ROUTE)
    def snapshot():
        now = time.time()
        oldest = int(now) - KEEP_SECONDS
        active = environment.runner
        if active is None:
            return {"time": now, "state": "missing"}
        total = active.stats.total
        workers = []
        if isinstance(active, MasterRunner):
            workers = [
                {"id": w.id, "state": w.state, "user_count": w.user_count, "cpu_usage": w.cpu_usage}
                for w in active.clients.values()
            ]
        return {
            "time": now,
            "state": active.state,
            "user_count": active.user_count,
            "num_requests": total.num_requests,
            "num_failures": total.num_failures,
            "requests_per_second": {str(t): n for t, n in total.num_reqs_per_sec.items() if t >= oldest},
            "failures_per_second": {str(t): n for t, n in total.num_fail_per_sec.items() if t >= oldest},
            "response_times_ms": {str(ms): n for ms, n in total.response_times.items()},
            "workers": workers,
            "errors": [
                {"method": e.method, "name": e.name, "error": str(e.error), "occurrences": e.occurrences}
                for e in list(active.stats.errors.values())[:20]
            ],
        }
