#!/usr/bin/env python3
"""Snapshot hook: outgoing http(s) links of the page.

Resolves <a href>/<area href> against the page URL (and <base href>), strips
fragments, dedupes, drops the page itself; prints one {"type":"Snapshot",
"url":...} record per link (the worker creates child snapshots up to the
crawl's max depth), writes links.json and an ArchiveResult. Config (env,
defaults from config.json): LINKS_TIMEOUT, LINKS_USER_AGENT, LINKS_MAX_BYTES,
LINKS_MAX_LINKS. See plugins/README.md.
"""

import json
import os
import sys
import urllib.parse
from html.parser import HTMLParser

sys.dont_write_bytecode = True  # keep the plugins directory clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hooklib  # noqa: E402
from hooklib import emit, fetch_page  # noqa: E402

OPTIONS = hooklib.Options("LINKS_", __file__)


class LinkParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.base = None
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        href = attrs.get("href")
        if not href:
            return
        if tag == "base" and self.base is None:
            self.base = href.strip()
        elif tag in ("a", "area"):
            self.hrefs.append(href.strip())


def normalize(base, href):
    try:
        absolute = urllib.parse.urljoin(base, href)
        absolute, _ = urllib.parse.urldefrag(absolute)
        parts = urllib.parse.urlsplit(absolute)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        parts.port  # raises ValueError on a bad port
    except ValueError:
        return None
    return absolute


def main():
    args = hooklib.parse_args()
    if args is None:
        return 0
    timeout = max(1.0, OPTIONS.num("timeout", 30))
    max_links = int(OPTIONS.num("max_links", 1000))
    page = fetch_page(args.url, timeout, int(OPTIONS.num("max_bytes", 10 * 1024 * 1024)),
                      str(OPTIONS.opt("user_agent", "") or ""))
    if page is None:
        return 1
    final_url, ctype, text = page
    if "html" not in ctype:
        emit("noresults", output_str="0 links", error=f"not an HTML page ({ctype})")
        return 0
    lp = LinkParser()
    try:
        lp.feed(text)
        lp.close()
    except Exception as exc:
        print(f"links: parse error: {exc}", file=sys.stderr)
    base = urllib.parse.urljoin(final_url, lp.base) if lp.base else final_url
    own = {normalize(args.url, ""), normalize(final_url, "")}
    seen, found = set(), []
    for href in lp.hrefs:
        url = normalize(base, href)
        if url is None or url in own or url in seen:
            continue
        seen.add(url)
        found.append(url)
        if len(found) >= max_links:
            print(f"links: stopped at {max_links} links (LINKS_MAX_LINKS)", file=sys.stderr)
            break
    with open("links.json", "w", encoding="utf-8") as fh:
        json.dump({"url": args.url, "final_url": final_url, "count": len(found), "links": found}, fh, indent=2)
        fh.write("\n")
    for url in found:
        print(json.dumps({"type": "Snapshot", "url": url}), flush=True)
    if not found:
        emit("noresults", output_str="0 links")
        return 0
    emit("succeeded", output_str=f"{len(found)} links", output_json={"count": len(found)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
