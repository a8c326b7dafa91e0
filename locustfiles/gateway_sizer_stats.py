"""Master-side extension: the per-window counters a sweep reads, and a dead-man switch on the load.

- `GET /gateway-sizer/snapshot` returns Locust's aggregated counters per second. The web UI's
  `/stats/requests` only offers totals and a rolling 10 s rate; a sweep needs the requests, failures and
  latency histogram of an exact measuring window, so this route exposes what Locust keeps internally:
  requests and failures per second (keyed by the second the request finished on the worker), the
  cumulative response-time histogram, and when this master started (a restarted master's counters
  start again from zero, so a window spanning a restart is discarded).
- `POST /gateway-sizer/heartbeat` (JSON `{"timeout_s": 15, "state": {...}}`) is the runner saying it is
  alive, with what it is measuring. Once a heartbeat has come, a watcher stops the load when none has
  come for `timeout_s`: a runner killed hard (SIGKILL, out of memory, a lost node) leaves no load running.
- `GET /gateway-sizer/state` returns the last state the runner sent; the web UI shows it in two tabs,
  "Gateway sizer" (the configuration being measured, the knee and capacity so far, its status) and
  "Sizer windows" (each window: offered and served RPS, Envoy's CPU against its limit, p99, guards).
- `POST /gateway-sizer/connections` (JSON `{"count": N, "url": ..., "host_header": ..., "path": "/",
  "refresh_s": 25, "open_rate": 1000}`) holds N idle keep-alive connections to the gateway (count 0
  releases them); `GET` returns held, opened, failed, closed by peer, last error (connection_holder.py).
- `POST /gateway-sizer/probe` (JSON `{"url": ..., "host_header": ..., "path": "/", "timeout_s": 60}`) polls
  until the first 2xx; `GET` returns its wall-clock time and the number of polls (route_probe.py).
The dead-man switch also releases held connections and stops a probe.

Loaded on the workers too, it makes them send their counters every WORKER_REPORT_INTERVAL_S (1 s) instead of
Locust's 3 s, so a window's figures are complete on the master that much sooner after it ends.

Load this file next to the locustfile on the master and the workers:
`locust -f locustfiles/gateway.py,locustfiles/gateway_sizer_stats.py --master`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import gevent
import locust.runners
from connection_holder import ConnectionHolder, HoldError, HoldRequest
from fine_timer import timer_in_use
from flask import Response, request
from locust import events
from locust.env import Environment
from locust.runners import STATE_RUNNING, STATE_SPAWNING, MasterRunner
from route_probe import ProbeError, ProbeRequest, RouteProbe

SNAPSHOT_ROUTE = "/gateway-sizer/snapshot"
HEARTBEAT_ROUTE = "/gateway-sizer/heartbeat"
STATE_ROUTE = "/gateway-sizer/state"
CONNECTIONS_ROUTE = "/gateway-sizer/connections"
PROBE_ROUTE = "/gateway-sizer/probe"
KEEP_SECONDS = 900
WATCH_INTERVAL_S = 1.0
MAX_TIMEOUT_S = 600.0
STARTED_AT = time.time()
# How often a worker sends its counters to the master (runner.locust.REPORT_LAG_S waits one interval and a
# half). Locust has no option for it: its stats reporter reads this module global before every sleep.
WORKER_REPORT_INTERVAL_S = 1.0
locust.runners.WORKER_REPORT_INTERVAL = WORKER_REPORT_INTERVAL_S

_log = logging.getLogger("gateway-sizer")


class DeadMansSwitch:
    """The runner's last heartbeat and what it said; stops the load when the runner falls silent."""

    def __init__(self) -> None:
        self.last: float | None = None  # time.monotonic() of the last heartbeat; None: never armed
        self.timeout_s = 0.0
        self.state: dict[str, Any] = {}
        self.tripped = 0

    def beat(self, timeout_s: float, state: dict[str, Any]) -> None:
        self.last, self.timeout_s, self.state = time.monotonic(), min(max(timeout_s, 1.0), MAX_TIMEOUT_S), state

    def silent_for(self) -> float | None:
        return None if self.last is None else time.monotonic() - self.last

    def watch(self, environment: Environment) -> None:
        while True:
            gevent.sleep(WATCH_INTERVAL_S)
            silent, runner = self.silent_for(), environment.runner
            if silent is None or silent <= self.timeout_s:
                continue
            stopped = False
            if runner is not None and runner.state in (STATE_SPAWNING, STATE_RUNNING):
                runner.stop()
                stopped = True
            stopped = HOLDER.release() or stopped
            stopped = PROBE.stop() or stopped
            if stopped:
                _log.warning("gateway-sizer runner silent for %.0f s: stopped the load and held connections", silent)
                self.tripped += 1
            self.last = None  # disarmed until the runner (or a new one) beats again


SWITCH = DeadMansSwitch()
HOLDER = ConnectionHolder()
PROBE = RouteProbe()
RUN_TAB, WINDOWS_TAB = "gateway-sizer", "sizer-windows"
TABS = [{"title": "Gateway sizer", "key": RUN_TAB}, {"title": "Sizer windows", "key": WINDOWS_TAB}]
TABLES = [
    {"key": RUN_TAB, "structure": [{"key": "item", "title": "What"}, {"key": "value", "title": "Now"}]},
    {
        "key": WINDOWS_TAB,
        "structure": [
            {"key": "window", "title": "Window"},
            {"key": "offered", "title": "Offered RPS"},
            {"key": "rps", "title": "RPS"},
            {"key": "envoy", "title": "Envoy RPS"},
            {"key": "cpu", "title": "Envoy CPU (of its limit)"},
            {"key": "p99", "title": "p99 ms"},
            {"key": "round", "title": "Round"},
            {"key": "regime", "title": "Regime"},
            {"key": "guards", "title": "Guards"},
        ],
    },
]


def _rate(value: Any) -> str:
    return "-" if value is None else f"{float(value):,.0f}"


def _run_rows(state: dict[str, Any], silent_for: float | None) -> list[dict[str, str]]:
    """The tab's key/value rows: what the runner is measuring now and what it has found so far."""
    if not state:
        return [{"item": "Runner", "value": "no gateway-sizer run is sending its state"}]
    knee, capacity = state.get("knee") or {}, state.get("capacity") or {}
    interval = f" (95% CI {_rate(knee.get('low'))}-{_rate(knee.get('high'))})" if knee.get("low") else ""
    phase = f"{state.get('phase', '-')} at {_rate(state.get('offered_rps'))} RPS by {state.get('users', '-')} users"
    rows = [
        ("Run", f"{state.get('run_id', '-')} ({state.get('results', '')})"),
        ("Round", f"{state['round']} of {state.get('rounds', '-')}" if state.get("round") else "-"),
        (
            "Configuration",
            f"{state.get('position', '-')}/{state.get('configurations', '-')}: {state.get('configuration', '-')}",
        ),
        (
            "Envoy CPU limit",
            f"{state.get('envoy_cpu_cores', '-')} cores; knee at {float(state.get('threshold', 0.9)):.0%} of it",
        ),
        ("Now", phase),
        ("Knee so far", f"{_rate(knee.get('rps'))} RPS{interval}" if knee else "not yet"),
        ("Capacity so far", f"{_rate(capacity.get('rps'))} RPS" if capacity else "not yet"),
        ("Status", str(state.get("status", "-")) + (f": {state['reason']}" if state.get("reason") else "")),
        ("Runner last heard", "never" if silent_for is None else f"{silent_for:.0f} s ago"),
    ]
    return [{"item": item, "value": value} for item, value in rows]


def _window_rows(state: dict[str, Any]) -> list[dict[str, str]]:
    rows = []
    for window in reversed(state.get("windows", [])):
        low, mean, high = window.get("cpu") or (0, 0, 0)
        rows.append({
            "window": str(window.get("index")),
            "offered": _rate(window.get("offered_rps")),
            "rps": _rate(window.get("rps")),
            "envoy": _rate(window.get("envoy_rps")),
            "cpu": f"{mean:.0%} ({low:.0%}-{high:.0%})",
            "p99": _rate(window.get("p99_ms")),
            "round": str(window.get("round") or "-"),
            "regime": str(window.get("regime") or "-"),
            "guards": "; ".join(window.get("guards") or []) or "-",
        })  # fmt: skip
    return rows


def _snapshot(environment: Environment) -> dict[str, Any]:
    now = time.time()
    oldest = int(now) - KEEP_SECONDS
    active = environment.runner
    if active is None:
        return {"time": now, "state": "missing", "started_at": STARTED_AT}
    total = active.stats.total
    workers = []
    if isinstance(active, MasterRunner):
        workers = [
            {"id": w.id, "state": w.state, "user_count": w.user_count, "cpu_usage": w.cpu_usage}
            for w in active.clients.values()
        ]
    return {
        "time": now,
        "started_at": STARTED_AT,
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


@events.init.add_listener
def _log_loop(environment: Environment, runner: Any = None, **_kwargs: Any) -> None:
    """A worker names its gevent loop backend and send timer in its log (whatever the log level: Locust runs at
    WARNING): epoll with gevent.sleep sends in millisecond clusters (runner/locust/_command.py)."""
    if runner is not None and not isinstance(runner, MasterRunner):
        print(f"gateway-sizer: gevent loop backend {gevent.get_hub().loop.backend}, send timer {timer_in_use()}",
              file=sys.stderr, flush=True)  # fmt: skip


@events.init.add_listener
def _register_routes(environment: Environment, runner: Any = None, web_ui: Any = None, **_kwargs: Any) -> None:
    if web_ui is None:
        return

    @web_ui.app.route(SNAPSHOT_ROUTE)
    def snapshot() -> dict[str, Any]:
        return _snapshot(environment)

    @web_ui.app.route(HEARTBEAT_ROUTE, methods=["POST"])
    def heartbeat() -> tuple[dict[str, Any], int]:
        body = request.get_json(silent=True)
        if not isinstance(body, dict) or not isinstance(body.get("timeout_s"), int | float):
            return {"success": False, "message": 'expected JSON {"timeout_s": seconds, "state": {...}}'}, 400
        state = body.get("state")
        SWITCH.beat(float(body["timeout_s"]), state if isinstance(state, dict) else {})
        return {"success": True, "tripped": SWITCH.tripped}, 200

    @web_ui.app.route(STATE_ROUTE)
    def state() -> dict[str, Any]:
        return {"state": SWITCH.state, "silent_for_s": SWITCH.silent_for(), "tripped": SWITCH.tripped}

    @web_ui.app.route(CONNECTIONS_ROUTE, methods=["GET", "POST"])
    def connections() -> tuple[dict[str, Any], int]:
        if request.method == "POST":
            try:
                HOLDER.hold(HoldRequest.from_json(request.get_json(silent=True)))
            except HoldError as error:
                return {"success": False, "message": str(error)}, 400
        return {"success": True, **HOLDER.status()}, 200

    @web_ui.app.route(PROBE_ROUTE, methods=["GET", "POST"])
    def probe() -> tuple[dict[str, Any], int]:
        if request.method == "POST":
            try:
                PROBE.start(ProbeRequest.from_json(request.get_json(silent=True)))
            except ProbeError as error:
                return {"success": False, "message": str(error)}, 400
        return {"success": True, **PROBE.result()}, 200

    web_ui.template_args["extended_tabs"] = TABS
    web_ui.template_args["extended_tables"] = TABLES

    @web_ui.app.after_request
    def _extend_stats(response: Response) -> Response:
        """The web UI polls /stats/requests every 2 s; its extended_stats fill the two tabs."""
        if request.path == "/stats/requests" and response.is_json:
            data = response.get_json()
            data["extended_stats"] = [
                {"key": RUN_TAB, "data": _run_rows(SWITCH.state, SWITCH.silent_for())},
                {"key": WINDOWS_TAB, "data": _window_rows(SWITCH.state)},
            ]
            response.set_data(json.dumps(data))
        return response

    gevent.spawn(SWITCH.watch, environment)
