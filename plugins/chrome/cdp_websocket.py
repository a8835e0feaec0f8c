"""A small RFC 6455 WebSocket client (text frames, fragmentation, ping/pong,
masking, ws:// and wss://), enough for the Chrome DevTools Protocol in cdp.py.

Standard library only. Every blocking call takes an absolute deadline
(time.monotonic() based), so a peer that stops answering cannot hold a hook
past its timeout.
"""

import base64
import hashlib
import os
import socket
import ssl
import struct
import sys
import time
import urllib.parse

sys.dont_write_bytecode = True  # keep the plugins directory clean

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
