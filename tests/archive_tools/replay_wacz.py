#!/usr/bin/env python3
"""Replays a page of a WACZ in ReplayWeb.page in headless Chromium and checks
what the replayed page shows.

    replay_wacz.py --wacz FILE --url URL [--expect-title T] [--expect-text S ...]
                   [--timeout SECONDS] [--settle SECONDS] [--chrome BINARY]

Serves on 127.0.0.1 (a port the kernel picks) a small embed page that loads
ReplayWeb.page's ui.js, its service worker sw.js (under /replay/, the scope the
<replay-web-page replayBase> names) and the WACZ (with HTTP Range requests,
which ReplayWeb.page uses to read the zip). Drives a headless Chromium over
CDP (plugins/chrome/cdp.py) with a fresh profile, waits (bounded by --timeout)
for the replay frame whose URL holds /w/<collection>/[:<source hash>/][<timestamp>]mp_/<URL>,
and reads that frame's title and body text in an isolated world. Once that
frame has loaded, expectations not met within --settle seconds fail. When no
replay frame has appeared by half the bound, the embed page is reloaded once.

Prints what it saw. Exits 0 when every expectation holds, 1 when one does not
(or the replay frame never appears), 2 when it cannot run (ReplayWeb.page or
chromium missing). Chromium and the server are stopped on every exit path,
including SIGTERM and SIGINT. The ReplayWeb.page files come from
$ORCH_TEST_TOOLS/replaywebpage (scripts/setup), else <repo>/build/test-tools.
"""

import argparse
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "plugins", "chrome"))
import cdp  # noqa: E402  (the project's CDP client and chromium flags)

WACZ_PATH = "/archive/replay.wacz"


class CannotRun(Exception):
    """A tool the harness needs is missing."""


def find_replaywebpage():
    root = os.environ.get("ORCH_TEST_TOOLS") or os.path.join(REPO, "build", "test-tools")
    folder = os.path.join(root, "replaywebpage")
    for name in ("ui.js", "sw.js"):
        if not os.path.isfile(os.path.join(folder, name)):
            raise CannotRun(f"ReplayWeb.page's {name} not found in {folder} (scripts/setup installs it)")
    return folder


def embed_page(url):
    quoted = url.replace("&", "&amp;").replace('"', "&quot;")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>replay harness</title>
<script src="/replay/ui.js"></script></head>
<body style="margin:0">
<replay-web-page style="display:block;width:100vw;height:100vh" source="{WACZ_PATH}"
  url="{quoted}" replayBase="/replay/"></replay-web-page>
</body></html>
""".encode("utf-8")


def make_handler(wacz, rwp_dir, page):
    """Request handler: the embed page, /replay/<ReplayWeb.page file>, the WACZ."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args):
            pass

        def do_HEAD(self):
            self.do_GET(head=True)

        def do_GET(self, head=False):
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if path in ("/", "/index.html"):
                return self.send_bytes(page, "text/html; charset=utf-8", head)
            if path == WACZ_PATH:
                return self.send_file(wacz, "application/wacz", head, ranges=True)
            if path.startswith("/replay/"):
                # /replay/ itself is normally answered by the service worker
                # (serveIndex); a request that reaches the network before the
                # worker controls the frame gets the package's same app page.
                rel = os.path.normpath(path[len("/replay/") :] or "index.html")
                full = os.path.join(rwp_dir, rel)
                if not rel.startswith("..") and os.path.isfile(full):
                    ctype = {".js": "application/javascript", ".html": "text/html; charset=utf-8"}.get(
                        os.path.splitext(full)[1], "application/octet-stream"
                    )
                    extra = {"Service-Worker-Allowed": "/replay/"} if rel == "sw.js" else {}
                    return self.send_file(full, ctype, head, extra=extra)
            self.send_bytes(b"not found\n", "text/plain", head, status=404)

        def send_bytes(self, data, ctype, head, status=200):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if not head:
                self.wfile.write(data)

        def send_file(self, full, ctype, head, ranges=False, extra=None):
            size = os.path.getsize(full)
            start, end, status = 0, size - 1, 200
            header = self.headers.get("Range") if ranges else None
            if header:
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", header.strip())
                if not m or (not m.group(1) and not m.group(2)):
                    return self.unsatisfiable(size)
                if m.group(1):
                    start = int(m.group(1))
                    end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                else:
                    start = max(0, size - int(m.group(2)))
                if start >= size or start > end:
                    return self.unsatisfiable(size)
                status = 206
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(end - start + 1))
            self.send_header("Cache-Control", "no-store")
            if ranges:
                self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if head:
                return
            with open(full, "rb") as fh:
                fh.seek(start)
                left = end - start + 1
                while left > 0:
                    chunk = fh.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)

        def unsatisfiable(self, size):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


def launch_chromium(binary, profile, deadline):
    """Start chromium with a fresh profile; return (Popen, browser websocket URL)."""
    log = open(os.path.join(os.path.dirname(profile), "chromium.log"), "wb")
    cmd = [binary, *cdp.CHROME_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
           "--window-size=1280,900", "about:blank"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            env=cdp.chrome_env(profile), preexec_fn=cdp.child_setup)
    log.close()
    port_file = os.path.join(profile, "DevToolsActivePort")
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CannotRun(f"chromium exited with code {proc.returncode} at start-up")
        try:
            with open(port_file, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
            if len(lines) >= 2 and lines[0].strip().isdigit() and lines[1].startswith("/"):
                return proc, f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}"
        except OSError:
            pass
        time.sleep(0.05)
    return proc, None


def frames_of(tree):
    """Flatten a Page.getFrameTree result into a list of frame dicts."""
    out, todo = [], [tree.get("frameTree", {})]
    while todo:
        node = todo.pop()
        if "frame" in node:
            out.append(node["frame"])
        todo.extend(node.get("childFrames", []))
    return out


READ_PAGE = (
    "JSON.stringify({title: document.title, ready: document.readyState,"
    " text: document.body ? document.body.innerText : ''})"
)


def replay(args, rwp_dir, binary, tmp):
    """Run one replay; return (ok, lines to print)."""
    deadline = time.monotonic() + args.timeout
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args.wacz, rwp_dir, embed_page(args.url)))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    profile = os.path.join(tmp, "profile")
    os.mkdir(profile)
    proc = None
    client = None
    try:
        embed = f"http://127.0.0.1:{server.server_address[1]}/"
        reloaded = False
        proc, ws_url = launch_chromium(binary, profile, deadline)
        if not ws_url:
            return False, ["replay: chromium did not publish its DevTools port in time"]
        client = cdp.CDP(ws_url, deadline)
        target = client.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)["targetId"]
        session = client.call(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, deadline=deadline
        )["sessionId"]
        client.call("Page.enable", session_id=session, deadline=deadline)
        client.call("Page.navigate", {"url": embed}, session_id=session, deadline=deadline)
        # /w/<collection>/[:<hash of the source>/][<timestamp>]mp_/<url>
        wanted = re.compile(r"/w/[^/?#]+/(?::[0-9a-f]+/)?\d*mp_/" + re.escape(args.url) + r"(?:[?#]|$)")
        seen, frame_url, settle_end, frame_urls = None, None, None, []
        # A first load can lose the race with the service worker's activation;
        # one reload of the embed page, at half the bound, recovers it.
        reload_at = time.monotonic() + args.timeout / 2
        while time.monotonic() < deadline and (settle_end is None or time.monotonic() < settle_end):
            if frame_url is None and reload_at is not None and time.monotonic() >= reload_at:
                reload_at = None
                client.call("Page.reload", {"ignoreCache": True}, session_id=session, deadline=deadline)
                reloaded = True
            step = min(deadline, time.monotonic() + 15)
            frames = frames_of(client.call("Page.getFrameTree", session_id=session, deadline=step))
            frame_urls = [f.get("url", "") for f in frames]
            match = next((f for f in frames if wanted.search(f.get("url", ""))), None)
            if match:
                frame_url = match["url"]
                try:
                    ctx = client.call("Page.createIsolatedWorld", {"frameId": match["id"], "worldName": "replay-check"},
                                      session_id=session, deadline=step)["executionContextId"]
                    res = client.call(
                        "Runtime.evaluate",
                        {"expression": READ_PAGE, "contextId": ctx, "returnByValue": True},
                        session_id=session,
                        deadline=step,
                    )
                    seen = json.loads(res.get("result", {}).get("value") or "{}")
                except (cdp.CDPError, ValueError):
                    seen = None  # the frame navigated away meanwhile; look again
                if seen and seen.get("ready") == "complete":
                    if settle_end is None:
                        settle_end = time.monotonic() + args.settle
                    if not missing(args, seen):
                        break
            time.sleep(0.25)
        lines = [f"replay: embed page {embed} for {args.url}{' (reloaded once)' if reloaded else ''}"]
        if not frame_url:
            lines.append("replay: FAIL no replay frame for the URL appeared (is it in the WACZ index?); frames were:")
            lines += [f"replay:   {u}" for u in frame_urls]
            return False, lines
        lines.append(f"replay: frame {frame_url}")
        if not seen:
            lines.append("replay: FAIL could not read the replayed document")
            return False, lines
        text = seen.get("text", "")
        lines.append(f"replay: title {seen.get('title', '')!r}")
        lines.append(f"replay: text {text[:600]!r}{' ...' if len(text) > 600 else ''}")
        problems = missing(args, seen)
        lines += [f"replay: FAIL {p}" for p in problems]
        if not problems:
            lines.append("replay: ok, every expectation holds")
        return not problems, lines
    finally:
        if client is not None:
            client.close()
        if proc is not None:
            cdp.stop_group(proc, grace=1.0)
        cdp.sweep(profile, grace=0.5)
        server.shutdown()
        server.server_close()


def missing(args, seen):
    problems = []
    if args.expect_title is not None and seen.get("title") != args.expect_title:
        problems.append(f"title is {seen.get('title')!r}, expected {args.expect_title!r}")
    for text in args.expect_text or []:
        if text not in seen.get("text", ""):
            problems.append(f"text {text!r} is not in the page")
    return problems


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)  # unwinds through replay()'s finally


def main(argv=None):
    parser = argparse.ArgumentParser(description="Replay a WACZ page in ReplayWeb.page and check it.")
    parser.add_argument("--wacz", required=True)
    parser.add_argument("--url", required=True, help="the archived page URL to replay")
    parser.add_argument("--expect-title")
    parser.add_argument("--expect-text", action="append", help="text the page body must contain (repeatable)")
    parser.add_argument("--timeout", type=float, default=90.0, help="bound of the whole replay (seconds)")
    parser.add_argument("--settle", type=float, default=10.0, help="time for expectations once the frame loaded")
    parser.add_argument("--chrome", default=os.environ.get("CHROME_BINARY", ""), help="chromium binary")
    args = parser.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        rwp_dir = find_replaywebpage()
        binary = cdp.resolve_binary(args.chrome)
        if not binary:
            raise CannotRun(f"chromium not found ({args.chrome or 'searched ' + ', '.join(cdp.DEFAULT_BINARIES)})")
        if not os.path.isfile(args.wacz):
            raise CannotRun(f"no such file {args.wacz}")
    except CannotRun as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="replay-wacz-")
    try:
        ok, lines = replay(args, rwp_dir, binary, tmp)
    except (OSError, cdp.WebSocketError, cdp.CDPError, cdp.DeadlineExceeded) as exc:
        ok, lines = False, [f"replay: FAIL {type(exc).__name__}: {exc}"]
    except CannotRun as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
