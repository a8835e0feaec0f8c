#!/usr/bin/env python3
"""Snapshot hook: one browser visit of the page, recorded as WARC/1.1, with
every capture (screenshot, PDF, DOM, title, links, headers) from that visit.

Uses the crawl's Chromium ($CRAWL_DIR/chrome/cdp_url.txt, when it answers),
else a one-off headless chromium; skipped when the crawl's chrome hook found
no chromium ($CRAWL_DIR/chrome/unavailable.txt) or none is found. Writes in
its directory: warc/<snapshot-id>-<NNNNN>.warc.gz, screenshot.png,
output.pdf, dom.html, title.txt, links.json, headers.json. Prints the title
record, one Snapshot record per link and one ArchiveResult. Options
(VISIT_<KEY>, defaults in config.json) and the WARC layout: plugins/README.md.
"""

import argparse
import json
import os
import sys
import time
import uuid

sys.dont_write_bytecode = True  # keep the plugins directory clean
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "chrome"))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
import cdp  # noqa: E402
import hooklib  # noqa: E402
from exchange_records import write_exchange  # noqa: E402
from hooklib import as_bool, budget, emit  # noqa: E402
from oneoff_browser import OneOffBrowser  # noqa: E402
from page_visit import VisitOptions, visit  # noqa: E402
from payload_index import PayloadIndex  # noqa: E402
from warc_writer import WarcWriter  # noqa: E402

OPTIONS = hooklib.Options("VISIT_", __file__)
MAGIC = {"screenshot": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


def log(msg):
    print(f"visit: {msg}", file=sys.stderr, flush=True)


def snapshot_id():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--snapshot-id", default="")
    args, _ = parser.parse_known_args()
    sid = args.snapshot_id or os.path.basename(os.environ.get("SNAP_DIR", "").rstrip("/"))
    safe = "".join(c for c in sid if c.isalnum() or c in "-_")
    return safe or str(uuid.uuid4())


def write_file(name, data):
    with open(name, "wb") as fh:
        fh.write(data)
    return len(data)


def main_document(recorder, loader_id):
    """The hops of the main document's request (redirects first), or []."""
    hops = [ex for ex in recorder.exchanges if loader_id and ex.request_id == loader_id]
    if not hops:
        docs = [ex for ex in recorder.exchanges if ex.resource_type == "Document"]
        hops = [ex for ex in docs if ex.request_id == docs[0].request_id] if docs else []
    return hops


def main():
    started = time.monotonic()
    args = hooklib.parse_args()
    if args is None:
        return 0
    opt, num = OPTIONS.opt, OPTIONS.num
    timeout = max(1.0, num("timeout", 90))
    deadline = started + budget(timeout)
    # Captures (screenshot, PDF) need time after the load: keep a quarter of
    # the budget, at most 20 s, for them.
    load_deadline = deadline - min(20.0, 0.25 * (deadline - time.monotonic()))
    options = VisitOptions(
        width=num("width", 1280), height=num("height", 800), full_page=as_bool(opt("full_page", True)),
        max_screenshot_height=num("max_screenshot_height", 16384), screenshot=as_bool(opt("screenshot", True)),
        pdf=as_bool(opt("pdf", True)), dom=as_bool(opt("dom", True)),
        print_background=as_bool(opt("print_background", True)), idle_ms=num("network_idle_ms", 500),
        idle_timeout=num("network_idle_timeout", 10), max_page_bytes=num("max_page_bytes", 100_000_000),
        user_agent=str(opt("user_agent", "") or ""), fresh_context=as_bool(opt("fresh_context", False)))
    warc_max = num("warc_max_bytes", 1_000_000_000)
    max_links = int(num("max_links", 1000))

    hooklib.wait_for_crawl_browser(time.monotonic() + min(15.0, 0.25 * (deadline - time.monotonic())))
    reason = cdp.crawl_chrome_unavailable()
    if reason:
        emit("skipped", output_str=reason, error=reason)
        return 0
    ws_url = cdp.read_crawl_cdp_url()
    if ws_url and cdp.browser_answers(ws_url, timeout=min(3.0, max(0.5, deadline - time.monotonic()))):
        result, via = visit(ws_url, args.url, options, load_deadline, deadline), "crawl browser"
    else:
        if ws_url:
            log(f"crawl browser at {ws_url} does not answer; using a one-off chromium")
        configured = str(opt("chrome_binary", "") or os.environ.get("CHROME_BINARY", "") or "")
        binary = cdp.resolve_binary(configured)
        if not binary:
            reason = f"chromium not found ({configured or 'searched ' + ', '.join(cdp.DEFAULT_BINARIES)})"
            emit("skipped", output_str=reason, error=reason)
            return 0
        via = "one-off chromium"
        try:
            with OneOffBrowser(binary, load_deadline) as browser:
                result = visit(browser.ws_url, args.url, options, load_deadline, deadline)
        except (OSError, RuntimeError) as exc:
            emit("failed", error=f"{exc} (via {via})", output_json={"via": via})
            return 1
    return report(args.url, result, via, timeout, warc_max, max_links)


def report(url, result, via, timeout, warc_max, max_links):
    outputs = {}
    summary = {"via": via, "url": url, "outputs": outputs}
    recorder = result.recorder
    sid = snapshot_id()

    # The WARC: every finished exchange, even of a page that did not load.
    if recorder is not None and recorder.exchanges:
        recorder.pair_raw_headers()
        index = PayloadIndex(os.environ.get("CRAWL_DIR"))
        writer = WarcWriter(os.path.abspath("warc"), sid, warc_max,
                            [("software", "orchestrator visit plugin"), ("snapshot-id", sid)])
        kinds = {"response": 0, "revisit": 0}
        try:
            for ex in recorder.exchanges:
                kinds[write_exchange(writer, index, ex, sid)] += 1
            writer.close()  # fsyncs: only now may the index point into these files
            index.publish()
            outputs["warc"] = {"status": "succeeded", "files": writer.files,
                               "bytes": sum(os.path.getsize(f) for f in writer.files)}
        except OSError as exc:
            writer.close()
            outputs["warc"] = {"status": "failed", "files": writer.files, "error": str(exc)}
        summary["warc_records"] = dict(writer.counts)
        summary["responses"] = kinds["response"]
        summary["revisits"] = kinds["revisit"]
        summary["truncated"] = sum(1 for ex in recorder.exchanges if ex.truncated)
        summary["page_bytes"] = recorder.body_bytes
        summary["failed_requests"] = [{"url": u[:500], "error": e} for u, e in recorder.failed[:50]]
        summary["unfinished_requests"] = len(recorder.unfinished())
    else:
        outputs["warc"] = {"status": "failed", "error": "no response recorded"}

    hops = main_document(recorder, result.loader_id) if recorder is not None else []
    if hops:
        final = hops[-1]
        raw = final.raw_response or {}
        headers = raw.get("headers") or (final.response or {}).get("headers") or {}
        doc = {"url": url, "final_url": final.url, "status": final.status,
               "status_text": (final.response or {}).get("statusText", ""), "headers": headers,
               "mime_type": (final.response or {}).get("mimeType", ""),
               "protocol": (final.response or {}).get("protocol", ""),
               "redirects": [{"url": h.url, "status": h.status,
                              "location": next((v for k, v in ((h.response or {}).get("headers") or {}).items()
                                                if k.lower() == "location"), "")} for h in hops[:-1]]}
        size = write_file("headers.json", (json.dumps(doc, indent=2) + "\n").encode("utf-8"))
        outputs["headers"] = {"status": "succeeded", "bytes": size}
        summary["status"] = final.status
        summary["final_url"] = final.url
    summary["load_seconds"] = result.load_seconds
    summary["network_idle"] = result.network_idle

    if result.error:
        error = result.error
        if result.timed_out:
            error = f"timed out after {timeout:g} s: {error}"
        emit("failed", error=f"{error} (via {via})", output_json=summary)
        return 1

    def capture(name, file_name, data, enabled=True):
        if not enabled:
            outputs[name] = {"status": "skipped", "error": f"VISIT_{name.upper()}=false"}
        elif name in result.outputs:
            outputs[name] = {"status": "failed", "error": result.outputs[name]["error"]}
        elif data is None:
            outputs[name] = {"status": "failed", "error": "no data"}
        elif name in MAGIC and not data.startswith(MAGIC[name]):
            outputs[name] = {"status": "failed", "error": f"not a valid {name} file"}
        else:
            outputs[name] = {"status": "succeeded", "bytes": write_file(file_name, data)}

    title = " ".join((result.title or "").split())
    capture("title", "title.txt", (title + "\n").encode("utf-8") if title else None)
    if not title and "title" not in result.outputs:
        outputs["title"] = {"status": "noresults", "error": "the page has no title"}
    capture("screenshot", "screenshot.png", result.screenshot, as_bool(OPTIONS.opt("screenshot", True)))
    capture("pdf", "output.pdf", result.pdf, as_bool(OPTIONS.opt("pdf", True)))
    capture("dom", "dom.html", result.dom.encode("utf-8") if result.dom is not None else None,
            as_bool(OPTIONS.opt("dom", True)))

    final_url = result.final_url or summary.get("final_url") or url
    own = {hooklib.link_url("", url), hooklib.link_url("", final_url)}
    seen, links = set(), []
    for href in result.links:
        link = hooklib.link_url("", href)
        if link is None or link in own or link in seen:
            continue
        seen.add(link)
        links.append(link)
        if len(links) >= max_links:
            log(f"stopped at {max_links} links (VISIT_MAX_LINKS)")
            break
    if "links" in result.outputs:
        outputs["links"] = {"status": "failed", "error": result.outputs["links"]["error"]}
    else:
        size = write_file("links.json", (json.dumps({"url": url, "final_url": final_url, "count": len(links),
                                                     "links": links}, indent=2) + "\n").encode("utf-8"))
        outputs["links"] = {"status": "succeeded", "bytes": size, "count": len(links)}

    if title:
        print(json.dumps({"type": "Snapshot", "title": title}), flush=True)
    for link in links:
        print(json.dumps({"type": "Snapshot", "url": link}), flush=True)

    if outputs["warc"]["status"] != "succeeded" or not hops:
        emit("failed", error=outputs["warc"].get("error") or "the main document was not recorded",
             output_json=summary)
        return 1
    emit("succeeded", output_str=outputs["warc"]["files"][0], output_json=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
