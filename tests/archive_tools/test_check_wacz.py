#!/usr/bin/env python3
"""Self-test of check_wacz.py: a hand-built correct WACZ passes, and each of
several hand-broken ones fails for its own reason (and only that reason).

Needs the warcio.js CLI under $ORCH_TEST_TOOLS (scripts/setup); without it the
test fails, as every test whose tool is missing does.
"""

import functools
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hand_built_wacz as hb  # noqa: E402

CHECKER = os.path.join(HERE, "check_wacz.py")
PAGE = "http://127.0.0.2:8071/index.html"
STYLE = "http://example.com/style.css"


def sample_parts():
    return hb.build_parts(
        [
            hb.Exchange(PAGE, "text/html; charset=utf-8", b"<html><head><title>Hand</title></head>hi</html>"),
            hb.Exchange("http://127.0.0.2:8071/data.txt", "text/plain", b"some data"),
            hb.Exchange(STYLE, "text/css", b"body{color:red}"),
            hb.Exchange("http://example.com/again.css", "text/css", b"body{color:red}", revisit_of=STYLE),
        ],
        pages=[(PAGE, "Hand")],
    )


def wget_parts(tmp):
    """A WACZ around wget's own WARC/1.0 (sha1 base32 digests, metadata records)
    of a page served here on 127.0.0.1, indexed by warcio.js cdx-index."""
    site = os.path.join(tmp, "site")
    os.mkdir(site)
    with open(os.path.join(site, "index.html"), "w", encoding="utf-8") as fh:
        fh.write("<html><head><title>Wget</title></head><body>fetched by wget</body></html>")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_args):
            pass

    handler = functools.partial(Quiet, directory=site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
    try:
        wget = ["wget", "-q", "--no-warc-keep-log", "--warc-file=" + os.path.join(tmp, "wget"), "-O", os.devnull, url]
        subprocess.run(wget, check=True, timeout=60)
    finally:
        server.shutdown()
        server.server_close()
    warc_path = os.path.join(tmp, "wget.warc.gz")
    warcio = os.path.join(os.environ.get("ORCH_TEST_TOOLS", os.path.join(HERE, "..", "..", "build", "test-tools")),
                          "node_modules", ".bin", "warcio")
    if not os.access(warcio, os.X_OK):
        raise SystemExit(f"warcio.js CLI not found at {warcio} (scripts/setup installs it)")
    index = subprocess.run([warcio, "cdx-index", warc_path], capture_output=True, text=True, check=True, timeout=120)
    lines = [line for line in index.stdout.splitlines() if line.strip()]
    with open(warc_path, "rb") as fh:
        warc = fh.read()
    return hb.parts_of_warc("wget.warc.gz", warc, lines, [(url, "Wget")], "2026-01-02T03:04:05Z")


def wrong_block_digest(parts):
    """Rebuild with the page's response carrying a digest of other bytes."""
    fresh = hb.build_parts(
        [hb.Exchange(PAGE, "text/html", b"<html>digest</html>", wrong_block_digest=True)], pages=[(PAGE, "Hand")]
    )
    parts.warcs, parts.cdxj, parts.pages = fresh.warcs, fresh.cdxj, fresh.pages


def wrong_payload_digest(parts):
    """Rebuild with the page's response naming the digest of another body."""
    fresh = hb.build_parts(
        [hb.Exchange(PAGE, "text/html", b"<html>payload</html>", wrong_payload_digest=True)], pages=[(PAGE, "Hand")]
    )
    parts.warcs, parts.cdxj, parts.pages = fresh.warcs, fresh.cdxj, fresh.pages


def shift_first_offset(parts):
    parts.cdxj[0].fields["offset"] = str(int(parts.cdxj[0].fields["offset"]) + 1)


def wrong_resource_hash(dp):
    res = next(r for r in dp["resources"] if r["path"] == "indexes/index.cdxj")
    res["hash"] = "sha256:" + "0" * 64


def wrong_digest(d):
    d["hash"] = "sha256:" + "f" * 64


def unsort(parts):
    parts.cdxj.reverse()


def bad_pages_header(parts):
    parts.pages_header = {"format": "json-pages-0.9", "id": "pages"}


def bad_page_ts(parts):
    parts.pages[0]["ts"] = "20260102030405"


def wrong_target(parts):
    parts.cdxj[0].fields["url"] = parts.cdxj[1].fields["url"]


# name -> (edit of the parts, write_wacz keyword arguments, expected checks, allowed checks)
CASES = {
    "good": (None, {}, set(), set()),
    "wrong sha256 of a resource": (None, {"tamper_datapackage": wrong_resource_hash}, {"resource-hash"}, set()),
    "unsorted CDXJ": (unsort, {}, {"cdxj-order"}, set()),
    "deflated WARC": (None, {"deflate_archive": True}, {"archive-compressed"}, set()),
    "missing index member": (
        None,
        {"omit": ("indexes/index.cdxj",)},
        {"missing-member"},
        {"resource-missing", "page-unindexed"},
    ),
    "offset off by one": (shift_first_offset, {}, {"cdxj-offset"}, set()),
    "bad digest file": (None, {"tamper_digest": wrong_digest}, {"digest-file"}, set()),
    "bad pages header": (bad_pages_header, {}, {"pages-header"}, set()),
    "page ts not ISO 8601": (bad_page_ts, {}, {"pages-entry"}, set()),
    "index url differs from the record": (wrong_target, {}, {"cdxj-target"}, {"cdxj-order", "page-unindexed"}),
    "block digest of other bytes": (wrong_block_digest, {}, {"warc-digest"}, set()),
    "payload digest of another body": (wrong_payload_digest, {}, {"warc-payload"}, set()),
    "wget WARC/1.0 with sha1 base32 digests": ("wget", {}, set(), set()),
}


def run_checker(path):
    proc = subprocess.run([sys.executable, CHECKER, "--json", path], capture_output=True, text=True, timeout=300)
    if proc.returncode == 2:
        raise SystemExit(f"check_wacz.py could not check: {proc.stderr.strip()}")
    summary = json.loads(proc.stdout)
    return proc.returncode, summary


def main():
    failures = []
    with tempfile.TemporaryDirectory(prefix="test-check-wacz-") as tmp:
        for number, (name, (edit, kwargs, expected, allowed)) in enumerate(CASES.items()):
            if edit == "wget":
                parts = wget_parts(tmp)
            else:
                parts = sample_parts()
                if edit:
                    edit(parts)
            path = hb.write_wacz(os.path.join(tmp, f"case{number}.wacz"), parts, **kwargs)
            code, summary = run_checker(path)
            seen = {e["check"] for e in summary["errors"]}
            messages = "; ".join(f"[{e['check']}] {e['message']}" for e in summary["errors"]) or "no problems"
            ok = (code == 0) if not expected else (code == 1 and expected <= seen and seen <= expected | allowed)
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {code}, {messages}")
            if not ok:
                failures.append(name)
        # A WARC that is not gzip at all: the walk and warcio both object.
        parts = sample_parts()
        parts.warcs[hb.WARC_NAME] = b"not a warc at all\n"
        code, summary = run_checker(hb.write_wacz(os.path.join(tmp, "garbage.wacz"), parts))
        seen = {e["check"] for e in summary["errors"]}
        ok = code == 1 and "warc-member" in seen
        print(f"{'ok  ' if ok else 'FAIL'} garbage WARC: exit {code}, checks {sorted(seen)}")
        if not ok:
            failures.append("garbage WARC")
    if failures:
        print(f"test_check_wacz: {len(failures)} case(s) failed: {', '.join(failures)}")
        return 1
    print(f"test_check_wacz: all {len(CASES) + 1} cases behave")
    return 0


if __name__ == "__main__":
    sys.exit(main())
