#!/usr/bin/env python3
"""Snapshot hook: outgoing http(s) links of the page.

Resolves <a href>/<area href> against the page URL (and <base href>), strips
fragments, dedupes, drops the page itself; prints one {"type":"Snapshot",
"url":...} record per link (the worker creates child snapshots up to the
crawl's max depth), writes links.json and an ArchiveResult. Config (env,
defaults from config.json): LINKS_TIMEOUT, LINKS_USER_AGENT, LINKS_MAX_BYTES,
LINKS_MAX_LINKS. See plugins/README.md.
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
PREFIX = "LINKS_"


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
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--url", required=True)
    args, _ = parser.parse_known_args()
    if not http_url(args.url):
        emit("skipped", output_str="not an http(s) URL", error=f"unsupported URL (only http and https): {args.url[:200]}")
        return 0
    timeout = max(1.0, num("timeout", 30))
    max_links = int(num("max_links", 1000))
    page = fetch_page(args.url, timeout, int(num("max_bytes", 10 * 1024 * 1024)))
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
