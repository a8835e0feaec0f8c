#!/usr/bin/env python3
"""A small counting web site on two loopback hosts, for archiving tests.

    python3 tests/support/archive_site.py --ready-file FILE [--main-host 127.0.0.1]
        [--requisite-host 127.0.0.2] [--main-port 0] [--requisite-port 0] [--big-bytes 300000]

Serves until SIGTERM or SIGINT (exits 0). Ports 0 = pick free ones. Once both
servers listen it writes FILE atomically (and prints the same JSON as one line
on stdout):

    {"main": "http://127.0.0.1:<port>", "requisite": "http://127.0.0.2:<port>", "pid": <pid>}

Main host pages:
  /, /index.html   title "Archive Site Index"; loads <requisite>/style.css (which
                   loads <requisite>/font.woff2 for its text) and <requisite>/pixel.png;
                   its script loads /data.json by fetch() and /xhr.txt by
                   XMLHttpRequest and inserts their text into the DOM (#fetched,
                   #xhr), and adds <a href="/added-by-script.html">; static links to
                   /about.html, /old and /big.html
  /about.html      title "Archive Site About"; the same style.css (same bytes)
  /old             301 to /new.html;  /new.html, /added-by-script.html: small pages
  /data.json       {"message": "fetched-by-fetch"} (gzip-encoded when the client accepts gzip)
  /xhr.txt         "loaded-by-xhr"
  /big.html        an HTML page of --big-bytes bytes (for byte-cap tests)
  /__counts        JSON {"main": {path: n}, "requisite": {path: n}}: GET/HEAD requests per
                   path (query included) since start or the last /__reset; not counted itself
  /__reset         zeroes the counts; answers {"reset": true}
Requisite host: /style.css, /font.woff2, /pixel.png (with Access-Control-Allow-Origin: *),
and /__counts, /__reset as above. Anything else is a 404. Standard library only.
"""

import argparse
import gzip
import json
import os
import signal
import struct
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def png_1x1():
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"\x00\xff\x00\x00"  # one filter byte and one red RGB pixel
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


class Site:
    def __init__(self, big_bytes):
        self.lock = threading.Lock()
        self.counts = {"main": {}, "requisite": {}}
        self.main = self.requisite = ""
        self.big_bytes = big_bytes

    def count(self, role, path):
        with self.lock:
            self.counts[role][path] = self.counts[role].get(path, 0) + 1

    def snapshot(self):
        with self.lock:
            return json.loads(json.dumps(self.counts))

    def reset(self):
        with self.lock:
            self.counts = {"main": {}, "requisite": {}}

    def page(self, title, body):
        return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>\n'
                f'<link rel="stylesheet" href="{self.requisite}/style.css"></head>\n<body>\n{body}\n</body></html>\n'
                ).encode()

    def main_routes(self, path):
        """(status, headers, body) of a main-host path, or None."""
        html = {"Content-Type": "text/html; charset=utf-8"}
        if path in ("/", "/index.html"):
            body = self.page("Archive Site Index", f"""<h1>Archive Site Index</h1>
<p class="styled">Styled text in the web font.</p>
<img src="{self.requisite}/pixel.png" alt="pixel" width="10" height="10">
<p id="fetched">waiting for fetch</p><p id="xhr">waiting for xhr</p>
<ul id="links"><li><a href="/about.html">About</a></li><li><a href="/old">Old page</a></li>
<li><a href="/big.html">Big page</a></li></ul>
<script>
fetch('/data.json').then(r => r.json()).then(d => {{ document.getElementById('fetched').textContent = d.message; }});
const x = new XMLHttpRequest();
x.open('GET', '/xhr.txt');
x.onload = () => {{ document.getElementById('xhr').textContent = x.responseText; }};
x.send();
const a = document.createElement('a');
a.href = '/added-by-script.html';
a.textContent = 'Added by script';
const li = document.createElement('li');
li.appendChild(a);
document.getElementById('links').appendChild(li);
</script>""")
            return 200, html, body
        if path == "/about.html":
            return 200, html, self.page("Archive Site About", '<h1>About</h1><p class="styled">Same style.</p>'
                                        '<a href="/">Home</a>')
        if path in ("/new.html", "/added-by-script.html"):
            name = path.strip("/").split(".")[0]
            return 200, html, self.page(f"Archive Site {name}", f"<h1>{name}</h1><a href=\"/\">Home</a>")
        if path == "/old":
            return 301, {"Location": "/new.html", "Content-Type": "text/html"}, b"<a href=\"/new.html\">moved</a>"
        if path == "/data.json":
            return 200, {"Content-Type": "application/json"}, json.dumps({"message": "fetched-by-fetch"}).encode()
        if path == "/xhr.txt":
            return 200, {"Content-Type": "text/plain; charset=utf-8"}, b"loaded-by-xhr"
        if path == "/big.html":
            head = b"<!DOCTYPE html>\n<html><head><title>Archive Site Big</title></head><body>\n"
            tail = b"</body></html>\n"
            filler = (b"<p>" + b"x" * 95 + b"</p>\n") * (max(0, self.big_bytes - len(head) - len(tail)) // 103 + 1)
            body = (head + filler)[: max(len(head), self.big_bytes - len(tail))] + tail
            return 200, html, body
        return None

    def requisite_routes(self, path):
        cors = {"Access-Control-Allow-Origin": "*"}
        if path == "/style.css":
            css = (f"@font-face {{ font-family: 'ArchiveFont'; src: url('{self.requisite}/font.woff2') format('woff2'); }}\n"
                   "body { font-family: sans-serif; background: #f4f4f4; }\n"
                   ".styled { font-family: 'ArchiveFont', serif; color: #333; }\n")
            return 200, {**cors, "Content-Type": "text/css"}, css.encode()
        if path == "/font.woff2":
            # Not a usable font (the browser falls back), but a real response the page loads.
            return 200, {**cors, "Content-Type": "font/woff2"}, b"wOF2" + bytes(range(256)) * 4
        if path == "/pixel.png":
            return 200, {**cors, "Content-Type": "image/png"}, png_1x1()
        return None


def handler_for(site, role):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status, headers, body, head_only=False):
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head_only:
                self.wfile.write(body)

        def _serve(self, head_only):
            path = self.path
            if path.split("?")[0] == "/__counts":
                return self._send(200, {"Content-Type": "application/json"}, json.dumps(site.snapshot()).encode())
            if path.split("?")[0] == "/__reset":
                site.reset()
                return self._send(200, {"Content-Type": "application/json"}, b'{"reset": true}')
            site.count(role, path)
            routes = site.main_routes if role == "main" else site.requisite_routes
            found = routes(path.split("?")[0])
            if found is None:
                return self._send(404, {"Content-Type": "text/plain"}, b"not found\n", head_only)
            status, headers, body = found
            if path.startswith("/data.json") and "gzip" in self.headers.get("Accept-Encoding", ""):
                body = gzip.compress(body, mtime=0)
                headers = {**headers, "Content-Encoding": "gzip"}
            return self._send(status, headers, body, head_only)

        def do_GET(self):
            self._serve(False)

        def do_HEAD(self):
            self._serve(True)

        def log_message(self, *args):
            pass

    return Handler


def main():
    parser = argparse.ArgumentParser(description="counting archive test site (see the module docstring)")
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--main-host", default="127.0.0.1")
    parser.add_argument("--requisite-host", default="127.0.0.2")
    parser.add_argument("--main-port", type=int, default=0)
    parser.add_argument("--requisite-port", type=int, default=0)
    parser.add_argument("--big-bytes", type=int, default=300_000)
    args = parser.parse_args()

    site = Site(args.big_bytes)
    servers = []
    for role, host, port in (("main", args.main_host, args.main_port),
                             ("requisite", args.requisite_host, args.requisite_port)):
        server = ThreadingHTTPServer((host, port), handler_for(site, role))
        server.daemon_threads = True
        servers.append(server)
    site.main = f"http://{args.main_host}:{servers[0].server_address[1]}"
    site.requisite = f"http://{args.requisite_host}:{servers[1].server_address[1]}"
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()

    ready = json.dumps({"main": site.main, "requisite": site.requisite, "pid": os.getpid()})
    tmp = f"{args.ready_file}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(ready + "\n")
    os.replace(tmp, args.ready_file)
    print(ready, flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    for server in servers:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
