"""Minimal Chrome DevTools Protocol client over the small RFC 6455 WebSocket client
of cdp_websocket.py, plus the helpers the browser hooks share (locating chromium, launch flags,
one-off captures and the process sweep).

Standard library only. Imported by plugins/screenshot and plugins/pdf through a
path relative to their own file, and by the chrome crawl hook next to it.

Every blocking call takes an absolute deadline (time.monotonic() based), so a
page that never finishes loading cannot hold a hook past its timeout.
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque

sys.dont_write_bytecode = True  # keep the plugins directory clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hooklib  # noqa: E402  (plugins/hooklib.py: options, result record, URL rule, budget)
from hooklib import budget, emit  # noqa: E402

# The websocket layer (cdp_websocket.py); its names are re-exported for the hooks.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp_websocket import DeadlineExceeded, WebSocket, WebSocketError  # noqa: E402,F401


class CDPError(Exception):
    """The browser answered a command with an error."""


class CDP:
    """Chrome DevTools Protocol session multiplexer (flat sessions)."""

    def __init__(self, ws_url, deadline):
        self.ws = WebSocket(ws_url, deadline)
        self._next_id = 0
        self._events = deque(maxlen=10000)

    def close(self):
        self.ws.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _dispatch(self, raw):
        try:
            msg = json.loads(raw)
        except (TypeError, ValueError):
            return None
        return msg if isinstance(msg, dict) else None

    def call(self, method, params=None, session_id=None, deadline=None):
        deadline = deadline if deadline is not None else time.monotonic() + 30
        self._next_id += 1
        msg_id = self._next_id
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        self.ws.send_text(json.dumps(msg), deadline)
        while True:
            reply = self._dispatch(self.ws.recv(deadline))
            if reply is None:
                continue
            if reply.get("id") == msg_id:
                if "error" in reply:
                    err = reply["error"]
                    raise CDPError(f"{method}: {err.get('message', err)}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def clear_events(self):
        self._events.clear()

    def wait_event(self, method, session_id=None, deadline=None):
        deadline = deadline if deadline is not None else time.monotonic() + 30

        def matches(ev):
            return ev.get("method") == method and (session_id is None or ev.get("sessionId") == session_id)

        for ev in list(self._events):
            if matches(ev):
                self._events.remove(ev)
                return ev.get("params", {})
        while True:
            ev = self._dispatch(self.ws.recv(deadline))
            if ev is None or "method" not in ev:
                continue
            if matches(ev):
                return ev.get("params", {})
            self._events.append(ev)


# -- shared helpers for the browser hooks ------------------------------------------

CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
]

DEFAULT_BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def resolve_binary(configured):
    """Return an executable path for `configured` (a name or path), or None.

    An explicitly configured value is never replaced by a search: pointing
    CHROME_BINARY at a missing path makes chromium unavailable.
    """
    if configured:
        if os.sep in configured:
            return configured if os.path.isfile(configured) and os.access(configured, os.X_OK) else None
        return shutil.which(configured)
    for name in DEFAULT_BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


def chrome_env(user_data_dir):
    """Environment for a chromium process: its config home (crash database of
    chrome_crashpad_handler) lives inside the user-data-dir, so every process
    of this browser names the user-data-dir on its command line."""
    env = dict(os.environ)
    env["XDG_CONFIG_HOME"] = os.path.join(user_data_dir, ".config")
    return env


def _load_libc():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()
_PR_SET_PDEATHSIG = 1


def child_setup():
    """preexec_fn: own process group, and SIGTERM when the hook dies."""
    os.setpgid(0, 0)
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def pids_with_cmdline(marker):
    """Pids (other than ours) whose command line contains `marker`."""
    found = []
    me = os.getpid()
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if needle in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def sweep(marker, grace=2.0):
    """SIGTERM, then SIGKILL after `grace`, every process naming `marker`
    (used with the user-data-dir, which every chromium process names)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 1.0)):
        pids = pids_with_cmdline(marker)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        end = time.monotonic() + wait
        while time.monotonic() < end and pids_with_cmdline(marker):
            time.sleep(0.05)


def stop_group(proc, grace=2.0, first_signal=signal.SIGTERM):
    """Terminate a Popen started with child_setup (own process group): the
    first signal, `grace` seconds, then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait in ((first_signal, grace), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def read_crawl_cdp_url():
    """The crawl browser's websocket URL from $CRAWL_DIR/chrome/cdp_url.txt, or None."""
    crawl_dir = os.environ.get("CRAWL_DIR")
    if not crawl_dir:
        return None
    try:
        with open(os.path.join(crawl_dir, "chrome", "cdp_url.txt"), encoding="utf-8") as fh:
            url = fh.read().strip()
    except OSError:
        return None
    return url or None


def crawl_chrome_unavailable():
    """Reason recorded by the chrome crawl hook when it found no chromium, or None."""
    crawl_dir = os.environ.get("CRAWL_DIR")
    if not crawl_dir:
        return None
    try:
        with open(os.path.join(crawl_dir, "chrome", "unavailable.txt"), encoding="utf-8") as fh:
            return fh.read().strip() or "chromium unavailable"
    except OSError:
        return None


def browser_answers(ws_url, timeout=3.0):
    """True when the websocket endpoint answers Browser.getVersion."""
    deadline = time.monotonic() + timeout
    try:
        with CDP(ws_url, deadline) as cdp:
            cdp.call("Browser.getVersion", deadline=deadline)
        return True
    except (OSError, WebSocketError, CDPError, DeadlineExceeded, ValueError):
        return False


def capture_via_cdp(ws_url, url, kind, deadline, width=1280, height=800, full_page=False, print_background=True):
    """Open `url` in a fresh browser context of the running browser, wait for the
    load event (bounded by `deadline`) and return PNG or PDF bytes."""
    cdp = CDP(ws_url, deadline)
    context_id = target_id = None
    try:
        context_id = cdp.call("Target.createBrowserContext", {"disposeOnDetach": True}, deadline=deadline)[
            "browserContextId"
        ]
        target_id = cdp.call(
            "Target.createTarget", {"url": "about:blank", "browserContextId": context_id}, deadline=deadline
        )["targetId"]
        session = cdp.call("Target.attachToTarget", {"targetId": target_id, "flatten": True}, deadline=deadline)[
            "sessionId"
        ]
        cdp.call("Page.enable", session_id=session, deadline=deadline)
        cdp.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session_id=session,
            deadline=deadline,
        )
        cdp.clear_events()
        nav = cdp.call("Page.navigate", {"url": url}, session_id=session, deadline=deadline)
        if nav.get("errorText"):
            raise CDPError(f"navigation failed: {nav['errorText']}")
        cdp.wait_event("Page.loadEventFired", session_id=session, deadline=deadline)
        if kind == "png":
            params = {"format": "png"}
            if full_page:
                metrics = cdp.call("Page.getLayoutMetrics", session_id=session, deadline=deadline)
                size = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
                params["clip"] = {
                    "x": 0,
                    "y": 0,
                    "width": max(1, int(size.get("width", width))),
                    "height": max(1, min(int(size.get("height", height)), 16384)),
                    "scale": 1,
                }
                params["captureBeyondViewport"] = True
            data = cdp.call("Page.captureScreenshot", params, session_id=session, deadline=deadline)["data"]
        else:
            data = cdp.call(
                "Page.printToPDF",
                {"printBackground": bool(print_background), "preferCSSPageSize": True},
                session_id=session,
                deadline=deadline,
            )["data"]
        return base64.b64decode(data)
    finally:
        # Cleanup gets its own short budget; the hook's margin covers it.
        cleanup_deadline = time.monotonic() + 1.0
        try:
            if target_id:
                cdp.call("Target.closeTarget", {"targetId": target_id}, deadline=cleanup_deadline)
            if context_id:
                cdp.call("Target.disposeBrowserContext", {"browserContextId": context_id}, deadline=cleanup_deadline)
        except (OSError, WebSocketError, CDPError, DeadlineExceeded):
            pass
        cdp.close()


def capture_oneoff(binary, url, kind, out_path, deadline, width=1280, height=800):
    """Run a one-off headless chromium with --screenshot= / --print-to-pdf=.

    Returns (ok, error). The temporary user-data-dir is outside the hook's
    output directory and removed afterwards, with every process naming it."""
    tmp = tempfile.mkdtemp(prefix="orch-chrome-oneoff-")
    profile = os.path.join(tmp, "profile")
    os.mkdir(profile)
    out_abs = os.path.abspath(out_path)
    cmd = [binary, *CHROME_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]
    if kind == "png":
        cmd.append(f"--screenshot={out_abs}")
    else:
        cmd += [f"--print-to-pdf={out_abs}", "--no-pdf-header-footer"]
    cmd.append(url)
    log_path = os.path.join(tmp, "chromium.log")
    try:
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=chrome_env(profile), preexec_fn=child_setup
            )
        try:
            code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            # A throwaway browser: no state worth a graceful close.
            stop_group(proc, grace=0, first_signal=signal.SIGKILL)
            return False, "timed out waiting for the page to load"
        finally:
            sweep(profile, grace=0.2)
        if code != 0:
            return False, f"chromium exited with code {code}: {_tail(log_path)}"
        if not os.path.isfile(out_abs) or os.path.getsize(out_abs) == 0:
            return False, f"chromium wrote no output: {_tail(log_path)}"
        return True, None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tail(path, limit=300):
    try:
        with open(path, "rb") as fh:
            lines = [l for l in fh.read().decode("utf-8", "replace").splitlines() if "dbus" not in l]
        return " | ".join(lines[-3:])[-limit:]
    except OSError:
        return ""


# -- the screenshot / pdf hook body ---------------------------------------------------

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


def run_capture_hook(plugin, kind, out_name, hook_file):
    """Shared main() of the screenshot and pdf Snapshot hooks.

    Uses the crawl's browser when $CRAWL_DIR/chrome/cdp_url.txt exists and
    answers, else a one-off headless chromium. Prints one ArchiveResult and
    returns the exit code."""
    started = time.monotonic()
    args = hooklib.parse_args()
    if args is None:
        return 0
    options = hooklib.Options(plugin.upper() + "_", hook_file)
    opt, num = options.opt, options.num

    timeout = max(1.0, num("timeout", 60))
    deadline = started + budget(timeout)
    width, height = int(num("width", 1280)), int(num("height", 800))
    full_page = hooklib.as_bool(opt("full_page", False))
    print_background = hooklib.as_bool(opt("print_background", True))
    out_path = os.path.abspath(out_name)

    def finish(data_ok, via, error=None):
        if data_ok:
            with open(out_path, "rb") as fh:
                head = fh.read(len(MAGIC[kind]))
            if head != MAGIC[kind]:
                data_ok, error = False, f"{out_name} is not a valid {kind.upper()}"
        if not data_ok:
            try:
                os.unlink(out_path)
            except FileNotFoundError:
                pass
            if isinstance(error, DeadlineExceeded) or "timed out" in str(error):
                error = f"timed out after {timeout:g} s: {error}"
            emit("failed", error=f"{error} (via {via})", output_json={"via": via})
            return 1
        size = os.path.getsize(out_path)
        emit("succeeded", output_str=out_name, output_json={"via": via, "size": size})
        return 0

    ws_url = read_crawl_cdp_url()
    if ws_url and browser_answers(ws_url, timeout=min(3.0, max(0.5, deadline - time.monotonic()))):
        try:
            data = capture_via_cdp(
                ws_url,
                args.url,
                kind,
                deadline,
                width=width,
                height=height,
                full_page=full_page,
                print_background=print_background,
            )
        except DeadlineExceeded:
            return finish(False, "crawl browser", "timed out waiting for the page to load")
        except (OSError, WebSocketError, CDPError, KeyError, ValueError) as exc:
            return finish(False, "crawl browser", exc)
        with open(out_path, "wb") as fh:
            fh.write(data)
        return finish(True, "crawl browser")

    if ws_url:
        print(f"{plugin}: crawl browser at {ws_url} does not answer; using a one-off chromium", file=sys.stderr)
    reason = crawl_chrome_unavailable()
    configured = str(opt("chrome_binary", "") or os.environ.get("CHROME_BINARY", "") or "")
    binary = None if reason else resolve_binary(configured)
    if not binary:
        reason = reason or f"chromium not found ({configured or 'searched ' + ', '.join(DEFAULT_BINARIES)})"
        emit("skipped", output_str=reason, error=reason)
        return 0
    ok, error = capture_oneoff(binary, args.url, kind, out_path, deadline, width=width, height=height)
    return finish(ok, "one-off chromium", error)

