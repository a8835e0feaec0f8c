#!/usr/bin/env python3
"""Snapshot hook: the non-browser capture. The page with its requisites (CSS,
images, scripts) via wget, links rewritten for offline viewing, recorded as a
WARC too; title and links from the saved page.

By default (HTML_ONLY_WITHOUT_BROWSER=true) it runs only when the crawl has no
browser ($CRAWL_DIR/chrome/unavailable.txt, or no answering cdp_url.txt): with
a browser the visit plugin captures the page and this hook reports `skipped`,
so the page is fetched once by the browser capture plus at most once here.

Runs: wget --page-requisites --convert-links --adjust-extension
--no-host-directories -e robots=off --timeout=T --tries=2
--warc-file=warc/<snapshot-id>-wget --no-warc-keep-log <url>, bounded as a
whole by the plugin timeout. output_str is the path of the main document
relative to this directory. Prints the title record and one Snapshot record
per link of the saved page (links wget did not download are absolute after
--convert-links; the others are relative paths that resolve against the page
URL to the same URL, since --no-host-directories keeps the URL's path).
Config (env, defaults from config.json): HTML_TIMEOUT, HTML_WGET_BINARY,
HTML_USER_AGENT, HTML_ONLY_WITHOUT_BROWSER, HTML_MAX_LINKS. See plugins/README.md.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep the plugins directory clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "chrome"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import cdp  # noqa: E402
import hooklib  # noqa: E402
import html_page  # noqa: E402
from hooklib import as_bool, budget, emit  # noqa: E402

OPTIONS = hooklib.Options("HTML_", __file__)


# wget --no-verbose: '2025-01-01 12:00:00 URL:http://h/p [123/123] -> "p.html" [1]'
SAVED = re.compile(r'URL:\s*(\S+).*?->\s*"(.+?)"')
WARC_DIR = "warc"


def list_files(root):
    out = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def crawl_has_browser():
    """True when the crawl's chrome hook published a browser that answers."""
    if cdp.crawl_chrome_unavailable():
        return False
    ws_url = cdp.read_crawl_cdp_url()
    return bool(ws_url) and cdp.browser_answers(ws_url, timeout=2.0)


def snapshot_id():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--snapshot-id", default="")
    args, _ = parser.parse_known_args()
    sid = args.snapshot_id or os.path.basename(os.environ.get("SNAP_DIR", "").rstrip("/")) or "snapshot"
    return "".join(c for c in sid if c.isalnum() or c in "-_") or "snapshot"


def main():
    args = hooklib.parse_args()
    if args is None:
        return 0
    started = time.monotonic()
    only_without_browser = as_bool(OPTIONS.opt("only_without_browser", True))
    if only_without_browser:
        hooklib.wait_for_crawl_browser(started + min(15.0, 0.25 * budget(max(1.0, OPTIONS.num("timeout", 60)))))
    if only_without_browser and crawl_has_browser():
        reason = "the crawl has a browser: the visit plugin captures the page (HTML_ONLY_WITHOUT_BROWSER=true)"
        emit("skipped", output_str="browser capture instead", error=reason)
        return 0

    timeout = max(1.0, OPTIONS.num("timeout", 60))
    limit = budget(timeout)

    wget = hooklib.find_tool("wget", str(OPTIONS.opt("wget_binary", "wget") or "wget"))
    if not wget:
        return 0

    cmd = [
        wget,
        "--no-verbose",
        "--page-requisites",
        "--convert-links",
        "--adjust-extension",
        "--no-host-directories",
        "--no-parent",
        "-e",
        "robots=off",
        # wget's own (per read/connect) timeout stays above the overall
        # bound below, so a stalled page is reported as a timeout of the hook.
        f"--timeout={limit + 1:.1f}",
        "--tries=2",  # one retry for transient errors ("No data received"); bounded below
        "--restrict-file-names=unix",
        "--directory-prefix=.",
        # The WARC of this fetch (wget writes warcinfo, request, response and
        # resource records, WARC/1.0 with sha1 digests; no CDX by default).
        f"--warc-file={WARC_DIR}/{snapshot_id()}-wget",
        "--no-warc-keep-log",
    ]
    user_agent = str(OPTIONS.opt("user_agent", "") or "")
    if user_agent:
        cmd.append(f"--user-agent={user_agent}")
    cmd += ["--", args.url]

    os.makedirs(WARC_DIR, exist_ok=True)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        _, err = proc.communicate()
    log = err.decode("utf-8", "replace")
    if log.strip():
        print(log.rstrip(), file=sys.stderr)

    matches = list(SAVED.finditer(log))
    saved = [m.group(2) for m in matches]
    final_url = matches[0].group(1) if matches else args.url
    files = list_files(".")
    if timed_out:
        emit("failed", error=f"timed out after {timeout:g} s", output_json={"files": files})
        return 1
    main_doc = saved[0] if saved else None
    if main_doc and main_doc.startswith("./"):
        main_doc = main_doc[2:]
    if not main_doc or not os.path.isfile(main_doc):
        errors = [l.strip() for l in log.splitlines()
                  if any(w in l.lower() for w in ("error", "failed", "giving up", "unable"))]
        emit("failed", error=f"wget exit {proc.returncode}: " + ("; ".join(errors[-3:]) or "page not saved"))
        return 1
    # Exit 8 (server error on some requisite) still leaves a usable page.
    elapsed = time.monotonic() - started
    with open(main_doc, "rb") as fh:
        title, links = html_page.parse(hooklib.decode(fh.read()), final_url, int(OPTIONS.num("max_links", 1000)))
    if title:
        print(json.dumps({"type": "Snapshot", "title": title}), flush=True)
    for link in links:
        print(json.dumps({"type": "Snapshot", "url": link}), flush=True)
    warcs = [f for f in files if f.startswith(WARC_DIR + "/") and f.endswith((".warc.gz", ".warc"))]
    emit(
        "succeeded",
        output_str=main_doc,
        output_json={
            "main": main_doc,
            "files": files,
            "requisites": len(files) - 1 - len(warcs),
            "wget_exit": proc.returncode,
            "warc": warcs,
            "title": title,
            "links": len(links),
            "elapsed_seconds": round(elapsed, 3),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
