#!/usr/bin/env python3
"""Snapshot hook: the page title (<title>, parsed with html.parser).

Prints {"type":"Snapshot","title":...} (no url: sets the current snapshot's
title) and an ArchiveResult with output_str = the title; writes title.txt.
Config (env, defaults from config.json): TITLE_TIMEOUT, TITLE_USER_AGENT,
TITLE_MAX_BYTES. See plugins/README.md.
"""

import argparse
import json
import os
import re
import signal
import sys
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "TITLE_"


def load_config():
    try:
        with open(os.path.join(HERE, "config.json"), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


CONFIG = load_config()


def opt(key, default=None):
    value = os.environ.get(PREFIX + key.upper())
    return CONFIG.get(key, default) if value is None else value


def num(key, default):
    try:
        return float(opt(key, default))
    except (TypeError, ValueError):
        return float(default)


def emit(status, output_str="", error="", output_json=None):
    record = {"type": "ArchiveResult", "status": status, "output_str": output_str}
    if output_json is not None:
        record["output_json"] = output_json
    if error:
        record["error"] = error
    print(json.dumps(record), flush=True)


def http_url(url):
    """Only http(s) URLs are archived (no file://, no option-looking text)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc) and not url.startswith("-")


def budget(timeout):
    return max(0.5, timeout - min(5.0, max(1.5, 0.15 * timeout)))


class Deadline(Exception):
    """The plugin's time budget ran out."""


def _alarm(_signum, _frame):
    raise Deadline()


def fetch(url, seconds, max_bytes, user_agent):
    """GET url with urllib, the whole exchange bounded by `seconds` (SIGALRM).
    Returns (final_url, status, content_type, charset, body)."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        headers = {"User-Agent": user_agent} if user_agent else {}
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=seconds) as resp:
            body = resp.read(max_bytes)
            return (resp.geturl(), resp.status, resp.headers.get_content_type(),
                    resp.headers.get_content_charset(), body)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def decode(body, charset):
    if not charset:
        m = re.search(rb'<meta[^>]+charset=["\']?([A-Za-z0-9_.:-]+)', body[:4096], re.I)
        charset = m.group(1).decode("ascii") if m else "utf-8"
    try:
        return body.decode(charset, "replace")
    except LookupError:
        return body.decode("utf-8", "replace")

def fetch_page(url, timeout, max_bytes):
    """Fetch and decode the page; on failure print the ArchiveResult and return None."""
    try:
        final_url, status, ctype, charset, body = fetch(url, budget(timeout), max_bytes, str(opt("user_agent", "") or ""))
    except Deadline:
        emit("failed", error=f"timed out after {timeout:g} s")
        return None
    except urllib.error.HTTPError as exc:
        emit("failed", error=f"HTTP {exc.code} {exc.reason}")
        return None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        emit("failed", error=f"fetch failed: {getattr(exc, 'reason', exc)}")
        return None
    return final_url, ctype, decode(body, charset)



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
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--url", required=True)
    args, _ = parser.parse_known_args()
    if not http_url(args.url):
        emit("skipped", output_str="not an http(s) URL", error=f"unsupported URL (only http and https): {args.url[:200]}")
        return 0
    timeout = max(1.0, num("timeout", 30))
    page = fetch_page(args.url, timeout, int(num("max_bytes", 5 * 1024 * 1024)))
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
