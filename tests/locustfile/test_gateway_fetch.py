"""The master's GET through the gateway (locustfiles/gateway_sizer_fetch.py), as the kubernetes platform uses
it before it measures a TLS or body profile: a real Locust master in front of a real Envoy (Contour's TLS
listener) and nginx serving a 16 KiB body, called through runner/platforms/kubernetes/gateway_check.py."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.errors import LoadGeneratorError, PlatformError
from runner.locust import READY_PATH, LoadTarget, LocustMaster, LocustOptions, master_args
from runner.paths import LOCUSTFILE_DIR
from runner.platforms.kubernetes.gateway_check import check_body, fetch, wait_served
from runner.platforms.local.processes import Supervisor, free_port, http_ok, wait_until
from support.lean_client import BODY_BYTES, START_TIMEOUT_S
from support.processes import alive

pytestmark = pytest.mark.slow
ENCODING = "gzip, deflate, br"  # what the load sends


@pytest.fixture
def master(tls_gateway: Any, tmp_path: Path) -> Iterator[LocustMaster]:
    """A Locust master with the fetch extension, its --host the gateway, as the kubernetes platform starts it."""
    supervisor = Supervisor(tmp_path / "master-logs")
    names = ("gateway.py", "gateway_sizer_stats.py", "gateway_sizer_fetch.py")
    files = ",".join(str(LOCUSTFILE_DIR / name) for name in names)
    web_port, options = free_port(), LocustOptions("external.nginx", "/")
    args = master_args(files, "LeanGatewayUser", tls_gateway.gateway_url, options, web_port=web_port,
                       master_port=free_port(), web_host="127.0.0.1", bind_host="127.0.0.1")  # fmt: skip
    process = supervisor.start("locust-master", [sys.executable, "-m", "locust", *args])
    url = f"http://127.0.0.1:{web_port}"
    wait_until(http_ok(url + READY_PATH), what="Locust master", timeout_s=START_TIMEOUT_S, process=process)
    yield LocustMaster(url)
    supervisor.stop_all()
    assert not alive([process.pid])


def test_a_body_profile_is_checked_for_its_size_through_envoy_plain_and_tls(tls_gateway, master):
    for url in (tls_gateway.gateway_url, tls_gateway.gateway_tls_url):
        check_body(master, LoadTarget(url, "external.nginx", f"/size/{BODY_BYTES}"), BODY_BYTES, ENCODING)
    with pytest.raises(PlatformError) as refused:
        check_body(master, LoadTarget(tls_gateway.gateway_url, "external.nginx", "/size/1000"), 1000, ENCODING)
    line = refused.value.one_line()
    assert line.startswith(
        "the backend does not serve 1,000-byte bodies: GET /size/1000 with Host external.nginx through the gateway "
        "got HTTP 404 with "
    ), line
    assert line.endswith(
        ": add 1000 to nginx.bodies.sizes of charts/gateway-loadtest (or serve a 1000-byte file at /size/1000), "
        "or use a body size it serves (1k, 16k and 256k)"
    ), line
    # the checks go to no statistics of the master's
    assert master.stats()["stats"][-1]["num_requests"] == 0


def test_the_tls_virtual_host_is_served_with_sni_from_the_host_header_and_a_deadline(tls_gateway, master):
    served = wait_served(master, LoadTarget(tls_gateway.gateway_tls_url, "external.nginx", "/"), timeout_s=10)
    assert served.status == 200 and served.body_bytes > 0
    # Envoy has no filter chain for this SNI: the handshake fails, and the wait ends at its deadline
    elsewhere = LoadTarget(tls_gateway.gateway_tls_url, "tls.elsewhere.example", "/")
    assert fetch(master, elsewhere).status == 0
    with pytest.raises(PlatformError, match=r"does not serve .* with Host tls.elsewhere.example: GET / got no answer"):
        wait_served(master, elsewhere, timeout_s=2)


def test_the_master_fetches_from_the_gateways_host_only(tls_gateway, master):
    with pytest.raises(LoadGeneratorError, match=re.escape("url: http(s) URL of the gateway's host 127.0.0.1")):
        fetch(master, LoadTarget("http://localhost:9/", "external.nginx", "/"))
