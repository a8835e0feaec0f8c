"""Minimal Chrome DevTools Protocol client over the small RFC 6455 WebSocket client
of cdp_websocket.py, plus the helpers the browser hooks share (locating chromium, launch flags,
the crawl browser's published endpoint and the process sweep).

Standard library only. Imported by plugins/visit through a path relative to its
own file, by the chrome crawl hook next to it, and by tests and benchmarks that
drive a headless Chromium.

Every blocking call takes an absolute deadline (time.monotonic() based), so a
page that never finishes loading cannot hold a hook past its timeout.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import deque

sys.dont_write_bytecode = True  # keep the plugins directory clean
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
