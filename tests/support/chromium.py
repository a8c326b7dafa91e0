"""A small headless Chromium driver over the DevTools protocol: open a page, evaluate, screenshot, collect errors."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
import websocket

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
START_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 30.0


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """One headless Chromium with a fresh profile, driven through its first page target."""

    def __init__(self, width: int = 1280, height: int = 900) -> None:
        binary = chromium_binary()
        if binary is None:
            raise RuntimeError("chromium is not installed: run `make system-packages` (Debian package chromium)")
        self.width, self.height = width, height
        self.profile = Path(tempfile.mkdtemp(prefix="gateway-sizer-chromium-"))
        self.process = subprocess.Popen(
            [
                binary,
                *FLAGS,
                f"--user-data-dir={self.profile}",
                "--remote-debugging-port=0",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self.socket: websocket.WebSocket | None = None
        try:
            self.socket = websocket.create_connection(
                self._page_socket_url(), timeout=COMMAND_TIMEOUT_S, suppress_origin=True
            )
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.send(f"{domain}.enable")
            self.send(
                "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
            )
        except BaseException:
            self.close()
            raise

    def _page_socket_url(self) -> str:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with code {self.process.returncode} before it listened")
            if port_file.exists() and port_file.read_text().strip():
                port = port_file.read_text().split()[0]
                pages = [
                    t
                    for t in requests.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
                    if t.get("type") == "page"
                ]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)
        raise RuntimeError(f"chromium did not open its DevTools port within {START_TIMEOUT_S:g} s")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call one DevTools method and return its result; events that arrive meanwhile are kept in `events`."""
        assert self.socket is not None
        self._next_id += 1
        self.socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, event: str, timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e["method"] == event for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event} within {timeout_s:g} s")
            self.events.append(json.loads(self.socket.recv()))  # type: ignore[union-attr]

    def open(self, path: Path) -> None:
        """Load a local file and wait for its load event (images decoded, layout done)."""
        self.navigate(path.resolve().as_uri())

    def navigate(self, url: str) -> None:
        """Load a URL and wait for its load event."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads the page produced so far."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + params["exceptionDetails"].get("text", ""))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append("log: " + params["entry"].get("text", ""))
            elif method == "Network.loadingFailed":
                found.append("load failed: " + params.get("errorText", ""))
        return found

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, full_page: bool = False) -> bytes:
        """PNG of the first screen (what a reader sees first), or of the whole page."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = self.evaluate("document.documentElement.scrollHeight")
            params.update(
                captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}
            )
        return base64.b64decode(self.send("Page.captureScreenshot", **params)["data"])

    def close(self) -> None:
        try:
            if self.socket is not None:
                self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
