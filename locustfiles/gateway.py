"""Locust users for gateway benchmarks: GET one path through the gateway with a fixed Host header.

Options come from the command line (or the web UI's form, or the runner's /swarm call), so nothing in
this file is edited per run:

    --host-header external.nginx   Host header the gateway routes on (Contour's HTTPProxy fqdn)
    --request-path /               path requested
    --user-rps 0                   requests per second per user; 0 = closed loop (no wait)
    --arrivals poisson             how paced users space their requests: poisson (exponential gaps, as
                                   many independent clients send), uniform (a fixed period, each user
                                   on its own phase) or synchronized (every user on shared clock ticks)
    --accept-encoding "gzip, deflate, br"
                                   sent by both users alike (a browser's, and FastHttpUser's default), so
                                   the gateway compresses for either; "identity" asks for no compression
    --new-connection               every request on a new connection (it sends Connection: close), so each
                                   pays a TCP accept and, over https://, a full TLS handshake

Two users send the same requests and report them alike (request type GET, name = the path):

    FastGatewayUser   Locust's FastHttpUser (geventhttpclient)
    LeanGatewayUser   the lean HTTP/1.1 client in lean_http.py: one keep-alive connection per user,
                      request bytes built once; several times the requests per generator core.
                      HTTP/1.1 only (no HTTP/2).

Pick a class on the command line, e.g. `locust -f locustfiles/gateway.py LeanGatewayUser`.
"""

from __future__ import annotations

import argparse
import math
import random
import time

from fine_timer import sleep_until
from lean_http import LeanHttpUser, PreparedRequest
from locust import events, task
from locust.contrib.fasthttp import FastHttpUser
from locust.env import Environment

# A paced user that falls further behind its schedule than this restarts the schedule instead of
# firing a burst to catch up.
MAX_SCHEDULE_LAG_S = 1.0
CONNECT_TIMEOUT_S = 5.0
NETWORK_TIMEOUT_S = 10.0
# Closed loop: requests a lean user sends per task run, so Locust's scheduler (task choice, wait,
# gevent.sleep(0)) runs once per batch; each request still yields while it waits for its answer.
CLOSED_LOOP_BATCH = 32
ARRIVALS = ("poisson", "uniform", "synchronized")
LEGACY_ARRIVALS = {"spread": "uniform"}  # the name runs before 2026-11-23 gave uniform spacing
DEFAULT_ACCEPT_ENCODING = "gzip, deflate, br"


def parsed_options(environment: Environment) -> argparse.Namespace:
    """The command line's (or the /swarm form's) options; Locust sets them before any user starts."""
    if environment.parsed_options is None:
        raise RuntimeError("Locust started these users without parsed options")
    return environment.parsed_options


def request_headers(options: argparse.Namespace) -> dict[str, str]:
    """The headers both users send besides their own User-Agent: Host and Accept-Encoding, and Connection:
    close with --new-connection (the gateway closes after each answer; the next request connects anew)."""
    headers = {"Host": options.host_header, "Accept-Encoding": options.accept_encoding or "identity"}
    if getattr(options, "new_connection", False):
        headers["Connection"] = "close"
    return headers


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
        "--new-connection",
        action="store_true",
        default=False,
        help="every request on a new connection (Connection: close): a TCP accept, over https a full TLS handshake",
    )
    group.add_argument(
        "--arrivals",
        choices=(*ARRIVALS, *LEGACY_ARRIVALS),
        default="poisson",
        help="request spacing of paced users: poisson (exponential gaps), uniform (fixed period, own phase) "
        "or synchronized (all users on shared clock ticks)",
    )


class PacedUser:
    """Mixin: an absolute schedule of `--user-rps` requests per second, or no wait at all when 0.

    Open loop: each request's start is scheduled in advance, and a request that takes longer than the gap
    to the next does not lower the rate: the next one starts at once (its latency counts from the time it
    was scheduled, see `scheduled_at`). The wait itself happens in `wait_time`, on fine_timer's timerfd, to
    the tens of microseconds (gevent.sleep on epoll ends on whole milliseconds: every user due within one
    would send at once), and Locust's own sleep after it is gevent.sleep(0). The schedule's gaps follow
    `--arrivals`:

    - `poisson` (the default): exponential gaps with mean 1/rate, each user independent, so the users
      together send a Poisson stream, as many independent clients do;
    - `uniform`: a fixed period, each user on its own random phase: a smooth stream;
    - `synchronized`: a fixed period with every user's schedule on the same wall-clock ticks, so all
      users of a rate fire together, on every worker: bursts.
    """

    environment: Environment  # provided by the Locust user class this is mixed into
    _schedule_next: float | None = None
    _schedule_key: tuple[float, str] = (0.0, "")
    scheduled_at: float | None = None  # time.monotonic() the current request was scheduled for

    def wait_time(self) -> float:
        options = parsed_options(self.environment)
        rate = float(options.user_rps or 0.0)
        if rate <= 0:
            self._schedule_next = self.scheduled_at = None
            return 0.0
        arrivals = getattr(options, "arrivals", "poisson")
        arrivals = LEGACY_ARRIVALS.get(arrivals, arrivals)
        now = time.monotonic()
        next_start = self._schedule_next
        if next_start is None or (rate, arrivals) != self._schedule_key or now - next_start > MAX_SCHEDULE_LAG_S:
            next_start = now + _first_delay(rate, arrivals)
        else:
            next_start += _gap(rate, arrivals)
        self._schedule_next, self._schedule_key = next_start, (rate, arrivals)
        self.scheduled_at = next_start
        sleep_until(next_start)  # Locust has the user in its waiting state here: a stop kills it as in a sleep
        return 0.0


def _gap(rate: float, arrivals: str) -> float:
    """Seconds between two requests of one user."""
    return random.expovariate(rate) if arrivals == "poisson" else 1.0 / rate


def _first_delay(rate: float, arrivals: str) -> float:
    """Seconds until a new schedule's first request: a random phase, or the next shared tick."""
    period = 1.0 / rate
    if arrivals == "poisson":
        return random.expovariate(rate)
    if arrivals == "uniform":
        return random.uniform(0.0, period)
    wall = time.time()
    return (math.floor(wall / period) + 1) * period - wall


class FastGatewayUser(PacedUser, FastHttpUser):
    """Locust's FastHttpUser (geventhttpclient) sending GET <path> with the gateway's Host header.

    Its response times are Locust's own, from the moment the request is sent; the lean user's count from
    the moment the schedule meant it to start.
    """

    connection_timeout = CONNECT_TIMEOUT_S
    network_timeout = NETWORK_TIMEOUT_S

    def default_host_header(self) -> str:
        """The gateway's Host header: over TLS also the SNI, which selects Envoy's filter chain for that name
        (the gateway's URL names an address, such as a Service's ClusterIP or 127.0.0.1, and an address is
        never sent as SNI)."""
        return str(parsed_options(self.environment).host_header)

    def on_start(self) -> None:
        options = parsed_options(self.environment)
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

    def default_host_header(self) -> str:
        """The gateway's Host header: over TLS also the SNI, which selects Envoy's filter chain for that name
        (the gateway's URL names an address, such as a Service's ClusterIP or 127.0.0.1, and an address is
        never sent as SNI)."""
        return str(parsed_options(self.environment).host_header)

    def on_start(self) -> None:
        options = parsed_options(self.environment)
        headers = request_headers(options)
        self._request: PreparedRequest = self.client.prepare(
            "GET", options.request_path, name=options.request_path, host_header=headers.pop("Host"), headers=headers
        )

    @task
    def get_pages(self) -> None:
        """One request when paced; a batch of CLOSED_LOOP_BATCH in the closed loop (`--user-rps 0`)."""
        send, request = self.client.send, self._request
        if parsed_options(self.environment).user_rps:
            send(request, self.scheduled_at)  # latency from the time the schedule meant it to start
            return
        for _ in range(CLOSED_LOOP_BATCH):
            send(request)
