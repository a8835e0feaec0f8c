"""HTTP/1.1 request and response messages as the WARC stores them.

The browser gives headers as a dict (several values of one header joined by
newlines) and, over HTTP/2, no reason phrase; the messages are written in
HTTP/1.1 form either way. The body the browser hands out is decoded, so the
response loses Content-Encoding and Transfer-Encoding (kept as
X-Archive-Orig-<name>) and gets Content-Length = the stored length (the
original kept as X-Archive-Orig-Content-Length when it differs).
"""

import http
import urllib.parse

_DROPPED = {"content-encoding", "transfer-encoding"}


def header_pairs(headers):
    """[(name, value)] from a CDP header dict; pseudo-headers (:path) dropped."""
    pairs = []
    for name, value in (headers or {}).items():
        if not name or name.startswith(":"):
            continue
        for part in str(value).split("\n"):
            pairs.append((name, part.replace("\r", "")))
    return pairs


def reason_phrase(status, headers_text=None, status_text=None):
    """The reason phrase: from the raw status line when the browser saw one,
    else the browser's statusText, else the standard phrase."""
    if headers_text:
        first = headers_text.split("\r\n", 1)[0].split(" ", 2)
        if len(first) == 3 and first[2].strip():
            return first[2].strip()
    if status_text:
        return status_text
    try:
        return http.HTTPStatus(int(status)).phrase
    except ValueError:
        return ""


def _head(first_line, pairs):
    text = first_line + "\r\n" + "".join(f"{n}: {v}\r\n" for n, v in pairs) + "\r\n"
    return text.encode("utf-8", "replace")


def request_message(method, url, headers, body=b""):
    parts = urllib.parse.urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    pairs = header_pairs(headers)
    if not any(n.lower() == "host" for n, _ in pairs):
        pairs.insert(0, ("Host", parts.netloc))
    return _head(f"{method} {target} HTTP/1.1", pairs) + (body or b"")


def response_head(status, reason, headers, stored_length):
    """The response's status line and headers for a body of stored_length bytes."""
    out = []
    original_length = None
    for name, value in header_pairs(headers):
        low = name.lower()
        if low in _DROPPED:
            out.append((f"X-Archive-Orig-{name}", value))
        elif low == "content-length":
            original_length = value
        else:
            out.append((name, value))
    if original_length is not None and original_length.strip() != str(stored_length):
        out.append(("X-Archive-Orig-Content-Length", original_length))
    out.append(("Content-Length", str(stored_length)))
    return _head(f"HTTP/1.1 {int(status)} {reason}".rstrip(), out)
