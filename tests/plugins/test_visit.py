#!/usr/bin/env python3
"""Standalone test of the visit plugin (and the html plugin's WARC fallback):
runs the hooks by hand, the way the workers do (argv, cwd, allow-listed env),
against tests/support/archive_site.py on 127.0.0.1 / 127.0.0.2.

    ORCH_SOURCE_DIR=/repo ORCH_TEST_TOOLS=/repo/build/test-tools python3 tests/plugins/test_visit.py

Checks the WARC with its own reader (not the plugin's writer): every response
of the page with its body, digests recomputed, request/response pairing,
redirects, revisits, truncation, rollover; warcio.js (ORCH_TEST_TOOLS) must
index every WARC. Prints PASS:/FAIL: lines and "N passed, M failed"; exits 1 on
any failure. A missing tool is a failure, never a skip.
"""

import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

SRC = os.environ.get("ORCH_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLUGINS = os.path.join(SRC, "plugins")
TOOLS = os.environ.get("ORCH_TEST_TOOLS", "")
WARCIO = os.path.join(TOOLS, "node_modules", ".bin", "warcio")
RESULTS = {"passed": 0, "failed": 0}


def check(what, ok, detail=""):
    if ok:
        RESULTS["passed"] += 1
        print(f"PASS: {what}", flush=True)
    else:
        RESULTS["failed"] += 1
        print(f"FAIL: {what}" + (f"\n  {str(detail)[:1500]}" if detail else ""), flush=True)
    return ok


# -- a WARC reader (independent of plugins/visit/warc_writer.py) -----------------


def read_warc(path):
    """[(fields dict, block bytes)] of every record; raises on malformed input."""
    with open(path, "rb") as fh:
        data = gzip.decompress(fh.read())  # concatenated members read as one stream
    stream = io.BytesIO(data)
    records = []
    while True:
        line = stream.readline()
        while line in (b"\r\n", b"\n"):
            line = stream.readline()
        if not line:
            return records
        version = line.strip().decode()
        if version not in ("WARC/1.1", "WARC/1.0"):
            raise ValueError(f"bad version line {line!r}")
        fields = {"_version": version}
        while True:
            line = stream.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("utf-8").partition(":")
            fields[name.strip()] = value.strip()
        block = stream.read(int(fields["Content-Length"]))
        if stream.read(4) != b"\r\n\r\n":
            raise ValueError("record not followed by CRLF CRLF")
        records.append((fields, block))


def gzip_members(path):
    """Number of gzip members of the file."""
    with open(path, "rb") as fh:
        data = fh.read()
    count = 0
    while data:
        d = __import__("zlib").decompressobj(16 + 15)
        d.decompress(data)
        data = d.unused_data
        count += 1
    return count


def split_http(block):
    head, _, payload = block.partition(b"\r\n\r\n")
    lines = head.decode("utf-8", "replace").split("\r\n")
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    return lines[0], headers, payload


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- running hooks ------------------------------------------------------------------

WORK = tempfile.mkdtemp(prefix="orch-visit-test-")
DATA = os.path.join(WORK, "data")
STARTED = []


def hook_env(crawl_dir, snap=None, extra=None):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
           "LANG": "C.UTF-8", "TMPDIR": os.path.join(WORK, "tmp"), "DATA_DIR": DATA, "CRAWL_DIR": crawl_dir}
    if snap:
        env["SNAP_DIR"] = os.path.join(DATA, "snapshots", snap)
    env.update(extra or {})
    return env


def run_hook(plugin, hook, url, crawl_dir, extra=None, snap=None):
    """Returns (snapshot id, records, hook dir, rc, stderr)."""
    snap = snap or str(uuid.uuid4())
    cwd = os.path.join(DATA, "snapshots", snap, plugin)
    os.makedirs(cwd, exist_ok=True)
    proc = subprocess.run([sys.executable, os.path.join(PLUGINS, plugin, hook), f"--url={url}",
                           f"--snapshot-id={snap}", f"--crawl-id={os.path.basename(crawl_dir)}"],
                          cwd=cwd, env=hook_env(crawl_dir, snap, extra), stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=120)
    recs = [json.loads(l) for l in proc.stdout.decode().splitlines() if l.strip()]
    return snap, recs, cwd, proc.returncode, proc.stderr.decode("utf-8", "replace")


def result_of(recs):
    ars = [r for r in recs if r.get("type") == "ArchiveResult"]
    return ars[0] if len(ars) == 1 else {}


def visit(url, crawl_dir, extra=None):
    snap, recs, cwd, rc, err = run_hook("visit", "on_Snapshot__20_visit.py", url, crawl_dir, extra)
    ar = result_of(recs)
    records = []
    for f in (ar.get("output_json", {}).get("outputs", {}).get("warc", {}).get("files") or []):
        records.append((f, read_warc(os.path.join(cwd, f))))
    return snap, recs, ar, cwd, records, err


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def warcio_reads(path, expected_records):
    if not os.access(WARCIO, os.X_OK):
        return False, f"warcio.js CLI missing at {WARCIO} (set ORCH_TEST_TOOLS; scripts/setup installs it)"
    proc = subprocess.run([WARCIO, "index", path], capture_output=True, timeout=60)
    lines = [l for l in proc.stdout.decode().splitlines() if l.strip()]
    ok = proc.returncode == 0 and not proc.stderr.strip() and len(lines) == expected_records
    return ok, f"rc={proc.returncode} lines={len(lines)} expected={expected_records} err={proc.stderr[:300]!r}"


def responses_by_uri(records):
    out = {}
    for _, recs in records:
        for fields, block in recs:
            if fields.get("WARC-Type") in ("response", "revisit"):
                out.setdefault(fields["WARC-Target-URI"], []).append((fields, block))
    return out


def verify_records(tag, records):
    """Per-record invariants of every visit WARC."""
    problems = []
    ids = {}
    for name, recs in records:
        if not recs or recs[0][0].get("WARC-Type") != "warcinfo":
            problems.append(f"{name}: first record is not warcinfo")
        for fields, block in recs:
            ids[fields.get("WARC-Record-ID")] = fields
            if fields["_version"] != "WARC/1.1":
                problems.append(f"{name}: {fields['_version']}")
            if fields.get("WARC-Block-Digest") != sha256(block):
                problems.append(f"{name}: block digest of {fields.get('WARC-Target-URI')}")
            kind = fields.get("WARC-Type")
            if kind in ("response", "request"):
                _, headers, payload = split_http(block)
                if fields.get("WARC-Payload-Digest") != sha256(payload):
                    problems.append(f"{name}: payload digest of {kind} {fields.get('WARC-Target-URI')}")
                if kind == "response":
                    if headers.get("content-length") != str(len(payload)):
                        problems.append(f"{name}: Content-Length of {fields.get('WARC-Target-URI')}")
                    if "content-encoding" in headers or "transfer-encoding" in headers:
                        problems.append(f"{name}: encoding header kept for {fields.get('WARC-Target-URI')}")
            if kind == "revisit" and fields.get("WARC-Profile") != \
                    "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest":
                problems.append(f"{name}: revisit profile")
    for name, recs in records:
        for fields, _ in recs:
            if fields.get("WARC-Type") == "request":
                target = ids.get(fields.get("WARC-Concurrent-To"))
                if not target or target.get("WARC-Target-URI") != fields.get("WARC-Target-URI"):
                    problems.append(f"{name}: request {fields.get('WARC-Target-URI')} not concurrent to its response")
    check(f"{tag}: WARC/1.1, warcinfo first, digests verify, requests paired, decoded bodies", not problems, problems)


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    os.makedirs(os.path.join(WORK, "tmp"))
    ready = os.path.join(WORK, "site.json")
    site = subprocess.Popen([sys.executable, os.path.join(SRC, "tests", "support", "archive_site.py"),
                             "--ready-file", ready, "--big-bytes", "300000"], stdout=subprocess.DEVNULL)
    STARTED.append(site)
    end = time.monotonic() + 15
    while not os.path.exists(ready) and time.monotonic() < end:
        time.sleep(0.05)
    addr = json.load(open(ready))
    main_url, req_url = addr["main"], addr["requisite"]
    print(f"archive site at {main_url} and {req_url}", flush=True)

    crawl_dir = os.path.join(DATA, "crawls", str(uuid.uuid4()))
    os.makedirs(os.path.join(crawl_dir, "chrome"))
    chrome = subprocess.Popen([sys.executable, os.path.join(PLUGINS, "chrome", "on_Crawl__10_chrome.bg.py"),
                               f"--url={main_url}/", f"--crawl-id={os.path.basename(crawl_dir)}"],
                              cwd=os.path.join(crawl_dir, "chrome"), env=hook_env(crawl_dir),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    STARTED.append(chrome)
    end = time.monotonic() + 30
    while not os.path.exists(os.path.join(crawl_dir, "chrome", "cdp_url.txt")) and time.monotonic() < end:
        time.sleep(0.1)
    check("chrome: crawl browser published cdp_url.txt", os.path.exists(os.path.join(crawl_dir, "chrome", "cdp_url.txt")))

    # -- the index: every response, once, with its body ---------------------------
    get_json(main_url + "/__reset")
    snap, recs, ar, cwd, records, err = visit(main_url + "/", crawl_dir)
    out = ar.get("output_json", {})
    check("visit index: succeeded through the crawl browser",
          ar.get("status") == "succeeded" and out.get("via") == "crawl browser", (ar, err[-800:]))
    by_uri = responses_by_uri(records)
    expected = {main_url + "/": b"Archive Site Index", main_url + "/data.json": b"fetched-by-fetch",
                main_url + "/xhr.txt": b"loaded-by-xhr", req_url + "/style.css": b"@font-face",
                req_url + "/pixel.png": b"\x89PNG", req_url + "/font.woff2": b"wOF2"}
    missing = [u for u, needle in expected.items()
               if not any(f["WARC-Type"] == "response" and needle in split_http(b)[2] for f, b in by_uri.get(u, []))]
    check("visit index: document, fetch(), XHR, CSS, font and image (two hosts) are responses with their bodies",
          not missing, f"missing {missing}; have {sorted(by_uri)}")
    data_rec = [split_http(b)[1] for f, b in by_uri.get(main_url + "/data.json", [])]
    check("visit index: gzip body stored decoded, original encoding kept as X-Archive-Orig-Content-Encoding",
          bool(data_rec) and data_rec[0].get("x-archive-orig-content-encoding") == "gzip", data_rec)
    verify_records("visit index", records)
    counts = get_json(main_url + "/__counts")
    once = {"main": ["/", "/data.json", "/xhr.txt"], "requisite": ["/style.css", "/pixel.png", "/font.woff2"]}
    check("visit index: each URL of the page fetched exactly once",
          all(counts[role].get(p) == 1 for role, paths in once.items() for p in paths), counts)
    for name, recs_in in records:
        ok, detail = warcio_reads(os.path.join(cwd, name), len(recs_in))
        check(f"visit index: warcio index reads {name}", ok, detail)
    snaps = [r for r in recs if r.get("type") == "Snapshot"]
    links = {r["url"] for r in snaps if "url" in r}
    check("visit index: title record and links, the script-added link included",
          {"type": "Snapshot", "title": "Archive Site Index"} in snaps
          and {main_url + "/added-by-script.html", main_url + "/about.html", main_url + "/old"} <= links, snaps)

    def head(name, n):
        try:
            with open(os.path.join(cwd, name), "rb") as fh:
                return fh.read(n)
        except OSError:
            return b""

    dom = head("dom.html", 1 << 20)
    check("visit index: screenshot.png, output.pdf, title.txt, links.json, headers.json from the same visit",
          head("screenshot.png", 8) == b"\x89PNG\r\n\x1a\n" and head("output.pdf", 5) == b"%PDF-"
          and head("title.txt", 100).strip() == b"Archive Site Index"
          and main_url + "/added-by-script.html" in json.loads(head("links.json", 1 << 20))["links"]
          and json.loads(head("headers.json", 1 << 20))["status"] == 200)
    check("visit index: dom.html is the rendered DOM with doctype (script results in it)",
          dom.startswith(b"<!DOCTYPE html>") and b"fetched-by-fetch" in dom and b"loaded-by-xhr" in dom, dom[:200])
    check("visit index: output_json lists outputs and WARC record counts",
          all(out.get("outputs", {}).get(k, {}).get("status") == "succeeded"
              for k in ("warc", "screenshot", "pdf", "dom", "title", "links", "headers"))
          and out.get("warc_records", {}).get("warcinfo") == 1, out)
    css_hex = hashlib.sha256([split_http(b)[2] for f, b in by_uri[req_url + "/style.css"]][0]).hexdigest() \
        if by_uri.get(req_url + "/style.css") else "none"
    check("visit index: payload index entry for style.css in $CRAWL_DIR/visit/payloads/",
          os.path.isfile(os.path.join(crawl_dir, "visit", "payloads", css_hex)))

    # -- redirect, and the same CSS again: a revisit --------------------------------
    snap2, recs2, ar2, cwd2, records2, err2 = visit(main_url + "/old", crawl_dir)
    by2 = responses_by_uri(records2)
    old = [split_http(b) for f, b in by2.get(main_url + "/old", [])]
    check("visit /old: the 301 and the target page are in the WARC",
          ar2.get("status") == "succeeded" and old and old[0][0].startswith("HTTP/1.1 301")
          and old[0][1].get("location") == "/new.html"
          and any(f["WARC-Type"] == "response" for f, _ in by2.get(main_url + "/new.html", [])), (ar2, err2[-500:]))
    hdrs = json.loads(open(os.path.join(cwd2, "headers.json")).read()) if os.path.exists(
        os.path.join(cwd2, "headers.json")) else {}
    check("visit /old: headers.json is the final document with the redirect listed",
          hdrs.get("status") == 200 and hdrs.get("final_url") == main_url + "/new.html"
          and [r["status"] for r in hdrs.get("redirects", [])] == [301], hdrs)
    css2 = by2.get(req_url + "/style.css", [])
    check("visit /old: the same style.css is a revisit referring to the first visit's record",
          len(css2) == 1 and css2[0][0]["WARC-Type"] == "revisit"
          and css2[0][0].get("WARC-Refers-To-Target-URI") == req_url + "/style.css"
          and css2[0][0].get("WARC-Refers-To-Date") == by_uri[req_url + "/style.css"][0][0]["WARC-Date"]
          and css2[0][0].get("WARC-Payload-Digest") == "sha256:" + css_hex, [f for f, _ in css2])
    verify_records("visit /old", records2)
    for name, recs_in in records2:
        ok, detail = warcio_reads(os.path.join(cwd2, name), len(recs_in))
        check(f"visit /old: warcio index reads {name} (with a revisit)", ok, detail)

    # -- byte cap: truncated, never dropped -------------------------------------------
    snap3, recs3, ar3, cwd3, records3, err3 = visit(main_url + "/big.html", crawl_dir,
                                                    {"VISIT_MAX_PAGE_BYTES": "100000"})
    big = responses_by_uri(records3).get(main_url + "/big.html", [])
    check("visit /big.html: the response crossing VISIT_MAX_PAGE_BYTES is stored truncated (WARC-Truncated: length)",
          ar3.get("status") == "succeeded" and len(big) == 1 and big[0][0].get("WARC-Truncated") == "length"
          and len(split_http(big[0][1])[2]) == 100000 and ar3["output_json"].get("truncated", 0) >= 1,
          (ar3, [f for f, _ in big]))
    verify_records("visit /big.html", records3)

    # -- rollover -----------------------------------------------------------------------
    snap4, recs4, ar4, cwd4, records4, err4 = visit(main_url + "/", crawl_dir,
                                                    {"VISIT_WARC_MAX_BYTES": "2500", "VISIT_PDF": "false",
                                                     "VISIT_SCREENSHOT": "false"})
    names = [n for n, _ in records4]
    check("visit rollover: several files <snapshot-id>-NNNNN.warc.gz, each starting with warcinfo",
          len(names) >= 2 and names[0] == f"warc/{snap4}-00000.warc.gz"
          and all(r and r[0][0]["WARC-Type"] == "warcinfo" for _, r in records4)
          and all(gzip_members(os.path.join(cwd4, n)) == len(r) for n, r in records4), names)
    check("visit rollover: VISIT_PDF/VISIT_SCREENSHOT=false skip those outputs",
          not os.path.exists(os.path.join(cwd4, "output.pdf"))
          and ar4.get("output_json", {}).get("outputs", {}).get("pdf", {}).get("status") == "skipped")
    verify_records("visit rollover", records4)
    all_ok = all(warcio_reads(os.path.join(cwd4, n), len(r))[0] for n, r in records4)
    check("visit rollover: warcio index reads every file", all_ok)

    # -- a page that does not load ----------------------------------------------------------
    closed = __import__("socket").socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    _, recs5, ar5, _, _, _ = visit(f"http://127.0.0.1:{closed.getsockname()[1]}/", crawl_dir)
    closed.close()
    check("visit: a refused connection is failed with the reason",
          ar5.get("status") == "failed" and "ERR_CONNECTION_REFUSED" in ar5.get("error", ""), ar5)

    # -- html (wget): skipped with a browser, the fallback without one ------------------------
    recs6 = run_hook("html", "on_Snapshot__20_html.py", main_url + "/", crawl_dir)[1]
    check("html: skipped while the crawl has a browser (HTML_ONLY_WITHOUT_BROWSER)",
          result_of(recs6).get("status") == "skipped", recs6)
    stop(chrome)

    snap7, recs7, cwd7, rc7, err7 = run_hook("html", "on_Snapshot__20_html.py", main_url + "/", crawl_dir)
    ar7 = result_of(recs7)
    warc7 = os.path.join(cwd7, "warc", f"{snap7}-wget.warc.gz")
    check("html: without a browser wget writes warc/<snapshot-id>-wget.warc.gz",
          ar7.get("status") == "succeeded" and os.path.isfile(warc7), (ar7, err7[-500:]))
    if os.path.isfile(warc7):
        wrecs = read_warc(warc7)
        check("html: the wget WARC has the page's response", any(
            f.get("WARC-Type") == "response" and f.get("WARC-Target-URI", "").strip("<>") == main_url + "/"
            and b"Archive Site Index" in split_http(b)[2] for f, b in wrecs))
        ok, detail = warcio_reads(warc7, len(wrecs))
        check("html: warcio index reads the wget WARC", ok, detail)
    snaps7 = [r for r in recs7 if r.get("type") == "Snapshot"]
    check("html: title and links of the saved page are emitted",
          {"type": "Snapshot", "title": "Archive Site Index"} in snaps7
          and main_url + "/about.html" in {r.get("url") for r in snaps7}, snaps7)

    # -- one-off chromium, and no chromium ---------------------------------------------------
    snap8, recs8, ar8, cwd8, records8, err8 = visit(main_url + "/about.html", crawl_dir)
    check("visit: one-off chromium when the crawl browser is gone",
          ar8.get("status") == "succeeded" and ar8["output_json"].get("via") == "one-off chromium"
          and os.path.exists(os.path.join(cwd8, "screenshot.png")), (ar8, err8[-500:]))
    with open(os.path.join(crawl_dir, "chrome", "unavailable.txt"), "w") as fh:
        fh.write("chromium not found (/nonexistent)\n")
    _, recs9, ar9, cwd9, _, _ = visit(main_url + "/", crawl_dir)
    check("visit: skipped with the reason when the crawl found no chromium",
          ar9.get("status") == "skipped" and "/nonexistent" in ar9.get("error", "") and not os.listdir(cwd9), ar9)


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # a crash is a failure with its reason
        import traceback
        traceback.print_exc()
        check("test_visit ran to the end", False, repr(exc))
    finally:
        for proc in reversed(STARTED):
            stop(proc)
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    sys.exit(1 if RESULTS["failed"] else 0)
