"""RetryingClient.sibling: another thread's client with the same credentials and its own session."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from runner.certificates import write_certificate
from runner.http import RetryingClient


def test_a_sibling_carries_the_credentials_in_a_session_of_its_own():
    session = requests.Session()
    session.headers["Authorization"] = "Bearer old"
    session.verify = "/etc/ca.pem"
    refreshed: list[requests.Session] = []
    parent = RetryingClient(session, refresh=refreshed.append)
    child = parent.sibling(budget_s=0.0)
    assert child.session is not session and child.budget_s == 0.0
    assert child.session.headers["Authorization"] == "Bearer old" and child.session.verify == "/etc/ca.pem"
    child.session.headers["Authorization"] = "Bearer new"  # a refresh in one thread leaves the other's alone
    assert session.headers["Authorization"] == "Bearer old"
    assert child.refresh is parent.refresh


def test_a_sibling_trusts_the_cluster_ca_even_when_requests_ca_bundle_names_another(tmp_path, monkeypatch):
    """The heartbeat's client reached a cluster's API server only when REQUESTS_CA_BUNDLE was unset: with it
    set, requests replaced the session's CA by the bundle (trust_env) and every heartbeat failed verification."""
    files = write_certificate(tmp_path, "localhost", "ecdsa-p256")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files.certificate, files.private_key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", certifi_or_system_bundle())
        session = requests.Session()
        session.trust_env = False  # as Cluster.session() makes it
        session.verify = str(files.certificate)
        url = f"https://localhost:{server.server_address[1]}/"
        assert RetryingClient(session, budget_s=0.0).get(url).status_code == 200
        assert RetryingClient(session, budget_s=0.0).sibling(budget_s=0.0).get(url).status_code == 200
    finally:
        server.shutdown()


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def certifi_or_system_bundle() -> str:
    """A CA bundle that does not hold the test's self-signed certificate."""
    return requests.certs.where()
