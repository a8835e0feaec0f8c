#!/usr/bin/env python3
"""Snapshot hook: the page title (<title>, parsed with html.parser).

Prints {"type":"Snapshot","title":...} (no url: sets the current snapshot's
title) and an ArchiveResult with output_str = the title; writes title.txt.
Config (env, defaults from config.json): TITLE_TIMEOUT, TITLE_USER_AGENT,
TITLE_MAX_BYTES. See plugins/README.md.
"""

import json
import os
import re
import sys
from html.parser import HTMLParser

sys.dont_write_bytecode = True  # keep the plugins directory clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hooklib  # noqa: E402
from hooklib import emit, fetch_page  # noqa: E402

OPTIONS = hooklib.Options("TITLE_", __file__)


class TitleParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []
        self.inside = False
        self.done = False

    def handle_starttag(self, tag, attrs):
        if tag == "title" and not self.done:
            self.inside = True

    def handle_endtag(self, tag):
        if tag == "title" and self.inside:
            self.inside = False
            self.done = True

    def handle_data(self, data):
        if self.inside and not self.done:
            self.parts.append(data)


def main():
    args = hooklib.parse_args()
    if args is None:
        return 0
    timeout = max(1.0, OPTIONS.num("timeout", 30))
    page = fetch_page(args.url, timeout, int(OPTIONS.num("max_bytes", 5 * 1024 * 1024)),
                      str(OPTIONS.opt("user_agent", "") or ""))
    if page is None:
        return 1
    _, ctype, text = page
    if "html" not in ctype and "xml" not in ctype:
        emit("noresults", output_str="", error=f"not an HTML page ({ctype})")
        return 0
    tp = TitleParser()
    try:
        tp.feed(text)
        tp.close()
    except Exception as exc:  # html.parser is lenient; be safe anyway
        print(f"title: parse error: {exc}", file=sys.stderr)
    title = re.sub(r"\s+", " ", "".join(tp.parts)).strip()
    if not title:
        emit("noresults", output_str="", error="the page has no <title>")
        return 0
    with open("title.txt", "w", encoding="utf-8") as fh:
        fh.write(title + "\n")
    print(json.dumps({"type": "Snapshot", "title": title}), flush=True)
    emit("succeeded", output_str=title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
