"""Minimal Chrome DevTools Protocol client over a small RFC 6455 WebSocket client,
plus the helpers the browser hooks share (locating chromium, launch flags,
one-off captures and the process sweep).

Standard library only. Imported by plugins/screenshot and plugins/pdf through a
path relative to their own file, and by the chrome crawl hook next to it.

Every blocking call takes an absolute deadline (time.monotonic() based), so a
page that never finishes loading cannot hold a hook past its timeout.
"""

import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections import deque

sys.dont_write_bytecode = True  # keep the plugins directory clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hooklib  # noqa: E402  (plugins/hooklib.py: options, result record, URL rule, budget)
from hooklib import budget, emit  # noqa: E402

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA

MAX_MESSAGE_BYTES = 512 * 1024 * 1024


class WebSocketError(Exception):
    """Protocol violation, handshake failure or closed connection."""


class DeadlineExceeded(TimeoutError):
    """A deadline passed while waiting for the peer."""


def _remaining(deadline):
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("deadline exceeded")
    return left


def _xor_mask(data, key):
    """Apply the 4-byte masking key (RFC 6455 §5.3); fast for large payloads."""
    n = len(data)
    if n == 0:
        return b""
    keystream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(keystream, "big")).to_bytes(n, "big")


class WebSocket:
    """A client WebSocket: handshake, masked frames, fragmentation, ping/pong, close."""

    def __init__(self, url, deadline):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("ws", "wss"):
            raise WebSocketError(f"unsupported websocket scheme in {url!r}")
        host = parts.hostname
        if not host:
            raise WebSocketError(f"no host in websocket url {url!r}")
        port = parts.port or (443 if parts.scheme == "wss" else 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        self._buf = bytearray()
        self._closed = False
        self._sock = socket.create_connection((host, port), timeout=_remaining(deadline))
        try:
            if parts.scheme == "wss":
                ctx = ssl.create_default_context()
                self._sock = ctx.wrap_socket(self._sock, server_hostname=host)
            self._handshake(host, port, parts, path, deadline)
        except BaseException:
            self._sock.close()
            raise

    # -- handshake -----------------------------------------------------------------
    def _handshake(self, host, port, parts, path, deadline):
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        default_port = 443 if parts.scheme == "wss" else 80
        host_header = host if ":" not in host else f"[{host}]"
        if port != default_port:
            host_header += f":{port}"
        request = (
            f"GET {path} HTTP/1.1\r\n"
            f"Host: {host_header}\r\n"
            "Upgrade: websocket\r\n"
            "Connection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n"
            "\r\n"
        )
        self._sendall(request.encode("ascii"), deadline)
        while b"\r\n\r\n" not in self._buf:
            if len(self._buf) > 65536:
                raise WebSocketError("handshake response too large")
            self._fill(deadline)
        head, _, rest = bytes(self._buf).partition(b"\r\n\r\n")
        self._buf = bytearray(rest)
        lines = head.decode("iso-8859-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or status[1] != "101":
            raise WebSocketError(f"handshake refused: {lines[0]!r}")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if headers.get("upgrade", "").lower() != "websocket":
            raise WebSocketError("handshake: missing 'Upgrade: websocket'")
        if "upgrade" not in headers.get("connection", "").lower():
            raise WebSocketError("handshake: missing 'Connection: Upgrade'")
        expected = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode("ascii")).digest()).decode("ascii")
        if headers.get("sec-websocket-accept") != expected:
            raise WebSocketError("handshake: bad Sec-WebSocket-Accept")

    # -- socket io -----------------------------------------------------------------
    def _sendall(self, data, deadline):
        self._sock.settimeout(_remaining(deadline))
        try:
            self._sock.sendall(data)
        except socket.timeout as exc:
            raise DeadlineExceeded("send timed out") from exc

    def _fill(self, deadline):
        self._sock.settimeout(_remaining(deadline))
        try:
            chunk = self._sock.recv(1 << 20)
        except socket.timeout as exc:
            raise DeadlineExceeded("receive timed out") from exc
        if not chunk:
            self._closed = True
            raise WebSocketError("connection closed by peer")
        self._buf += chunk

    def _read_exact(self, n, deadline):
        while len(self._buf) < n:
            self._fill(deadline)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    # -- frames --------------------------------------------------------------------
    def _send_frame(self, opcode, payload, deadline, fin=True):
        header = bytearray([(0x80 if fin else 0) | opcode])
        n = len(payload)
        if n < 126:
            header.append(0x80 | n)
        elif n < (1 << 16):
            header.append(0x80 | 126)
            header += struct.pack("!H", n)
        else:
            header.append(0x80 | 127)
            header += struct.pack("!Q", n)
        key = os.urandom(4)
        header += key
        self._sendall(bytes(header) + _xor_mask(payload, key), deadline)

    def _read_frame(self, deadline):
        b0, b1 = self._read_exact(2, deadline)
        fin = bool(b0 & 0x80)
        if b0 & 0x70:
            raise WebSocketError("reserved bits set (no extension negotiated)")
        opcode = b0 & 0x0F
        masked = bool(b1 & 0x80)
        length = b1 & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._read_exact(2, deadline))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._read_exact(8, deadline))
        if opcode >= 0x8 and (not fin or length > 125):
            raise WebSocketError("invalid control frame")
        if length > MAX_MESSAGE_BYTES:
            raise WebSocketError(f"frame too large ({length} bytes)")
        key = self._read_exact(4, deadline) if masked else None
        payload = self._read_exact(length, deadline)
        if key:
            payload = _xor_mask(payload, key)
        return fin, opcode, payload

    def send_text(self, text, deadline):
        if self._closed:
            raise WebSocketError("connection is closed")
        self._send_frame(OP_TEXT, text.encode("utf-8"), deadline)

    def recv(self, deadline):
        """Return the next complete data message (str for text, bytes for binary)."""
        parts = []
        message_op = None
        size = 0
        while True:
            if self._closed:
                raise WebSocketError("connection is closed")
            fin, opcode, payload = self._read_frame(deadline)
            if opcode == OP_PING:
                self._send_frame(OP_PONG, payload, deadline)
                continue
            if opcode == OP_PONG:
                continue
            if opcode == OP_CLOSE:
                self._closed = True
                try:
                    self._send_frame(OP_CLOSE, payload[:2], deadline)
                except (OSError, WebSocketError, DeadlineExceeded):
                    pass
                raise WebSocketError("connection closed by peer (close frame)")
            if opcode == OP_CONT:
                if message_op is None:
                    raise WebSocketError("continuation frame without a started message")
            elif opcode in (OP_TEXT, OP_BINARY):
                if message_op is not None:
                    raise WebSocketError("new data frame inside a fragmented message")
                message_op = opcode
            else:
                raise WebSocketError(f"unknown opcode {opcode:#x}")
            parts.append(payload)
            size += len(payload)
            if size > MAX_MESSAGE_BYTES:
                raise WebSocketError("message too large")
            if fin:
                data = b"".join(parts)
                return data.decode("utf-8") if message_op == OP_TEXT else data

    def close(self, timeout=1.0):
        if self._sock is None:
            return
        deadline = time.monotonic() + timeout
        try:
            if not self._closed:
                self._closed = True
                self._send_frame(OP_CLOSE, struct.pack("!H", 1000), deadline)
                # Wait briefly for the peer's close frame; ignore anything else.
                while True:
                    _, opcode, _ = self._read_frame(deadline)
                    if opcode == OP_CLOSE:
                        break
        except (OSError, WebSocketError, DeadlineExceeded):
            pass
        finally:
            try:
                self._sock.close()
            finally:
                self._sock = None


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

