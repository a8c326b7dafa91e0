"""Envoy as Contour programs it for one HTTPProxy: a listener, a virtual host, round robin to nginx.

The bootstrap mirrors what Contour sends over xDS for `virtualhost.fqdn: external.nginx` routing `/` to
the `nginx` Service: an `ingress_http` listener (Contour's stat prefix, so the same PromQL works on both
platforms), a virtual host matched on the Host header, and a cluster named the way Contour names it.
Benchmark-safe: circuit breakers that never queue requests and no request-id generation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

STAT_PREFIX = "ingress_http"
CLUSTER_NAME = "gateway-loadtest/nginx/80/da39a3ee5e"
UNLIMITED = 1_000_000_000  # circuit-breaker thresholds high enough to never queue or reject
CONNECT_TIMEOUT = "2s"
# Only the stats the sweep reads, so a 1 s scrape costs Envoy (inside its CPU limit) almost nothing.
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
SCRAPE_FILTER = r"^(http\.ingress_http\.downstream_(rq_total|rq_[0-9]xx|cx_active)|server\.(live|uptime))$"


@dataclass(frozen=True)
class EnvoyLayout:
    """Addresses Envoy listens on and sends to."""

    listen_port: int
    admin_port: int
    upstream_ports: tuple[int, ...]
    host_header: str = "external.nginx"
    address: str = "127.0.0.1"


def _circuit_breakers() -> dict[str, Any]:
    limits = {
        "max_connections": UNLIMITED,
        "max_pending_requests": UNLIMITED,
        "max_requests": UNLIMITED,
        "max_retries": UNLIMITED,
    }
    return {"thresholds": [{"priority": "DEFAULT", **limits}, {"priority": "HIGH", **limits}]}


def bootstrap(layout: EnvoyLayout) -> dict[str, Any]:
    """The static bootstrap for `layout`, as data."""
    socket = {"address": layout.address}
    router = {
        "name": "envoy.filters.http.router",
        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
    }
    manager = {
        "@type": HCM_TYPE,
        "stat_prefix": STAT_PREFIX,
        "generate_request_id": False,
        "use_remote_address": True,
        "normalize_path": True,
        "common_http_protocol_options": {"idle_timeout": "60s"},
        "http_filters": [router],
        "route_config": {
            "name": STAT_PREFIX,
            "virtual_hosts": [
                {
                    "name": layout.host_header,
                    "domains": [layout.host_header, f"{layout.host_header}:*"],
                    "routes": [{"match": {"prefix": "/"}, "route": {"cluster": CLUSTER_NAME}}],
                }
            ],
        },
    }
    endpoints = [
        {"endpoint": {"address": {"socket_address": {**socket, "port_value": port}}}} for port in layout.upstream_ports
    ]
    return {
        "node": {"id": "gateway-sizer-local", "cluster": "gateway-sizer"},
        "admin": {"address": {"socket_address": {**socket, "port_value": layout.admin_port}}},
        "static_resources": {
            "listeners": [
                {
                    "name": STAT_PREFIX,
                    "address": {"socket_address": {**socket, "port_value": layout.listen_port}},
                    "per_connection_buffer_limit_bytes": 32768,
                    "filter_chains": [
                        {
                            "filters": [
                                {"name": "envoy.filters.network.http_connection_manager", "typed_config": manager}
                            ]
                        }
                    ],
                }
            ],
            "clusters": [
                {
                    "name": CLUSTER_NAME,
                    "type": "STATIC",
                    "connect_timeout": CONNECT_TIMEOUT,
                    "lb_policy": "ROUND_ROBIN",
                    "per_connection_buffer_limit_bytes": 32768,
                    "circuit_breakers": _circuit_breakers(),
                    "load_assignment": {"cluster_name": CLUSTER_NAME, "endpoints": [{"lb_endpoints": endpoints}]},
                }
            ],
        },
    }


def write_bootstrap(layout: EnvoyLayout, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(bootstrap(layout), sort_keys=False))
    return path


def command(binary: Path, config: Path, concurrency: int) -> list[str]:
    """Envoy's command line: no hot restart (no shared memory to leak), warnings only."""
    return [
        str(binary),
        "-c",
        str(config),
        "--concurrency",
        str(concurrency),
        "--disable-hot-restart",
        "--log-level",
        "warn",
    ]
