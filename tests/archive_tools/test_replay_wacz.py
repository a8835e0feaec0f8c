#!/usr/bin/env python3
"""Self-test of replay_wacz.py on a hand-built WACZ (hand_built_wacz.py).

The archived page, at a loopback address where nothing listens, has a known
title and text, and its script fills in a second text with fetch() from a
second archived URL, and a third from a third URL archived as an
identical-payload-digest revisit of the second. Replay must show the title and
all three texts with no original server running at all; an expected text that is not there must fail.

Needs ReplayWeb.page under $ORCH_TEST_TOOLS (scripts/setup) and chromium;
without them the test fails.
"""

import os
import socket
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hand_built_wacz as hb  # noqa: E402

HARNESS = os.path.join(HERE, "replay_wacz.py")
TITLE = "Hand-Built Replay Page"
WRITTEN = "Text written into the page"
FETCHED = "Text fetched from the second URL"
REVISITED = "revisit: " + FETCHED  # the same payload from a third URL, stored as a revisit


def closed_port(host):
    """A port on `host` that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def nothing_listens(host, port):
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return True
    return False


def build(path, base):
    html = f"""<!doctype html><html><head><meta charset="utf-8"><title>{TITLE}</title></head>
<body><p>{WRITTEN}</p><p id="later">not fetched yet</p><p id="copy">no revisit yet</p>
<script>
fetch("data.txt").then(r => r.text()).then(t => {{ document.getElementById("later").textContent = t; }});
fetch("copy.txt").then(r => r.text()).then(t => {{ document.getElementById("copy").textContent = "revisit: " + t; }});
</script></body></html>""".encode("utf-8")
    parts = hb.build_parts(
        [
            hb.Exchange(base + "index.html", "text/html; charset=utf-8", html),
            hb.Exchange(base + "data.txt", "text/plain; charset=utf-8", FETCHED.encode("utf-8")),
            hb.Exchange(
                base + "copy.txt", "text/plain; charset=utf-8", FETCHED.encode("utf-8"), revisit_of=base + "data.txt"
            ),
        ],
        pages=[(base + "index.html", TITLE)],
    )
    return hb.write_wacz(path, parts)


def run(args, timeout=240):
    proc = subprocess.run([sys.executable, HARNESS, *args], capture_output=True, text=True, timeout=timeout)
    output = (proc.stdout + proc.stderr).strip()
    print("\n".join("    " + line for line in output.splitlines()))
    return proc.returncode, output


def main():
    host = "127.0.0.2"
    port = closed_port(host)
    base = f"http://{host}:{port}/"
    failures = []
    with tempfile.TemporaryDirectory(prefix="test-replay-wacz-") as tmp:
        wacz = build(os.path.join(tmp, "page.wacz"), base)
        if not nothing_listens(host, port):
            print(f"test_replay_wacz: something listens on {host}:{port}; cannot prove replay is offline")
            return 1
        common = ["--wacz", wacz, "--url", base + "index.html", "--timeout", "120"]

        print("replay of the archived page (no original server):")
        code, out = run([*common, "--expect-title", TITLE, "--expect-text", WRITTEN, "--expect-text", FETCHED,
                         "--expect-text", REVISITED])
        if code == 2:
            print(f"test_replay_wacz: FAIL the harness cannot run here: {out.splitlines()[-1] if out else ''}")
            return 1
        if code != 0:
            failures.append(f"the good replay exited {code}")

        print("an expected text that is not in the page:")
        absent = "Text the archive never had"
        code, out = run([*common, "--settle", "3", "--expect-title", TITLE, "--expect-text", absent])
        if code != 1 or f"FAIL text {absent!r} is not in the page" not in out or "replay: frame " not in out:
            failures.append(f"the negative replay exited {code} without the missing-text failure")

        print("a wrong expected title:")
        code, out = run([*common, "--settle", "3", "--expect-title", "Another Title"])
        if code != 1 or "FAIL title is" not in out:
            failures.append(f"the wrong-title replay exited {code} without the title failure")
    for f in failures:
        print(f"test_replay_wacz: FAIL {f}")
    if not failures:
        print("test_replay_wacz: replay shows the archived title and all three texts; wrong expectations fail")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
