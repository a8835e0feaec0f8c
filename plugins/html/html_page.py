"""Title and outgoing links of an HTML document (html.parser, lenient).

parse(text, page_url) returns (title, links): the first <title> with
entities decoded and whitespace collapsed ("" when missing), and the
absolute http(s) hrefs of <a>/<area>, resolved against <base href> (itself
resolved against page_url), fragments stripped, deduplicated in document
order, the page itself left out. Never raises for bad markup or bad URLs.
"""

import re
import urllib.parse
from html.parser import HTMLParser

import hooklib  # plugins/hooklib.py, on the path the html hook sets


class _Parser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.base = None
        self.hrefs = []
        self.title_parts = []
        self._in_title = False
        self._title_done = False

    def handle_starttag(self, tag, attrs):
        if tag == "title" and not self._title_done:
            self._in_title = True
        href = dict(attrs).get("href")
        if not href:
            return
        if tag == "base" and self.base is None:
            self.base = href.strip()
        elif tag in ("a", "area"):
            self.hrefs.append(href.strip())

    def handle_endtag(self, tag):
        if tag == "title" and self._in_title:
            self._in_title = False
            self._title_done = True

    def handle_data(self, data):
        if self._in_title:
            self.title_parts.append(data)


def normalize(base, href):
    """The absolute http(s) URL of href without fragment, or None."""
    return hooklib.link_url(base, href)


def parse(text, page_url, max_links=1000):
    parser = _Parser()
    try:
        parser.feed(text)
        parser.close()
    except Exception:  # html.parser is lenient; a failure only loses the rest of the page
        pass
    title = re.sub(r"\s+", " ", "".join(parser.title_parts)).strip()
    base = urllib.parse.urljoin(page_url, parser.base) if parser.base else page_url
    own = {normalize(page_url, "")}
    seen, links = set(), []
    for href in parser.hrefs:
        url = normalize(base, href)
        if url is None or url in own or url in seen:
            continue
        seen.add(url)
        links.append(url)
        if len(links) >= max_links:
            break
    return title, links
