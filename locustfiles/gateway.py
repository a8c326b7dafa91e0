"""Locust users for gateway benchmarks: GET one path through the gateway with a fixed Host header.

Options come from the command line (or the web UI's form, or the runner's /swarm call), so nothing in
this file is edited per run:

    --host-header external.nginx   Host header the gateway routes on (Contour's HTTPProxy fqdn)
    --request-path /               path requested
    --user-rps 0                   requests per second per user; 0 = closed loop (no wait)
    --arrivals synchronized        paced users fire on shared clock ticks (synchronized) or each on its
                                   own phase (spread)
    --accept-encoding "gzip, deflate, br"
                                   sent by both users alike (a browser's, and FastHttpUser's default), so
                                   the gateway compresses for either; "identity" asks for no compression

Two users send the same requests and report them alike (request type GET, name = the path):

    FastGatewayUser   Locust's FastHttpUser (geventhttpclient)
    LeanGatewayUser   the lean HTTP/1.1 client in lean_http.py: one keep-alive connection per user,
                      request bytes built once; several times the requests per generator core.
                      HTTP/1.1 only (no HTTP/2).

Pick a class on the command line, e.g. `locust -f locustfiles/gateway.py LeanGatewayUser`.
"""

from __future__ import annotations

import math
import random
import time

from lean_http import LeanHttpUser, PreparedRequest
from locust import events, task
from locust.contrib.fasthttp import FastHttpUser

# A paced user that falls further behind its schedule than this restarts the schedule instead of
# firing a burst to catch up.
MAX_SCHEDULE_LAG_S = 1.0
CONNECT_TIMEOUT_S = 5.0
NETWORK_TIMEOUT_S = 10.0
# Closed loop: requests a lean user sends per task run, so Locust's scheduler (task choice, wait,
# gevent.sleep(0)) runs once per batch; each request still yields while it waits for its answer.
CLOSED_LOOP_BATCH = 32
ARRIVALS = ("synchronized", "spread")
DEFAULT_ACCEPT_ENCODING = "gzip, deflate, br"


def request_headers(options) -> dict[str, str]:
    """The headers both users send besides their own User-Agent: Host and Accept-Encoding."""
    return {"Host": options.host_header, "Accept-Encoding": options.accept_encoding or "identity"}


@events.init_command_line_parser.add_listener
def _add_options(parser) -> None:
    group = parser.add_argument_group("gateway-sizer")
    group.add_argument("--host-header", default="external.nginx", help="Host header sent to the gateway")
    group.add_argument("--request-path", default="/", help="path requested through the gateway")
    group.add_argument(
        "--user-rps", type=float, default=0.0, help="requests per second per user (0: closed loop, no wait)"
    )
    group.add_argument(
        "--accept-encoding",
        default=DEFAULT_ACCEPT_ENCODING,
        help="Accept-Encoding header of every request (identity: ask for no compression)",
    )
    group.add_argument(
        "--arrivals",
        choices=ARRIVALS,
        default="synchronized",
        help="paced users fire together on clock ticks (synchronized) or each on its own phase (spread)",
    )


class PacedUser:
    """Mixin: an absolute schedule of `--user-rps` requests per second, or no wait at all when 0.

    Unlike `constant_throughput`, a request that takes longer than the period does not lower the rate:
    the next one starts at once, so the offered load holds until the server is saturated.

    `--arrivals synchronized` (the default) starts every user's schedule on the same wall-clock tick,
    so all users of a rate fire together, on every worker: Envoy then finds requests waiting and handles
    them back to back, as a gateway busy most of the time does. `spread` gives each user its own random
    phase, a smooth stream: behind a CPU limit far below a core, Envoy then wakes for nearly every
    request and pays a per-wake-up cost that a busy production gateway does not.
    """

    _schedule_next: float | None = None
    _schedule_key: tuple[float, str] = (0.0, "")

    def wait_time(self) -> float:
        options = self.environment.parsed_options
        rate = float(options.user_rps or 0.0)
        if rate <= 0:
            self._schedule_next = None
            return 0.0
        period, arrivals = 1.0 / rate, getattr(options, "arrivals", "synchronized")
        now = time.monotonic()
        next_start = self._schedule_next
        if next_start is None or (period, arrivals) != self._schedule_key or now - next_start > MAX_SCHEDULE_LAG_S:
            next_start = now + _first_delay(period, arrivals)
        else:
            next_start += period
        self._schedule_next, self._schedule_key = next_start, (period, arrivals)
        return max(0.0, next_start - now)


def _first_delay(period: float, arrivals: str) -> float:
    """Seconds until a new schedule's first request: the next shared tick, or a random phase."""
    if arrivals == "spread":
        return random.uniform(0.0, period)
    wall = time.time()
    return (math.floor(wall / period) + 1) * period - wall


class FastGatewayUser(PacedUser, FastHttpUser):
    """Locust's FastHttpUser (geventhttpclient) sending GET <path> with the gateway's Host header."""

    connection_timeout = CONNECT_TIMEOUT_S
    network_timeout = NETWORK_TIMEOUT_S

    def on_start(self) -> None:
        options = self.environment.parsed_options
        self._path = options.request_path
        self._headers = request_headers(options)

    @task
    def get_page(self) -> None:
        self.client.get(self._path, headers=self._headers, name=self._path)


class LeanGatewayUser(PacedUser, LeanHttpUser):
    """The lean HTTP/1.1 client (lean_http.py) sending GET <path> with the gateway's Host header.

    HTTP/1.1 over one persistent connection per user, optionally TLS; HTTP/2 is out of scope.
    """

    connection_timeout = CONNECT_TIMEOUT_S
    network_timeout = NETWORK_TIMEOUT_S

    def on_start(self) -> None:
        options = self.environment.parsed_options
        headers = request_headers(options)
        self._request: PreparedRequest = self.client.prepare(
            "GET", options.request_path, name=options.request_path, host_header=headers.pop("Host"), headers=headers
        )

    @task
    def get_pages(self) -> None:
        """One request when paced; a batch of CLOSED_LOOP_BATCH in the closed loop (`--user-rps 0`)."""
        send, request = self.client.send, self._request
        if self.environment.parsed_options.user_rps:
            send(request)
            return
        for _ in range(CLOSED_LOOP_BATCH):
            send(request)
