"""Extension for the master and the workers: who may drive this Locust, and where its load may go.

A load generator left in a shared cluster must not become anyone's: any pod that reaches the master's web API
could otherwise `POST /swarm` with any `host` and point the workers anywhere. Two checks, each on when the
runner sets its variable in the process's environment (where no request can change it):

- `GATEWAY_SIZER_TARGETS`: comma-separated URLs, the only origins (scheme, host, port) this Locust sends to.
  A worker refuses a spawn for any other host: it logs why and starts no user. The master answers 403 to a
  `/swarm` whose `host` is another, and to a POST whose JSON `url` or `host` is another (the gateway-sizer
  routes; Locust's `/user`).
- `GATEWAY_SIZER_TOKEN`: every request to the master's web API other than GET and HEAD must carry it in the
  `X-Gateway-Sizer-Token` header, else 403. The runner sends it; a person who opens the web UI through
  `kubectl port-forward` reads everything and starts nothing.

- `GATEWAY_SIZER_WORKER_HOST`: the host name of the run's workers (the kubernetes platform gives its worker pods
  one of their own, made at random per run). The master drops every message from a worker whose Locust id
  (`<host name>_<hex>`) has another host name, or that names another worker as its sender: a stranger that reaches
  the master's worker port (5557) gets no users and adds nothing to a window. A NetworkPolicy closes that port to
  all but the run's workers where the cluster's CNI enforces one; this is the check that holds where it does not.

Unset, a check is off (Locust started by hand). Load this file next to the locustfile on every process:
`locust -f locustfiles/gateway.py,locustfiles/gateway_sizer_stats.py,locustfiles/gateway_sizer_guard.py`.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from flask import request
from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

TARGETS_ENV = "GATEWAY_SIZER_TARGETS"
TOKEN_ENV = "GATEWAY_SIZER_TOKEN"
WORKER_HOST_ENV = "GATEWAY_SIZER_WORKER_HOST"
TOKEN_HEADER = "X-Gateway-Sizer-Token"
READING = ("GET", "HEAD", "OPTIONS")
DEFAULT_PORTS = {"http": 80, "https": 443}

_log = logging.getLogger("gateway-sizer")

Origin = tuple[str, str, int]


def origin(url: str) -> Origin | None:
    """(scheme, host, port) of an http(s) URL, the port filled in from the scheme; None for anything else."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def allowed_origins(value: str | None) -> list[Origin]:
    """The origins of a comma-separated list of URLs (the environment variable's value)."""
    return [o for url in (value or "").split(",") if url.strip() and (o := origin(url)) is not None]


def permitted(url: str | None, allowed: Sequence[Origin]) -> bool:
    """Whether load may go to `url`: always when no targets are set, else only to one of them."""
    return not allowed or (url is not None and origin(url) in allowed)


def refusal(url: object, allowed: Sequence[Origin]) -> str:
    targets = ", ".join(f"{s}://{h}:{p}" for s, h, p in allowed)
    return f"refused: this Locust sends load only to its gateway-sizer run's targets ({targets}), not to {url!r}"


def _json_body() -> object:
    """The request's body parsed as JSON whatever its Content-Type, as Locust's `/user` parses it
    (`json.loads(request.data)`); None when it is not JSON (then no route acts on it)."""
    try:
        return json.loads(request.get_data(cache=True))
    except ValueError:  # not JSON (UnicodeDecodeError is a ValueError too)
        return None


def _requested_urls() -> list[object]:
    """The targets a POST names: /swarm's form field `host`; a JSON body's `url` (the gateway-sizer routes) and
    `host` (Locust's /user, a user class's settings), read whatever the body's Content-Type says."""
    if request.path == "/swarm":
        return [host] if (host := request.form.get("host")) else []
    body = _json_body()
    return [body[key] for key in ("url", "host") if key in body] if isinstance(body, dict) else []


def _holds_token(token: str) -> bool:
    """Whether the request carries `token`, compared in constant time as bytes (a header with any character,
    non-ASCII included, is a plain mismatch)."""
    given = request.headers.get(TOKEN_HEADER, "")
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass"))


def _guard_master(web_ui: Any, allowed: Sequence[Origin], token: str | None) -> None:
    @web_ui.app.before_request
    def _check() -> tuple[dict[str, Any], int] | None:
        if request.method in READING:
            return None
        if token is not None and not _holds_token(token):
            message = f"refused: this Locust takes commands from its gateway-sizer run only ({TOKEN_HEADER})"
            return {"success": False, "message": message}, 403
        for url in _requested_urls():
            if not (isinstance(url, str) and permitted(url, allowed)):
                _log.warning(refusal(url, allowed))
                return {"success": False, "message": refusal(url, allowed)}, 403
        return None


def _guard_worker(environment: Environment, runner: WorkerRunner, allowed: Sequence[Origin]) -> None:
    """Wrap the worker's spawn: Locust has no hook that can veto one, and the host arrives with it."""
    spawn = runner.start_worker

    def guarded_spawn(user_classes_count: dict[str, int], **kwargs: Any) -> None:
        hosts = [environment.host] if environment.host else []
        hosts += [user.host for user in runner.user_classes if user.host and not environment.host]
        if foreign := [host for host in hosts if not permitted(host, allowed)]:
            _log.error(refusal(foreign[0], allowed))
            return
        spawn(user_classes_count, **kwargs)

    runner.start_worker = guarded_spawn  # type: ignore[method-assign]


def worker_host(client_id: str) -> str:
    """The host name in a Locust worker's id, `<host name>_<32 hex digits>`."""
    return client_id.rsplit("_", 1)[0]


def _guard_worker_port(runner: MasterRunner, host: str) -> None:
    """Wrap the master's receive: Locust takes a worker's `client_ready` (and hands it users) and its `stats`
    from any sender; only the run's workers get through."""
    receive = runner.server.recv_from_client
    dropped: set[str] = set()

    def from_the_runs_workers() -> tuple[str, Any]:
        while True:
            client_id, message = receive()
            if worker_host(client_id) == host and message.node_id == client_id:
                return client_id, message
            if client_id not in dropped:
                dropped.add(client_id)
                _log.warning("dropped the messages of Locust worker %s: not one of this run's workers (%s)",
                             client_id, host)  # fmt: skip

    runner.server.recv_from_client = from_the_runs_workers  # type: ignore[method-assign]


@events.init.add_listener
def _install(environment: Environment, runner: Any = None, web_ui: Any = None, **_kwargs: Any) -> None:
    allowed = allowed_origins(os.environ.get(TARGETS_ENV))
    token = os.environ.get(TOKEN_ENV) or None
    if web_ui is not None and (allowed or token):
        _guard_master(web_ui, allowed, token)
    if isinstance(runner, WorkerRunner) and allowed:
        _guard_worker(environment, runner, allowed)
    if isinstance(runner, MasterRunner) and (host := os.environ.get(WORKER_HOST_ENV)):
        _guard_worker_port(runner, host)
