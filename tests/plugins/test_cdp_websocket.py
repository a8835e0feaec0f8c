"""Checks plugins/chrome/cdp.py's websocket client against a scripted server:
handshake (incl. a bad Sec-WebSocket-Accept), masked client frames with 7-, 16-
and 64-bit lengths, fragmented server messages with an interleaved ping, the
pong reply, large server frames, a close frame and a receive deadline.

  python3 test_cdp_websocket.py <plugins dir>

Prints one "PASS:"/"FAIL:" line per check; exits non-zero on any failure.
"""

import base64
import hashlib
import os
import socket
import struct
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(sys.argv[1], "chrome"))
import cdp  # noqa: E402

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
results = []


def check(name, ok):
    results.append(ok)
    print(("PASS: " if ok else "FAIL: ") + "cdp websocket: " + name, flush=True)


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def read_frame(conn):
    b0, b1 = recv_exact(conn, 2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", recv_exact(conn, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", recv_exact(conn, 8))
    masked = bool(b1 & 0x80)
    key = recv_exact(conn, 4) if masked else b""
    data = recv_exact(conn, n)
    if masked:
        data = bytes(c ^ key[i % 4] for i, c in enumerate(data))
    return b0 & 0x80, b0 & 0x0F, masked, data


def frame(opcode, payload, fin=True):
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def handshake(conn, good=True):
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(4096)
    key = ""
    for line in data.decode().split("\r\n"):
        if line.lower().startswith("sec-websocket-key:"):
            key = line.split(":", 1)[1].strip()
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    if not good:
        accept = base64.b64encode(b"wrong" * 4).decode()
    conn.sendall(
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
        ).encode()
    )


server_seen = {}
BIG16 = "x" * 70000
BIG64 = "y" * 300000


def server(listener):
    # Connection 1: bad accept.
    conn, _ = listener.accept()
    handshake(conn, good=False)
    conn.close()
    # Connection 2: the real exchange.
    conn, _ = listener.accept()
    handshake(conn)
    fin, op, masked, data = read_frame(conn)
    server_seen["small"] = (fin, op, masked, data)
    fin, op, masked, data = read_frame(conn)
    server_seen["big16"] = (op, masked, data == BIG16.encode())
    fin, op, masked, data = read_frame(conn)
    server_seen["big64"] = (op, masked, data == BIG64.encode())
    # A fragmented text message with a ping in the middle, then large frames.
    conn.sendall(frame(0x1, b"frag-", fin=False) + frame(0x9, b"p1") + frame(0x0, b"m\xc3", fin=False))
    conn.sendall(frame(0x0, b"\xa9nted"))  # "é" split across two fragments
    fin, op, masked, data = read_frame(conn)
    server_seen["pong"] = (op, masked, data)
    conn.sendall(frame(0x1, BIG16.encode()))
    conn.sendall(frame(0x1, BIG64.encode()))
    # Then silence (deadline test), then a close frame.
    time.sleep(0.6)
    conn.sendall(frame(0x8, struct.pack("!H", 1000)))
    try:
        fin, op, masked, data = read_frame(conn)
        server_seen["close_reply"] = (op, masked)
    except ConnectionError:
        pass
    conn.close()


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    thread = threading.Thread(target=server, args=(listener,), daemon=True)
    thread.start()
    url = f"ws://127.0.0.1:{port}/devtools/browser/x"

    try:
        cdp.WebSocket(url, time.monotonic() + 5)
        check("rejects a bad Sec-WebSocket-Accept", False)
    except cdp.WebSocketError:
        check("rejects a bad Sec-WebSocket-Accept", True)

    ws = cdp.WebSocket(url, time.monotonic() + 5)
    check("handshake accepted", True)
    deadline = time.monotonic() + 10
    ws.send_text("hello", deadline)
    ws.send_text(BIG16, deadline)
    ws.send_text(BIG64, deadline)
    msg = ws.recv(deadline)
    check("fragmented message (interleaved ping, UTF-8 split across frames) reassembled", msg == "frag-ménted")
    big16 = ws.recv(deadline)
    big64 = ws.recv(deadline)
    check("16-bit length server frame", big16 == BIG16)
    check("64-bit length server frame", big64 == BIG64)
    try:
        ws.recv(time.monotonic() + 0.2)
        check("receive honours its deadline", False)
    except cdp.DeadlineExceeded:
        check("receive honours its deadline", True)
    try:
        ws.recv(time.monotonic() + 5)
        check("close frame ends the connection", False)
    except cdp.WebSocketError:
        check("close frame ends the connection", True)
    ws.close()
    thread.join(5)
    check("client frames are masked text frames (7-bit length)", server_seen.get("small") == (0x80, 0x1, True, b"hello"))
    check("client 16-bit length frame", server_seen.get("big16") == (0x1, True, True))
    check("client 64-bit length frame", server_seen.get("big64") == (0x1, True, True))
    check("ping answered with a masked pong carrying its payload", server_seen.get("pong") == (0xA, True, b"p1"))
    check("close frame answered", server_seen.get("close_reply") == (0x8, True))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
