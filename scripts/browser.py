#!/usr/bin/env python3
"""Opens the dashboard's pages in headless Chromium (Debian's `chromium`) and reports what a
browser saw, as JSON on standard output: for each page and width, the HTTP status, console
errors and exceptions (CSP refusals included), every URL the page requested, the charts' bars,
points and rings, whether the page scrolls sideways, and its text.

    scripts/browser.py --base http://127.0.0.1:8080 --token-file admin.token /ui /ui/outbox
    scripts/browser.py ... --widths 375,1280 --screenshots docs/screenshots

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: fds 3 and 4,
messages separated by NUL), so nothing but the standard library is needed. It signs in with the
admin token first (a POST to /ui/login) and gives the session cookie to the browser.
Exit status: 0 when it ran (the report says what it saw), 2 when Chromium is missing, 1 otherwise.
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

# What a page reports, measured in the page after its load event.
MEASURE = """JSON.stringify({
  charts: [...document.querySelectorAll('svg.chart')].map(svg => ({
    title: svg.querySelector('title') ? svg.querySelector('title').textContent : '',
    bars: svg.querySelectorAll('rect.bar').length,
    points: svg.querySelectorAll('circle.point').length,
    lines: svg.querySelectorAll('path.line').length,
    targets: svg.querySelectorAll('rect.target').length})),
  rings: document.querySelectorAll('svg.week-strip g.ring').length,
  tables: document.querySelectorAll('table').length,
  scripts: document.scripts.length,
  forms: [...document.querySelectorAll('form')].map(f => ({action: f.getAttribute('action'),
    csrf: !!f.querySelector('input[name=csrf]') && f.querySelector('input[name=csrf]').value.length > 0})),
  sideways: document.documentElement.scrollWidth > window.innerWidth + 1,
  height: document.documentElement.scrollHeight,
  text: document.body.innerText})"""


class DevTools:
    """The DevTools protocol over Chromium's pipe: requests with ids, events queued by session."""

    def __init__(self, chromium, profile):
        to_browser, self._browser_in = os.pipe()
        self._browser_out, from_browser = os.pipe()

        def pipes():
            # Copies first, so that a pipe already on fd 3 or 4 is not overwritten by the other.
            reading, writing = os.dup(to_browser), os.dup(from_browser)
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
             "--disable-default-apps", "--mute-audio", "--hide-scrollbars", f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=pipes, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._next = 0
        self._buffer = b""
        self.events = []

    def send(self, method, params=None, session=None, timeout=30):
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._browser_in, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            reply = self._read()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise TimeoutError(f"{method}: no answer in {timeout} s")

    def wait_for(self, method, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read())
        raise TimeoutError(f"no {method} in {timeout} s")

    def _read(self):
        while b"\0" not in self._buffer:
            chunk = os.read(self._browser_out, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def sign_in(base, token):
    """The session cookie's value, from a POST of the admin token to /ui/login."""
    url = urllib.parse.urlparse(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    connection.request("POST", "/ui/login", urllib.parse.urlencode({"token": token}),
                       {"Content-Type": "application/x-www-form-urlencoded"})
    response = connection.getresponse()
    cookie = response.getheader("Set-Cookie") or ""
    if response.status != 303 or not cookie.startswith("caregate_session="):
        raise RuntimeError(f"sign-in answered {response.status}, cookie {cookie!r}")
    return cookie.split(";")[0].split("=", 1)[1]


def visit(tools, session, base, path, width, screenshots):
    """One page at one width: what it requested, logged and showed."""
    mobile = width < 600
    tools.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile}, session)
    tools.events.clear()
    tools.send("Page.navigate", {"url": base + path}, session)
    tools.wait_for("Page.loadEventFired")
    measured = json.loads(tools.send("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True}, session)["result"]["value"])
    requests, errors, status = [], [], None
    for event in tools.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent":
            requests.append(params["request"]["url"])
        elif method == "Network.responseReceived" and params.get("type") == "Document":
            status = params["response"]["status"]
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            errors.append(params["exceptionDetails"].get("text", "exception"))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            errors.append(params["entry"].get("text", ""))
    if screenshots:
        plain = "".join(c if c.isalnum() else "-" for c in urllib.parse.unquote(path).strip("/"))
        name = f"{plain or 'ui'}-{width}.png"
        tools.send("Emulation.setDeviceMetricsOverride",
                   {"width": width, "height": min(measured["height"], 4000), "deviceScaleFactor": 1, "mobile": mobile}, session)
        shot = tools.send("Page.captureScreenshot", {"format": "png"}, session)
        with open(os.path.join(screenshots, name), "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    return dict(path=path, width=width, status=status, requests=requests, errors=errors, **measured)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the gateway, e.g. http://127.0.0.1:8080")
    parser.add_argument("--token-file", required=True, help="the admin token's file")
    parser.add_argument("--widths", default="375,1280")
    parser.add_argument("--screenshots", help="a folder for one PNG per page and width")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("browser.py: no chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    with open(args.token_file) as f:
        token = f.read().split("\n")[0].strip()
    cookie = sign_in(args.base, token)
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="caregate-chromium-") as profile:
        tools = DevTools(chromium, profile)
        try:
            target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Network", "Runtime", "Log"):
                tools.send(f"{domain}.enable", session=session)
            tools.send("Network.setCookie", {"name": "caregate_session", "value": cookie, "url": args.base + "/ui",
                                             "httpOnly": True, "sameSite": "Strict"}, session)
            report = [visit(tools, session, args.base, path, int(width), args.screenshots)
                      for width in args.widths.split(",") for path in args.paths]
        finally:
            tools.close()
    json.dump(report, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
