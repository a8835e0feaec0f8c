#!/usr/bin/env python3
"""The ceiling of a browser crawl: the same captures as the default plugins, with
nothing else.

    page_ceiling.py --urls-file FILE --out DIR [--workers 8] [--chrome-dir DIR]

Starts one headless Chromium (the flags of the crawl's `chrome` plugin), opens
one tab per worker, and has each worker take pages from the list in turn: load
the page once (Page.navigate, then the load event) and take a full-page PNG
screenshot, a PDF and the DOM (`document.documentElement.outerHTML`) from that
load, written to DIR/<n>/screenshot.png, output.pdf, dom.html. No orchestration,
no database, no process per page. Then closes the browser and makes sure none
of its processes is left (it is their subreaper, and reaps them all, so their
CPU is in its own rusage).

Prints one JSON line on stdout: {"pages", "succeeded", "failed", "errors"
(the first few), "wall_s" (browser launch to browser gone), "ms" (median per
page of load / screenshot / pdf / dom)}. Exits 0 when it ran, whatever failed; 2
when no browser could be started.

`--chrome-dir` is the directory of the project's CDP client (`cdp.py`,
default: plugins/chrome/ of this repository), imported by path as the browser
hooks import it.
"""

import argparse
import base64
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))

k_page_timeout_s = 60.0  # the screenshot and pdf plugins' default timeout
k_width, k_height = 1280, 800  # the screenshot plugin's viewport


def load_cdp(chrome_dir):
    sys.path.insert(0, os.path.realpath(chrome_dir))
    import cdp  # noqa: E402

    return cdp


def launch(cdp, binary, profile, log):
    """Start chromium as the crawl's chrome hook does; (Popen, websocket URL)."""
    cmd = [binary, *cdp.CHROME_FLAGS, "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=cdp.chrome_env(profile),
                            preexec_fn=cdp.child_setup, close_fds=True)
    deadline = time.monotonic() + 60
    port_file = os.path.join(profile, "DevToolsActivePort")
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with code {proc.returncode} during startup")
        try:
            with open(port_file, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
            if len(lines) >= 2 and lines[0].strip().isdigit() and lines[1].startswith("/"):
                return proc, f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}"
        except OSError:
            pass
        time.sleep(0.02)
    cdp.stop_group(proc)
    raise RuntimeError("chromium did not publish DevToolsActivePort within 60 s")


class Tab:
    """One worker's tab: its own CDP connection and a flat session on one target."""

    def __init__(self, cdp, ws_url):
        self.m_cdp = cdp
        deadline = time.monotonic() + 30
        self.m_client = cdp.CDP(ws_url, deadline)
        target = self.m_client.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)["targetId"]
        self.m_session = self.m_client.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                            deadline=deadline)["sessionId"]
        self.call("Page.enable", deadline=deadline)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": k_width, "height": k_height, "deviceScaleFactor": 1, "mobile": False}, deadline=deadline)

    def call(self, method, params=None, deadline=None):
        return self.m_client.call(method, params, session_id=self.m_session, deadline=deadline)

    def capture(self, url, out_dir):
        """Load `url` once and write its three captures; the times in ms of each step."""
        deadline = time.monotonic() + k_page_timeout_s
        times = {}
        t = time.monotonic()
        self.m_client.clear_events()
        nav = self.call("Page.navigate", {"url": url}, deadline=deadline)
        if nav.get("errorText"):
            raise RuntimeError(f"navigation failed: {nav['errorText']}")
        self.m_client.wait_event("Page.loadEventFired", session_id=self.m_session, deadline=deadline)
        times["load"], t = (time.monotonic() - t) * 1000, time.monotonic()
        # Full page, as the screenshot plugin takes it with SCREENSHOT_FULL_PAGE=true.
        metrics = self.call("Page.getLayoutMetrics", deadline=deadline)
        size = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
        clip = {"x": 0, "y": 0, "width": max(1, int(size.get("width", k_width))),
                "height": max(1, min(int(size.get("height", k_height)), 16384)), "scale": 1}
        png = self.call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True},
                        deadline=deadline)["data"]
        write(os.path.join(out_dir, "screenshot.png"), base64.b64decode(png))
        times["screenshot"], t = (time.monotonic() - t) * 1000, time.monotonic()
        pdf = self.call("Page.printToPDF", {"printBackground": True, "preferCSSPageSize": True},
                        deadline=deadline)["data"]
        write(os.path.join(out_dir, "output.pdf"), base64.b64decode(pdf))
        times["pdf"], t = (time.monotonic() - t) * 1000, time.monotonic()
        dom = self.call("Runtime.evaluate", {"expression": "document.documentElement.outerHTML",
                                             "returnByValue": True}, deadline=deadline)
        write(os.path.join(out_dir, "dom.html"), str(dom.get("result", {}).get("value", "")).encode())
        times["dom"] = (time.monotonic() - t) * 1000
        return times

    def close(self):
        self.m_client.close()


def become_subreaper():
    """Orphans of our tree (Chromium's zygote and renderers once the browser
    process is gone) are re-parented to us instead of to init, so that reaping
    them puts their CPU in our own rusage, as the crawl's processes put theirs
    in the orchestrator's."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_orphans(timeout_s=5.0):
    """Waits for every child left (the sweep has signalled them), at most timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.02)


def write(path, data):
    with open(path, "wb") as fh:
        fh.write(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls-file", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--chrome-dir", default=os.path.join(HERE, "..", "..", "plugins", "chrome"))
    args = parser.parse_args()

    started = time.monotonic()
    become_subreaper()
    cdp = load_cdp(args.chrome_dir)
    with open(args.urls_file, encoding="utf-8") as fh:
        urls = [line.strip() for line in fh if line.strip()]
    binary = cdp.resolve_binary("")
    if not binary:
        print("page_ceiling: no chromium found", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="profile-", dir=args.out)
    work = queue.Queue()
    for i, url in enumerate(urls):
        work.put((i, url))
    lock = threading.Lock()
    times, errors = [], []

    with open(os.path.join(args.out, "chromium.log"), "ab") as log:
        try:
            proc, ws_url = launch(cdp, binary, profile, log)
        except (OSError, RuntimeError) as exc:
            print(f"page_ceiling: {exc}", file=sys.stderr)
            return 2

        def worker():
            tab = Tab(cdp, ws_url)
            try:
                while True:
                    try:
                        i, url = work.get_nowait()
                    except queue.Empty:
                        return
                    out_dir = os.path.join(args.out, str(i))
                    os.makedirs(out_dir, exist_ok=True)
                    try:
                        t = tab.capture(url, out_dir)
                        with lock:
                            times.append(t)
                    except (OSError, RuntimeError, cdp.CDPError, cdp.DeadlineExceeded, cdp.WebSocketError) as exc:
                        with lock:
                            errors.append(f"{url}: {exc}")
            finally:
                tab.close()

        threads = [threading.Thread(target=worker) for _ in range(max(1, args.workers))]
        try:
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        finally:
            try:
                deadline = time.monotonic() + 3
                with cdp.CDP(ws_url, deadline) as client:
                    client.call("Browser.close", deadline=deadline)
                proc.wait(timeout=3)
            except (OSError, subprocess.TimeoutExpired, cdp.CDPError, cdp.DeadlineExceeded, cdp.WebSocketError):
                cdp.stop_group(proc)
            cdp.sweep(profile, grace=1.0)
            reap_orphans()
    wall_s = time.monotonic() - started
    shutil.rmtree(profile, ignore_errors=True)
    ms = {k: round(statistics.median(t[k] for t in times), 1) for k in ("load", "screenshot", "pdf", "dom")} if times else {}
    print(json.dumps({"pages": len(urls), "succeeded": len(times), "failed": len(errors), "errors": errors[:5],
                      "wall_s": round(wall_s, 3), "ms": ms}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
