#!/usr/bin/env python3
"""Opens a crawl's index.html from file:// in headless Chromium and prints what
the page shows, as one JSON object on stdout:

    read_index_html.py INDEX_HTML

{"rows": [[cell text, ...], ...], "links": [[row, href resolved], ...],
 "scripts": number of <script> elements, "title_elements": number of elements
 inside the title cells}. Uses plugins/chrome/cdp.py (its CDP client and
CHROME_FLAGS), imported by path; the browser gets a throwaway profile and is
stopped before the script exits. Exits 1 with a message on stderr when
chromium is missing or the page does not load within 30 s.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SOURCE_DIR = os.environ.get("ORCH_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(SOURCE_DIR, "plugins", "chrome"))
import cdp  # noqa: E402

READ_TABLE = """(() => {
  const rows = [...document.querySelectorAll('#pages tbody tr')];
  return JSON.stringify({
    rows: rows.map(r => [...r.cells].map(c => c.textContent)),
    links: rows.flatMap((r, i) => [...r.querySelectorAll('a')].map(a => [i, a.href])),
    scripts: document.querySelectorAll('script').length,
    title_elements: document.querySelectorAll('#pages td.title *').length,
  });
})()"""


def devtools_url(profile):
    try:
        with open(os.path.join(profile, "DevToolsActivePort"), encoding="utf-8") as fh:
            port, path = fh.read().split("\n")[:2]
        return f"ws://127.0.0.1:{port.strip()}{path.strip()}"
    except (OSError, ValueError):
        return None


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    page_url = "file://" + os.path.abspath(sys.argv[1])
    binary = cdp.resolve_binary(os.environ.get("CHROME_BINARY", ""))
    if binary is None:
        print("chromium not found (install it: scripts/debian-packages.txt)", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="orch-index-html-")
    profile = os.path.join(tmp, "profile")
    os.mkdir(profile)
    deadline = time.monotonic() + 30
    proc = subprocess.Popen(
        [binary, *cdp.CHROME_FLAGS, "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=cdp.chrome_env(profile), preexec_fn=cdp.child_setup)
    try:
        ws_url = None
        while ws_url is None:
            if time.monotonic() > deadline or proc.poll() is not None:
                print("chromium did not start", file=sys.stderr)
                return 1
            ws_url = devtools_url(profile)
            time.sleep(0.05)
        with cdp.CDP(ws_url, deadline) as client:
            target = client.call("Target.createTarget", {"url": "about:blank"}, deadline=deadline)["targetId"]
            session = client.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                  deadline=deadline)["sessionId"]
            client.call("Page.enable", session_id=session, deadline=deadline)
            client.clear_events()
            nav = client.call("Page.navigate", {"url": page_url}, session_id=session, deadline=deadline)
            if nav.get("errorText"):
                print(f"navigation failed: {nav['errorText']}", file=sys.stderr)
                return 1
            client.wait_event("Page.loadEventFired", session_id=session, deadline=deadline)
            result = client.call("Runtime.evaluate", {"expression": READ_TABLE, "returnByValue": True},
                                 session_id=session, deadline=deadline)
            print(json.dumps(json.loads(result["result"]["value"])))
        return 0
    finally:
        cdp.stop_group(proc, grace=2.0)
        cdp.sweep(profile, grace=0.5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
