"""Run the lean client against a real server in a gevent process; print every request event as JSON.

The test process stays unpatched (other tests share it), so each scenario runs here, in a child that has
tests/ and locustfiles/ on its path (support.lean_client.run_driver runs it so):

    PYTHONPATH=tests:locustfiles python -m support.lean_driver URL \
        '[{"path": "/", "count": 3}, {"pause_s": 2}, {"method": "HEAD", "path": "/"}]'

Each event is what Locust's `request` event received: request_type, name, response_time,
response_length, exception (its type name and text) and the status `send` returned.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import gevent
import locust  # monkey-patches the standard library before anything else uses it
from lean_http import LeanHttpClient  # locustfiles/lean_http.py, as a locustfile imports it


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument(
        "steps", help="JSON list of {method, path, count, headers, name, host, convenience} or {pause_s}"
    )
    parser.add_argument("--host-header")
    parser.add_argument("--read-timeout", type=float, default=5.0)
    parser.add_argument("--connect-timeout", type=float, default=5.0)
    parser.add_argument("--verify-tls", action="store_true")
    args = parser.parse_args()

    events: list[dict[str, Any]] = []

    def record(request_type: str, name: str, response_time: float, response_length: int,
               exception: BaseException | None, **kwargs: Any) -> None:  # fmt: skip
        events.append({
            "request_type": request_type, "name": name, "response_time": response_time,
            "response_length": response_length, "url": kwargs.get("url"),
            "exception": None if exception is None else type(exception).__name__,
            "error": None if exception is None else str(exception),
        })  # fmt: skip

    locust.events.request.add_listener(record)
    client = LeanHttpClient(
        args.url, locust.events.request, connect_timeout_s=args.connect_timeout, read_timeout_s=args.read_timeout,
        verify_tls=args.verify_tls, host_header=args.host_header,
    )  # fmt: skip
    for step in json.loads(args.steps):
        if "pause_s" in step:
            gevent.sleep(step["pause_s"])
            continue
        method, path = step.get("method", "GET"), step.get("path", "/")
        name, headers = step.get("name"), step.get("headers")
        request = client.prepare(method, path, name=name, headers=headers, host_header=step.get("host"))
        for _ in range(step.get("count", 1)):
            if step.get("convenience"):  # LeanHttpClient.request: prepared on first use, then cached
                status = client.request(method, path, name=name, headers=headers)
            else:
                status = client.send(request)
            events[-1]["status"] = status
    client.close()
    print(json.dumps(events))


if __name__ == "__main__":
    main()
