"""A WACZ 1.1.1 built by hand, byte by byte, for the self-tests of check_wacz.py
and replay_wacz.py.

Standard library only, and deliberately none of the project's own WARC or WACZ
code: the checkers judge that code, so their fixtures must not come from it.

    parts = build_parts([Exchange(url, "text/html", body), ...], pages=[(url, title)])
    write_wacz(path, parts)              # a correct archive
    write_wacz(path, parts, deflate_archive=True)   # and ways to break it

`build_parts` lays out one WARC (warcinfo, then a request and a response (or
identical-payload-digest revisit) record per exchange, each record its own gzip
member, WARC/1.1 with sha256 digests), its CDXJ (one line per response or
revisit: offset and length of its gzip member) and pages.jsonl. `write_wacz`
adds datapackage.json and datapackage-digest.json over what it actually writes,
after the optional tampering hooks have run, so a test breaks exactly one thing
at a time.
"""

import datetime
import gzip
import hashlib
import io
import json
import urllib.parse
import uuid
import zipfile
from dataclasses import dataclass, field

WARC_NAME = "rec-hand-built-00000.warc.gz"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
DEFAULT_DATE = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


@dataclass
class Exchange:
    """One archived HTTP exchange: GET `url` answered 200 with `body`."""

    url: str
    content_type: str
    body: bytes
    wrong_block_digest: bool = False  # the response's WARC-Block-Digest of other bytes
    revisit_of: str = ""  # an earlier exchange's url with this same body: a revisit record
    wrong_payload_digest: bool = False  # the response's WARC-Payload-Digest of other bytes


@dataclass
class CdxjEntry:
    key: str
    timestamp: str
    fields: dict

    def line(self):
        return f"{self.key} {self.timestamp} {json.dumps(self.fields, separators=(',', ':'))}"


@dataclass
class WaczParts:
    """The members of a WACZ before packaging; tests edit these to break it."""

    warcs: dict = field(default_factory=dict)  # file name -> bytes
    cdxj: list = field(default_factory=list)  # CdxjEntry, sorted
    pages: list = field(default_factory=list)  # dicts after the header line
    created: str = ""
    pages_header: dict = field(
        default_factory=lambda: {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
    )

    def cdxj_text(self):
        return "".join(e.line() + "\n" for e in self.cdxj)

    def pages_text(self):
        return "".join(json.dumps(x) + "\n" for x in [self.pages_header, *self.pages])


def sha256_label(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def warc_record(record_type, target_uri, block, date, extra=None, payload=None, digest_of=None):
    """One WARC/1.1 record (uncompressed bytes). `payload` is the part of
    `block` the WARC-Payload-Digest covers (the HTTP body of a response);
    `digest_of`, when given, is what the WARC-Block-Digest is computed over."""
    headers = [
        ("WARC-Type", record_type),
        ("WARC-Record-ID", f"<urn:uuid:{uuid.uuid4()}>"),
        ("WARC-Date", date.strftime("%Y-%m-%dT%H:%M:%SZ")),
    ]
    if target_uri:
        headers.append(("WARC-Target-URI", target_uri))
    headers += list(extra or [])
    headers.append(("WARC-Block-Digest", sha256_label(block if digest_of is None else digest_of)))
    if payload is not None:
        headers.append(("WARC-Payload-Digest", sha256_label(payload)))
    headers.append(("Content-Length", str(len(block))))
    head = "WARC/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("utf-8") + block + b"\r\n\r\n"


def gzip_member(data):
    """`data` as one gzip member (fixed mtime, so a rebuild is byte-identical)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


def surt_key(url):
    """A SURT key as warcio.js writes it: host labels reversed (an IP address
    too), ',' joined, the port kept, then ')' and the path."""
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower()
    if host.startswith("www."):
        host = host[4:]
    key = ",".join(reversed(host.split(".")))
    if parts.port and parts.port not in (80, 443):
        key += f":{parts.port}"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return key + ")" + path.lower()


def build_parts(exchanges, pages, date=DEFAULT_DATE, warc_name=WARC_NAME):
    """WARC, CDXJ and pages of `exchanges`; `pages` is a list of (url, title)."""
    timestamp = date.strftime("%Y%m%d%H%M%S")
    info = b"software: hand_built_wacz.py\r\nformat: WARC File Format 1.1\r\n"
    warc = bytearray(
        gzip_member(
            warc_record(
                "warcinfo",
                None,
                info,
                date,
                extra=[("WARC-Filename", warc_name), ("Content-Type", "application/warc-fields")],
            )
        )
    )
    entries = []
    for ex in exchanges:
        target = urllib.parse.urlsplit(ex.url)
        request = (
            f"GET {target.path or '/'}{'?' + target.query if target.query else ''} HTTP/1.1\r\n"
            f"Host: {target.netloc}\r\nUser-Agent: hand-built\r\n\r\n"
        ).encode("utf-8")
        http_head = (
            "HTTP/1.1 200 OK\r\n"
            f"Content-Type: {ex.content_type}\r\n"
            f"Content-Length: {len(ex.body)}\r\n\r\n"
        ).encode("utf-8")
        response_block = http_head + ex.body
        extra = [("Content-Type", "application/http; msgtype=response")]
        if ex.revisit_of:
            # identical-payload-digest: the block is the HTTP head only; the
            # payload digest names the body stored with the earlier record.
            response_block = http_head
            extra += [
                ("WARC-Profile", REVISIT_PROFILE),
                ("WARC-Refers-To-Target-URI", ex.revisit_of),
                ("WARC-Refers-To-Date", date.strftime("%Y-%m-%dT%H:%M:%SZ")),
            ]
        response = warc_record(
            "revisit" if ex.revisit_of else "response",
            ex.url,
            response_block,
            date,
            extra=extra,
            payload=ex.body + b" " if ex.wrong_payload_digest else ex.body,
            digest_of=response_block + b" " if ex.wrong_block_digest else None,
        )
        response_id = response.split(b"WARC-Record-ID: ", 1)[1].split(b"\r\n", 1)[0].decode()
        member = gzip_member(response)
        offset = len(warc)
        warc += member
        entries.append(
            CdxjEntry(
                surt_key(ex.url),
                timestamp,
                {
                    "url": ex.url,
                    "mime": "warc/revisit" if ex.revisit_of else ex.content_type.split(";")[0].strip(),
                    "status": "200",
                    "digest": "sha256:" + hashlib.sha256(ex.body).hexdigest(),
                    "length": str(len(member)),
                    "offset": str(offset),
                    "filename": warc_name,
                },
            )
        )
        warc += gzip_member(
            warc_record(
                "request",
                ex.url,
                request,
                date,
                extra=[("Content-Type", "application/http; msgtype=request"), ("WARC-Concurrent-To", response_id)],
            )
        )
    entries.sort(key=lambda e: e.line().encode("utf-8"))
    iso = date.strftime("%Y-%m-%dT%H:%M:%SZ")
    page_rows = [{"id": uuid.uuid4().hex, "url": url, "ts": iso, "title": title} for url, title in pages]
    return WaczParts(warcs={warc_name: bytes(warc)}, cdxj=entries, pages=page_rows, created=iso)


def parts_of_warc(warc_name, warc, cdxj_lines, pages, created):
    """WaczParts of a WARC written elsewhere (wget's, say) and its CDXJ lines."""
    entries = []
    for line in cdxj_lines:
        key, timestamp, fields = line.split(" ", 2)
        entries.append(CdxjEntry(key, timestamp, json.loads(fields)))
    entries.sort(key=lambda e: e.line().encode("utf-8"))
    rows = [{"url": url, "ts": created, "title": title} for url, title in pages]
    return WaczParts(warcs={warc_name: warc}, cdxj=entries, pages=rows, created=created)


def write_wacz(
    path,
    parts,
    deflate_archive=False,
    omit=(),
    tamper_datapackage=None,
    tamper_digest=None,
):
    """Package `parts` as a WACZ zip at `path`.

    deflate_archive: WARCs deflated instead of stored. omit: member names left
    out of the zip (still listed in datapackage.json). tamper_datapackage(dict)
    and tamper_digest(dict) edit those documents in place before they are
    written; the digest file is computed after tamper_datapackage."""
    members = [(f"archive/{name}", data) for name, data in sorted(parts.warcs.items())]
    members.append(("indexes/index.cdxj", parts.cdxj_text().encode("utf-8")))
    members.append(("pages/pages.jsonl", parts.pages_text().encode("utf-8")))
    datapackage = {
        "profile": "data-package",
        "wacz_version": "1.1.1",
        "title": "hand-built",
        "created": parts.created,
        "software": "hand_built_wacz.py",
        "mainPageUrl": next((p["url"] for p in parts.pages if "url" in p), None),
        "resources": [
            {"name": name.rsplit("/", 1)[1], "path": name, "hash": sha256_label(data), "bytes": len(data)}
            for name, data in members
        ],
    }
    if tamper_datapackage:
        tamper_datapackage(datapackage)
    datapackage_bytes = json.dumps(datapackage, indent=2).encode("utf-8")
    digest = {"path": "datapackage.json", "hash": sha256_label(datapackage_bytes)}
    if tamper_digest:
        tamper_digest(digest)
    members.append(("datapackage.json", datapackage_bytes))
    members.append(("datapackage-digest.json", json.dumps(digest, indent=2).encode("utf-8")))
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members:
            if name in omit:
                continue
            stored = name.startswith("archive/") and not deflate_archive
            zf.writestr(name, data, compress_type=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
    return path

