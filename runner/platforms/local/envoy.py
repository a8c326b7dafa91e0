"""Envoy as Contour v1.32 programs it for one HTTPProxy: a listener, a virtual host, round robin to nginx.

The bootstrap mirrors what Contour sends over xDS for `virtualhost.fqdn: external.nginx` routing `/` to
the `nginx` Service, as read from a Contour-managed Envoy's config_dump: the `ingress_http` listener with
Contour's TCP keep-alive options, its connection-manager settings and its HTTP filter chain (gzip
compressor, gRPC-Web, gRPC stats, CORS, local rate limit, Lua and RBAC placeholders, router), a virtual
host matched on the Host header, and the cluster named the way Contour names it. Two deliberate,
benchmark-safe differences: circuit breakers that never queue requests, and no request-id generation.

With a certificate (the TLS traffic profiles), the bootstrap also has the `ingress_https` listener Contour
programs for `virtualhost.tls.secretName`: a TLS inspector, one filter chain matched on the SNI, Contour's
TLS parameters and ciphers, the certificate as an SDS secret (here a static one), and in front of the HTTP
filters the Lua filter that answers 421 to a request whose Host is not the SNI's virtual host.

For the memory model the layout may add `extra_routes` virtual hosts (`host-<i>.nginx`, each routing `/` to
the same cluster; Contour puts every non-TLS virtual host into the one `ingress_http` RouteConfiguration),
and overload-manager settings as `contour bootstrap --overload-max-heap` and `--overload-downstream-max-conn`
write them.
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
IDLE_TIMEOUT_S = 60.0  # Contour's default connection idle timeout
HCM_TYPE = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
# Only the stats the sweep reads, so a 1 s scrape costs Envoy (inside its CPU limit) almost nothing.
SCRAPE_FILTER = (
    r"^(http\.ingress_https?\.downstream_(rq_total|rq_[0-9]xx|cx_total|cx_active)"
    r"|server\.(live|uptime|memory_allocated|memory_heap_size|memory_physical_size))$"
)
EXTRA_ROUTE_HOST = "host-{index}.nginx"  # the memory model's extra virtual hosts: names and domains
# Contour's overload manager (internal/envoy/v3/bootstrap.go): refresh every 250 ms; with a heap limit,
# shrink the heap at 95% of it and stop accepting requests at 98%.
OVERLOAD_REFRESH = "0.25s"
SHRINK_HEAP_AT = 0.95
STOP_REQUESTS_AT = 0.98
_EXT = "type.googleapis.com/envoy.extensions"
COMPRESSED_TYPES = [
    "text/html",
    "text/plain",
    "text/css",
    "application/javascript",
    "application/x-javascript",
    "text/javascript",
    "text/x-javascript",
    "text/ecmascript",
    "text/js",
    "text/jscript",
    "text/x-js",
    "application/ecmascript",
    "application/x-json",
    "application/xml",
    "application/json",
    "image/svg+xml",
    "text/xml",
    "application/xhtml+xml",
    "application/grpc-web",
    "application/grpc-web+proto",
    "application/grpc-web+json",
    "application/grpc-web+thrift",
    "application/grpc-web-text",
    "application/grpc-web-text+proto",
    "application/grpc-web-text+thrift",
]
# Contour's default HTTP filter chain for an HTTPProxy listener (its per-route features stay inert).
HTTP_FILTERS: list[dict[str, Any]] = [
    {
        "name": "envoy.filters.http.compressor",
        "typed_config": {
            "@type": f"{_EXT}.filters.http.compressor.v3.Compressor",
            "compressor_library": {
                "name": "gzip",
                "typed_config": {"@type": f"{_EXT}.compression.gzip.compressor.v3.Gzip"},
            },
            "response_direction_config": {"common_config": {"content_type": COMPRESSED_TYPES}},
        },
    },
    {"name": "envoy.filters.http.grpc_web", "typed_config": {"@type": f"{_EXT}.filters.http.grpc_web.v3.GrpcWeb"}},
    {
        "name": "envoy.filters.http.grpc_stats",
        "typed_config": {
            "@type": f"{_EXT}.filters.http.grpc_stats.v3.FilterConfig",
            "emit_filter_state": True,
            "enable_upstream_stats": True,
        },
    },
    {"name": "envoy.filters.http.cors", "typed_config": {"@type": f"{_EXT}.filters.http.cors.v3.Cors"}},
    {
        "name": "envoy.filters.http.local_ratelimit",
        "typed_config": {"@type": f"{_EXT}.filters.http.local_ratelimit.v3.LocalRateLimit", "stat_prefix": "http"},
    },
    {
        "name": "envoy.filters.http.lua",
        "typed_config": {
            "@type": f"{_EXT}.filters.http.lua.v3.Lua",
            "default_source_code": {"inline_string": "-- Placeholder for per-Route or per-Cluster overrides."},
        },
    },
    {"name": "envoy.filters.http.rbac", "typed_config": {"@type": f"{_EXT}.filters.http.rbac.v3.RBAC"}},
    {"name": "router", "typed_config": {"@type": f"{_EXT}.filters.http.router.v3.Router"}},
]
# Contour's listener socket options: TCP keep-alive (SOL_SOCKET/SO_KEEPALIVE, then TCP_KEEPIDLE,
# TCP_KEEPINTVL, TCP_KEEPCNT).
KEEPALIVE_OPTIONS = [
    {"level": 1, "name": 9, "int_value": 1, "state": "STATE_LISTENING"},
    {"level": 6, "name": 4, "int_value": 45, "state": "STATE_LISTENING"},
    {"level": 6, "name": 5, "int_value": 5, "state": "STATE_LISTENING"},
    {"level": 6, "name": 6, "int_value": 9, "state": "STATE_LISTENING"},
]


TLS_STAT_PREFIX = "ingress_https"
TLS_SECRET_NAME = "gateway-loadtest/external-nginx-tls/gateway-sizer"  # Contour's <namespace>/<secret>/<hash>
_TLS = f"{_EXT}.transport_sockets.tls.v3"
# Contour's TLS defaults for a virtual host: TLS 1.2 to 1.3, its cipher list (ECDSA and RSA, AES-GCM and
# ChaCha20 preferred; TLS 1.3 ignores the list), ALPN h2 then http/1.1.
TLS_PARAMS = {
    "tls_minimum_protocol_version": "TLSv1_2",
    "tls_maximum_protocol_version": "TLSv1_3",
    "cipher_suites": [
        "[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]",
        "[ECDHE-RSA-AES128-GCM-SHA256|ECDHE-RSA-CHACHA20-POLY1305]",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
    ],
}
ALPN = ["h2", "http/1.1"]
# Contour's per-virtual-host guard on TLS listeners: a request whose Host (without a port) is not the
# virtual host's name gets 421 Misdirected Request. Written here for the same per-request Lua cost.
MISDIRECTED_LUA = """
function envoy_on_request(handle)
  local authority = string.lower(handle:headers():get(":authority"))
  local colon = string.find(authority, ":", 1, true)
  if colon ~= nil then
    authority = string.sub(authority, 1, colon - 1)
  end
  if authority ~= "{host}" then
    handle:respond({{[":status"] = "421"}}, "misdirected request to " .. authority)
  end
end
"""


@dataclass(frozen=True)
class TlsListener:
    """Envoy's TLS listener: its port and the certificate it serves (PEM files)."""

    port: int
    certificate: Path
    private_key: Path


@dataclass(frozen=True)
class Overload:
    """Envoy's overload manager: a global cap on active downstream connections, a heap limit (None: off)."""

    max_connections: int | None = None
    max_heap_bytes: int | None = None


@dataclass(frozen=True)
class EnvoyLayout:
    """Addresses Envoy listens on and sends to; `tls` adds the TLS listener, `extra_routes` virtual hosts
    to the plain listener's routes, `overload` the overload manager; `idle_timeout_s` closes a downstream
    connection idle that long."""

    listen_port: int
    admin_port: int
    upstream_ports: tuple[int, ...]
    host_header: str = "external.nginx"
    address: str = "127.0.0.1"
    tls: TlsListener | None = None
    extra_routes: int = 0
    overload: Overload | None = None
    idle_timeout_s: float = IDLE_TIMEOUT_S


def _circuit_breakers() -> dict[str, Any]:
    limits = {
        "max_connections": UNLIMITED,
        "max_pending_requests": UNLIMITED,
        "max_requests": UNLIMITED,
        "max_retries": UNLIMITED,
    }
    return {"thresholds": [{"priority": "DEFAULT", **limits}, {"priority": "HIGH", **limits}]}


def _virtual_host(host: str) -> dict[str, Any]:
    return {"name": host, "domains": [host], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": CLUSTER_NAME}}]}


def _connection_manager(
    stat_prefix: str, route_name: str, hosts: list[str], filters: list[dict[str, Any]], idle_timeout_s: float
) -> dict[str, Any]:
    """The HTTP connection manager as Contour configures it, routing each of `hosts` to the nginx cluster."""
    return {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": HCM_TYPE,
            "stat_prefix": stat_prefix,
            "http_protocol_options": {"accept_http_10": True, "allow_chunked_length": True},
            "use_remote_address": True,
            "normalize_path": True,
            "merge_slashes": True,
            "preserve_external_request_id": True,
            "generate_request_id": False,
            "common_http_protocol_options": {"idle_timeout": f"{idle_timeout_s:g}s"},
            "http_filters": filters,
            "route_config": {"name": route_name, "virtual_hosts": [_virtual_host(host) for host in hosts]},
        },
    }


def _tls_listener(layout: EnvoyLayout, tls: TlsListener) -> dict[str, Any]:
    """The `ingress_https` listener Contour programs for one TLS virtual host."""
    lua = {
        "name": "envoy.filters.http.lua",
        "typed_config": {
            "@type": f"{_EXT}.filters.http.lua.v3.Lua",
            "default_source_code": {"inline_string": MISDIRECTED_LUA.format(host=layout.host_header.lower())},
        },
    }
    routes = f"https/{layout.host_header}"
    manager = _connection_manager(
        TLS_STAT_PREFIX, routes, [layout.host_header], [lua, *HTTP_FILTERS], layout.idle_timeout_s
    )
    context = {
        "@type": f"{_TLS}.DownstreamTlsContext",
        "common_tls_context": {
            "tls_params": TLS_PARAMS,
            "tls_certificate_sds_secret_configs": [{"name": TLS_SECRET_NAME}],
            "alpn_protocols": ALPN,
        },
    }
    return {
        "name": TLS_STAT_PREFIX,
        "address": {"socket_address": {"address": layout.address, "port_value": tls.port}},
        "enable_reuse_port": True,
        "socket_options": KEEPALIVE_OPTIONS,
        "listener_filters": [
            {
                "name": "envoy.filters.listener.tls_inspector",
                "typed_config": {"@type": f"{_EXT}.filters.listener.tls_inspector.v3.TlsInspector"},
            }
        ],
        "filter_chains": [
            {
                "filter_chain_match": {"server_names": [layout.host_header]},
                "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": context},
                "filters": [manager],
            }
        ],
    }


def _tls_secret(tls: TlsListener) -> dict[str, Any]:
    """The certificate as the static secret the listener's SDS config names (Contour serves it over SDS)."""
    return {
        "name": TLS_SECRET_NAME,
        "tls_certificate": {
            "certificate_chain": {"filename": str(tls.certificate)},
            "private_key": {"filename": str(tls.private_key)},
        },
    }


def overload_manager(overload: Overload) -> dict[str, Any]:
    """The overload manager Contour's bootstrap writes for these settings."""
    monitors: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    if overload.max_heap_bytes:
        monitors.append(
            {
                "name": "envoy.resource_monitors.fixed_heap",
                "typed_config": {
                    "@type": f"{_EXT}.resource_monitors.fixed_heap.v3.FixedHeapConfig",
                    "max_heap_size_bytes": overload.max_heap_bytes,
                },
            }
        )
        for action, threshold in (("shrink_heap", SHRINK_HEAP_AT), ("stop_accepting_requests", STOP_REQUESTS_AT)):
            trigger = {"name": "envoy.resource_monitors.fixed_heap", "threshold": {"value": threshold}}
            actions.append({"name": f"envoy.overload_actions.{action}", "triggers": [trigger]})
    if overload.max_connections:
        monitors.append(
            {
                "name": "envoy.resource_monitors.global_downstream_max_connections",
                "typed_config": {
                    "@type": f"{_EXT}.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig",
                    "max_active_downstream_connections": overload.max_connections,
                },
            }
        )
    return {"refresh_interval": OVERLOAD_REFRESH, "resource_monitors": monitors, "actions": actions}


def bootstrap(layout: EnvoyLayout) -> dict[str, Any]:
    """The static bootstrap for `layout`, as data."""
    socket = {"address": layout.address}
    endpoints = [
        {"endpoint": {"address": {"socket_address": {**socket, "port_value": port}}}} for port in layout.upstream_ports
    ]
    hosts = [layout.host_header, *(EXTRA_ROUTE_HOST.format(index=i) for i in range(layout.extra_routes))]
    manager = _connection_manager(STAT_PREFIX, STAT_PREFIX, hosts, HTTP_FILTERS, layout.idle_timeout_s)
    listeners = [
        {
            "name": STAT_PREFIX,
            "address": {"socket_address": {**socket, "port_value": layout.listen_port}},
            "enable_reuse_port": True,  # the pods of a local fleet share the port (runner.platforms.local.envoy_fleet)
            "socket_options": KEEPALIVE_OPTIONS,
            "filter_chains": [{"filters": [manager]}],
        }
    ]
    secrets = []
    if layout.tls is not None:
        listeners.append(_tls_listener(layout, layout.tls))
        secrets.append(_tls_secret(layout.tls))
    config: dict[str, Any] = {
        "node": {"id": "gateway-sizer-local", "cluster": "gateway-sizer"},
        # Contour's admin is a Unix socket, outside any listener limit; here a TCP port that Prometheus
        # scrapes, kept outside the global connection cap too
        "admin": {
            "address": {"socket_address": {**socket, "port_value": layout.admin_port}},
            "ignore_global_conn_limit": True,
        },
        "static_resources": {
            "listeners": listeners,
            **({"secrets": secrets} if secrets else {}),
            "clusters": [
                {
                    "name": CLUSTER_NAME,
                    "type": "STATIC",
                    "connect_timeout": CONNECT_TIMEOUT,
                    "lb_policy": "ROUND_ROBIN",
                    "common_lb_config": {"healthy_panic_threshold": {}},
                    "circuit_breakers": _circuit_breakers(),
                    "load_assignment": {"cluster_name": CLUSTER_NAME, "endpoints": [{"lb_endpoints": endpoints}]},
                }
            ],
        },
    }
    if layout.overload is not None and (layout.overload.max_connections or layout.overload.max_heap_bytes):
        config["overload_manager"] = overload_manager(layout.overload)
    return config


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
