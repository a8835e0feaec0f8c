#!/usr/bin/env python3
"""A static site on 127.0.0.1 that counts the requests it serves.

    counting_site_server.py ROOT [--port N]

Serves the files under ROOT with a threaded http.server (one thread per
connection, HTTP/1.1 keep-alive) on 127.0.0.1, port N (default 0: any free
one), and prints one line `http://127.0.0.1:<port>/` on stdout once it listens.
Runs until SIGTERM or SIGINT, then exits 0.

Every request counts (any method, any status, 404 included) except those to
the control path `/_count`, which answers `{"requests": <count>, "bytes":
<body bytes sent>}` as JSON; `/_count?reset=1` answers the same and then sets
both to 0. Requests are not logged: on a crawl of thousands of pages the log
would cost the server more than the requests.
"""

import argparse
import json
import os
import signal
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

sys.dont_write_bytecode = True


class Counter:
    """Requests and body bytes served, shared by the handler threads."""

    def __init__(self):
        self.m_lock = threading.Lock()
        self.m_requests = 0
        self.m_bytes = 0

    def add_request(self):
        with self.m_lock:
            self.m_requests += 1

    def add_bytes(self, n):
        with self.m_lock:
            self.m_bytes += n

    def read(self, reset):
        with self.m_lock:
            out = {"requests": self.m_requests, "bytes": self.m_bytes}
            if reset:
                self.m_requests = 0
                self.m_bytes = 0
            return out


class CountingHandler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real server gives a browser

    def __init__(self, *args, counter, **kwargs):
        self.m_counter = counter
        super().__init__(*args, **kwargs)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def handle_one_request(self):
        # The control path is answered here, before the base class maps it to a file.
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline:
            self.close_connection = True
            return
        if not self.parse_request():
            return
        parts = urlsplit(self.path)
        if parts.path == "/_count":
            body = json.dumps(self.m_counter.read("reset" in parse_qs(parts.query))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            return
        self.m_counter.add_request()
        method = getattr(self, "do_" + self.command, None)
        if method is None:
            self.send_error(501, f"Unsupported method ({self.command!r})")
            return
        method()
        self.wfile.flush()

    def copyfile(self, source, outputfile):
        # Counts the body bytes of the files served (headers and errors aside).
        while True:
            chunk = source.read(64 * 1024)
            if not chunk:
                return
            outputfile.write(chunk)
            self.m_counter.add_bytes(len(chunk))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if not os.path.isdir(args.root):
        print(f"counting_site_server: {args.root} is not a directory", file=sys.stderr)
        return 2
    counter = Counter()
    handler = partial(CountingHandler, counter=counter, directory=os.path.realpath(args.root))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True

    def stop(_signum, _frame):
        # shutdown() waits for serve_forever(), which runs in this thread: from another one.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"http://127.0.0.1:{server.server_address[1]}/", flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
