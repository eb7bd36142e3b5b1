"""A real headless Chromium (Debian ``chromium``) driven over the DevTools protocol, for the
page tests: load a page at a window width, collect its console errors, uncaught exceptions,
refused loads and every request that leaves the file, evaluate expressions in it, move the
mouse, and take a screenshot. Loaded by the page tests with importlib (``tests/test_pages.py``).

Only the standard library and ``websockets`` (the dev extra); ``chromium`` comes from the
system (``.ci/run`` installs it).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

START_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 30.0
_LOCAL = ("file:", "data:", "about:", "chrome:", "devtools:")


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian 'chromium' is required (apt-get install -y chromium)"
    return exe


class Page:
    """One tab: what it logged and requested, and ways to look at it."""

    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session
        self.errors: list[str] = []
        self.requests: list[str] = []

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    def eval(self, expression: str) -> Any:
        """The JSON value of ``expression`` evaluated in the page (promises awaited)."""
        r = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in r:
            raise AssertionError(f"{expression!r} raised: {r['exceptionDetails']}")
        return r["result"].get("value")

    def mouse(self, kind: str, x: float, y: float, **extra) -> None:
        """A mouse event at page coordinates (``mouseMoved``, ``mousePressed``, ...)."""
        params = {
            "type": kind,
            "x": x,
            "y": y,
            "button": "left" if kind != "mouseMoved" else "none",
        }
        params.update(extra)
        if kind in ("mousePressed", "mouseReleased"):
            params.setdefault("clickCount", 1)
        self.send("Input.dispatchMouseEvent", params)
        self.browser.drain(0.05)

    def screenshot(self, path: Path, full: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full:
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


class Browser:
    """A headless Chromium with its own profile; use as a context manager."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(
            prefix="rlvitals-chromium-",
            ignore_cleanup_errors=True,  # its helpers may lag
        )
        profile = Path(self.tmp.name)
        self.proc = subprocess.Popen(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(
            connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=10)
        )
        self.ids = itertools.count(1)
        self.pages: dict[str, Page] = {}
        self.events: list[dict] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        stack = getattr(self, "stack", None)
        if stack is not None:
            stack.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.tmp.cleanup()

    def _event(self, msg: dict) -> None:
        page = self.pages.get(msg.get("sessionId", ""))
        self.events.append(msg)
        if page is None:
            return
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            page.errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in p["args"])
            )
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            page.errors.append(str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            page.errors.append(p["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith(_LOCAL):
                page.requests.append(url)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        i = next(self.ids)
        msg: dict[str, Any] = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=LOAD_TIMEOUT_S))
            if reply.get("id") == i:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def drain(self, seconds: float) -> None:
        """Take the events that arrive within ``seconds``."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                self._event(json.loads(self.ws.recv(timeout=left)))
            except TimeoutError:
                return

    def open(self, page: Path, width: int, height: int = 900) -> Page:
        """A new tab of ``width`` x ``height`` CSS pixels (a phone below 500) showing ``page``,
        loaded, its script run."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        tab = self.pages[session] = Page(self, session)
        for domain in ("Runtime", "Log", "Network", "Page"):
            tab.send(f"{domain}.enable")
        tab.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 500},
        )
        self.events.clear()
        tab.send("Page.navigate", {"url": page.resolve().as_uri()})
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while not any(
            e.get("method") == "Page.loadEventFired" and e.get("sessionId") == session
            for e in self.events
        ):
            if time.monotonic() > deadline:
                raise AssertionError(f"{page} did not load")
            self.drain(0.1)
        self.drain(0.2)
        return tab


OVERFLOW_JS = """((width) => {
  const vw = Math.min(document.documentElement.clientWidth, width);
  const out = [];
  for (const e of document.querySelectorAll('body *')) {
    if (e.closest('.scroll') || e.closest('svg') && e.tagName !== 'svg') continue;
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > vw + 1) out.push(e.tagName + '.' + e.className + ' ' + Math.round(r.right));
  }
  return {vw, scroll: document.documentElement.scrollWidth, clipped: out.slice(0, 10)};
})(%d)"""
"""What sticks out of a window ``% width`` pixels wide: elements (outside a horizontal scroller)
past its right edge, and the page's own scroll width (a phone browser may widen its layout to
fit a page that overflows, so the window's width is passed in)."""
