"""Headless Chromium driven over the DevTools protocol on a pipe, with the standard library only.

Why not Selenium: the protocol over ``--remote-debugging-pipe`` needs no WebDriver, no
chromedriver matching the browser's version and no package from PyPI (Selenium pulls in trio,
urllib3, websocket-client, certifi...); the browser reads commands from fd 3 and writes replies
to fd 4, one JSON text per message ending in NUL. It gives what the tests need directly: the
console and every exception and log entry (Runtime, Log), each request the page makes (Network),
a viewport of any size with the device's flags (Emulation), screenshots (Page).

    with Browser() as browser:
        page = browser.page(1280, 900)
        page.load("file:///.../index.html")
        page.evaluate("document.title")
        page.screenshot("out.png", full=True)
        page.console_errors()

Chromium is Debian's (``/usr/bin/chromium``, or GPUFLEET_CHROMIUM); as root it runs with
--no-sandbox. The flags keep it off the network (no background requests, no component updates,
no QUIC), and each Browser gets a fresh profile folder, removed on exit.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CHROMIUM = os.environ.get("GPUFLEET_CHROMIUM", "/usr/bin/chromium")
FLAGS = ("--headless", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps",
         "--hide-scrollbars", "--mute-audio", "--no-default-browser-check", "--remote-debugging-pipe")


class BrowserError(RuntimeError):
    pass


def _high(fd):
    """``fd`` moved to 10 or above (close-on-exec), so that setting up 3 and 4 in the child
    cannot overwrite it."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    def __init__(self, binary=CHROMIUM, timeout=30.0):
        self.binary = binary
        self.timeout = timeout
        self.events = []
        self._buffer = b""
        self._next = 0
        self.proc = None

    def __enter__(self):
        self.profile = tempfile.mkdtemp(prefix="gpufleet-chromium-")
        cmd_r, self._cmd_w = (_high(fd) for fd in os.pipe())
        self._res_r, res_w = (_high(fd) for fd in os.pipe())

        def child_fds():
            os.dup2(cmd_r, 3)
            os.dup2(res_w, 4)

        args = [self.binary] + list(FLAGS) + ["--user-data-dir=" + self.profile]
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        self.log_path = os.path.join(self.profile, "chromium.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args + ["about:blank"], preexec_fn=child_fds, close_fds=False,
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log)
        os.close(cmd_r)
        os.close(res_w)
        try:
            self.version = self.call("Browser.getVersion")
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.send("Browser.close")
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired, BrowserError):
                self.proc.kill()
                self.proc.wait(10)
        for fd in (getattr(self, "_cmd_w", None), getattr(self, "_res_r", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        return False

    # --- the protocol ----------------------------------------------------------------------
    def send(self, method, params=None, session=None):
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._cmd_w, json.dumps(message).encode() + b"\0")
        return self._next

    def _messages(self, deadline):
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                yield json.loads(raw)
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._res_r], [], [], left)[0]:
                raise BrowserError("no answer from Chromium in time (log: %s)" % self.log_path)
            chunk = os.read(self._res_r, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium closed the pipe (exit %s)" % self.proc.poll())
            self._buffer += chunk

    def wait_for(self, match, timeout=None):
        """The first message ``match`` accepts; every event on the way is kept in ``events``."""
        deadline = time.monotonic() + (timeout or self.timeout)
        for message in self._messages(deadline):
            if "method" in message:
                self.events.append(message)
            if match(message):
                return message

    def call(self, method, params=None, session=None, timeout=None):
        number = self.send(method, params, session)
        reply = self.wait_for(lambda m: m.get("id") == number, timeout)
        if "error" in reply:
            raise BrowserError("%s: %s" % (method, reply["error"]))
        return reply.get("result", {})

    def page(self, width, height, mobile=False, scale=1):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session, width, height, mobile, scale)


class Page:
    def __init__(self, browser, session, width, height, mobile, scale):
        self.browser = browser
        self.session = session
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")
        self.resize(width, height, mobile, scale)

    def call(self, method, params=None, timeout=None):
        return self.browser.call(method, params, self.session, timeout)

    def resize(self, width, height, mobile=False, scale=1):
        self.width, self.height = width, height
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": scale,
                                                         "mobile": mobile})
        if mobile:
            self.call("Emulation.setTouchEmulationEnabled", {"enabled": True})

    def _mine(self):
        return [e for e in self.browser.events if e.get("sessionId") == self.session]

    def load(self, url, timeout=30.0):
        """Navigate and wait for the load event; returns the seconds it took."""
        started = time.monotonic()
        self.call("Page.navigate", {"url": url})
        self.browser.wait_for(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == self.session,
                              timeout)
        return time.monotonic() - started

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError("%s: %s" % (expression[:80], result["exceptionDetails"]))
        return result["result"].get("value")

    def console_errors(self):
        """Every console error or warning, uncaught exception and error log entry of this page."""
        found = []
        for event in self._mine():
            method, params = event["method"], event.get("params") or {}
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append("console.%s: %s" % (params["type"], " ".join(
                    str(a.get("value", a.get("description"))) for a in params.get("args") or [])))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: %s" % params.get("exceptionDetails", {}).get("text"))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                entry = params["entry"]
                found.append("log %s %s: %s %s" % (entry.get("level"), entry.get("source"), entry.get("text"),
                                                   entry.get("url") or ""))
        return found

    def requests(self):
        """The URLs the page asked for."""
        return [e["params"]["request"]["url"] for e in self._mine() if e["method"] == "Network.requestWillBeSent"]

    def screenshot_of(self, selector, path, max_height=4000):
        """A picture of the first element ``selector`` matches (scrolled into view)."""
        box = self.evaluate("(() => { const e = document.querySelector(%s); e.scrollIntoView(); "
                            "const r = e.getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, "
                            "r.height]; })()" % json.dumps(selector))
        clip = {"x": box[0], "y": box[1], "width": max(box[2], 1), "height": max(min(box[3], max_height), 1), "scale": 1}
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip},
                         timeout=60)["data"]
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(data))
        return path

    def screenshot(self, path, full=False, max_height=16000):
        params = {"format": "png"}
        if full:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": self.width, "height": min(size["height"], max_height), "scale": 1}
            params.update(captureBeyondViewport=True, clip=clip)
        data = self.call("Page.captureScreenshot", params, timeout=60)["data"]
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(data))
        return path
