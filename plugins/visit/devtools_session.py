"""A CDP connection whose events can be awaited with a timeout.

The shared client in plugins/chrome/cdp.py reads events only while a command
is pending, and its websocket must not be read with short deadlines (a
deadline that strikes between a frame's header and its payload loses the
frame). The visit needs to watch the network for idle periods, so this
session reads the socket on one daemon thread (bounded by the hook's
deadline) and hands every message to the caller through queues.

Blocking: call() and next_event() block at most until their deadline and then
raise DeadlineExceeded. A closed or failed connection raises WebSocketError.
Not thread-safe for callers: one thread issues commands and takes events.
"""

import json
import queue
import threading
import time

from cdp import CDPError, DeadlineExceeded, WebSocket, WebSocketError  # noqa: F401 (re-exported)


class DevToolsSession:
    """Owns one websocket to a browser endpoint; close() ends it."""

    def __init__(self, ws_url, deadline):
        self._ws = WebSocket(ws_url, deadline)
        self._deadline = deadline + 5.0  # the reader outlives the visit's own deadline a little for cleanup
        self._events = queue.Queue()
        self._replies = {}
        self._replies_lock = threading.Lock()
        self._reply_ready = threading.Condition(self._replies_lock)
        self._failure = None
        self._next_id = 0
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    def _read_loop(self):
        try:
            while True:
                raw = self._ws.recv(self._deadline)
                try:
                    msg = json.loads(raw)
                except (TypeError, ValueError):
                    continue
                if not isinstance(msg, dict):
                    continue
                if "id" in msg:
                    with self._reply_ready:
                        self._replies[msg["id"]] = msg
                        self._reply_ready.notify_all()
                elif "method" in msg:
                    self._events.put(msg)
        except (OSError, WebSocketError, DeadlineExceeded) as exc:
            with self._reply_ready:
                self._failure = exc
                self._reply_ready.notify_all()
            self._events.put(None)

    def call(self, method, params=None, session_id=None, deadline=None):
        """Send a command and wait for its reply; raises CDPError on an error reply."""
        deadline = deadline if deadline is not None else time.monotonic() + 30
        with self._reply_ready:
            self._next_id += 1
            msg_id = self._next_id
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        self._ws.send_text(json.dumps(msg), deadline)
        with self._reply_ready:
            while msg_id not in self._replies:
                if self._failure is not None:
                    raise WebSocketError(f"{method}: connection lost ({self._failure})")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DeadlineExceeded(f"{method}: no reply before the deadline")
                self._reply_ready.wait(left)
            reply = self._replies.pop(msg_id)
        if "error" in reply:
            err = reply["error"]
            raise CDPError(f"{method}: {err.get('message', err)}")
        return reply.get("result", {})

    def next_event(self, timeout):
        """The next event ({method, params, sessionId}) or None after `timeout` seconds."""
        try:
            ev = self._events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        if ev is None:
            self._events.put(None)  # stay failed for later callers
            raise WebSocketError(f"connection lost ({self._failure})")
        return ev

    def close(self):
        self._ws.close()
