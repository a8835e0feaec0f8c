#!/usr/bin/env python3
"""Independent structure check of a WACZ 1.1.1 file.

    check_wacz.py [--json] [--warcio PATH] WACZ

Checks (each failure is reported under the name in brackets):
  - the zip opens, and holds archive/*.warc.gz (or .warc), indexes/index.cdxj,
    pages/pages.jsonl, datapackage.json, datapackage-digest.json [missing-member]
  - archive/ members are stored, not deflated [archive-compressed]
  - datapackage.json: profile "data-package", wacz_version "1.1.1" [profile];
    every resource's path exists [resource-missing] with its bytes
    [resource-bytes] and hash "sha256:<64 hex>" [resource-hash]; every member
    but the two datapackage files is listed [resource-unlisted]
  - datapackage-digest.json names datapackage.json with its sha256 [digest-file]
  - every WARC is a sequence of gzip members holding one WARC record each
    [warc-member], warcinfo first [warc-first-record], block digests that match
    (sha256 or sha1, hex or base32) [warc-digest]
  - warcio.js `warcio index` reads every WARC with exit 0 and finds the same
    records at the same offsets [warcio]
  - index.cdxj: lines "<key> <timestamp> <json>" with url, offset, length,
    filename [cdxj-line], sorted bytewise [cdxj-order], naming a WARC of the
    archive [cdxj-file]; offset/length cover exactly one gzip member holding a
    WARC record [cdxj-offset] whose WARC-Target-URI is the entry's url (the
    "<url>" form of WARC/1.0, as wget writes it, counts as url) [cdxj-target]
  - pages.jsonl: the json-pages-1.0 header line [pages-header]; each page an
    object with an http(s) url, an ISO 8601 UTC ts and a title [pages-entry],
    its url in the index [page-unindexed]

Prints each problem and exits 1 when there is one, 0 when there is none, 2 when
it cannot check (no such file, the warcio CLI missing). --json prints a summary
object on stdout instead. Standard library only; shares no code with the
project's WARC writer or WACZ exporter, so it cannot agree with them by
construction.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib

sys.dont_write_bytecode = True

REQUIRED = ("indexes/index.cdxj", "pages/pages.jsonl", "datapackage.json", "datapackage-digest.json")
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
CHUNK = 1 << 20
MAX_REPORTED_PER_CHECK = 20
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|\+00:00)$")
CDXJ_LINE = re.compile(r"^(\S+) (\d{14}(?:\d{1,3})?) (\{.*\})$")
SHA256_LABEL = re.compile(r"^sha256:[0-9a-f]{64}$")


class ToolMissing(Exception):
    """A tool the check needs is not installed."""


class Report:
    def __init__(self):
        self.errors = []
        self._counts = {}

    def error(self, check, message):
        n = self._counts.get(check, 0) + 1
        self._counts[check] = n
        if n <= MAX_REPORTED_PER_CHECK:
            self.errors.append({"check": check, "message": message})
        elif n == MAX_REPORTED_PER_CHECK + 1:
            self.errors.append({"check": check, "message": "(further problems of this kind not listed)"})


def find_warcio(explicit):
    """The warcio.js CLI: --warcio, else $ORCH_TEST_TOOLS, else <repo>/build/test-tools."""
    if explicit:
        candidates = [explicit]
    else:
        root = os.environ.get("ORCH_TEST_TOOLS") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "test-tools"
        )
        candidates = [os.path.join(root, "node_modules", ".bin", "warcio")]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    raise ToolMissing(
        f"warcio.js CLI not found at {candidates[0]} (scripts/setup installs it into <build dir>/test-tools)"
    )


def sha256_of_member(zf, name):
    h = hashlib.sha256()
    with zf.open(name) as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


# -- WARC records ----------------------------------------------------------------------


def parse_warc_record(data):
    """(headers dict with lower-case names, block, error or None) of one whole
    uncompressed WARC record, which must end exactly after its block and CRLF CRLF."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None, None, "no end of the WARC header"
    lines = head.decode("utf-8", "replace").split("\r\n")
    if not re.match(r"^WARC/1\.[01]$", lines[0]):
        return None, None, f"not a WARC record (first line {lines[0][:40]!r})"
    headers = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            return None, None, f"malformed header line {line[:60]!r}"
        headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", ""))
    except ValueError:
        return headers, None, "no valid Content-Length"
    block, tail = rest[:length], rest[length:]
    if len(block) < length:
        return headers, None, f"block shorter ({len(block)}) than Content-Length {length}"
    if tail != b"\r\n\r\n":
        return headers, block, f"{len(tail)} bytes after the block instead of CRLF CRLF"
    return headers, block, None


def digest_matches(label, data):
    """True/False for a known digest label, None for an unknown algorithm or encoding."""
    algo, colon, value = label.partition(":")
    if not colon:
        return None
    algo = algo.lower()
    if algo not in ("sha1", "sha256"):
        return None
    raw = hashlib.new(algo, data).digest()
    if re.fullmatch(r"[0-9a-fA-F]+", value) and len(value) == 2 * len(raw):
        return value.lower() == raw.hex()
    try:
        return base64.b32decode(value.upper()) == raw
    except ValueError:
        return None


def gzip_members(fh):
    """Yield (offset, compressed length, decompressed bytes) of each gzip member
    of the stream `fh`; raises ValueError on data that is not gzip."""
    consumed = 0  # compressed bytes that belong to finished members
    pending = b""
    while True:
        if not pending:
            pending = fh.read(CHUNK)
            if not pending:
                return
        d = zlib.decompressobj(wbits=31)
        out = []
        used = 0
        while True:
            try:
                out.append(d.decompress(pending))
            except zlib.error as exc:
                raise ValueError(f"not gzip data at offset {consumed}: {exc}") from exc
            if d.eof:
                used += len(pending) - len(d.unused_data)
                pending = d.unused_data
                break
            used += len(pending)
            pending = fh.read(CHUNK)
            if not pending:
                raise ValueError(f"gzip member at offset {consumed} is truncated")
        yield consumed, used, b"".join(out)
        consumed += used


def dechunk(body):
    """The body of a chunked HTTP message without its framing, or None when malformed."""
    out, pos = [], 0
    while True:
        line_end = body.find(b"\r\n", pos)
        if line_end < 0:
            return None
        try:
            size = int(body[pos:line_end].split(b";")[0].strip() or b"x", 16)
        except ValueError:
            return None
        if size == 0:
            return b"".join(out)
        start = line_end + 2
        out.append(body[start:start + size])
        pos = start + size + 2


def check_payload(name, offset, headers, block, report, summary):
    """A response's WARC-Payload-Digest against its HTTP entity body (transfer
    coding removed, content coding kept, as the WARC standard defines it); the
    response is listed in the summary."""
    head, sep, payload = block.partition(b"\r\n\r\n")
    lines = head.decode("iso-8859-1").split("\r\n")
    status = lines[0].split(" ")[1] if sep and len(lines[0].split(" ")) > 1 else ""
    http = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        http[key.strip().lower()] = value.strip()
    if "chunked" in http.get("transfer-encoding", "").lower():
        payload = dechunk(payload)
    uri = headers.get("warc-target-uri", "").strip("<>")
    summary["responses"].append({"uri": uri, "status": status, "bytes": len(payload or b""),
                                 "truncated": headers.get("warc-truncated", "")})
    label = headers.get("warc-payload-digest")
    if not label or not sep:
        return
    ok = None if payload is None else digest_matches(label, payload)
    if ok is None:
        report.error("warc-payload", f"{name} @ {offset}: cannot recompute WARC-Payload-Digest {label!r} of {uri}")
    elif not ok:
        report.error("warc-payload", f"{name} @ {offset}: WARC-Payload-Digest {label} does not match the body of {uri}")
    else:
        summary["payload_digests_verified"] += 1


def check_warc(zf, name, report, summary=None):
    """Walk archive/<name>; return the offsets of its records."""
    summary = summary if summary is not None else {"responses": [], "payload_digests_verified": 0}
    offsets = []
    try:
        with zf.open(name) as fh:
            plain = not name.endswith(".gz")
            if plain:
                report.error("warc-member", f"{name}: not gzip-compressed (each record its own gzip member)")
                return offsets
            for index, (offset, _length, data) in enumerate(gzip_members(fh)):
                offsets.append(offset)
                headers, block, problem = parse_warc_record(data)
                if problem:
                    report.error(
                        "warc-member",
                        f"{name} @ {offset}: gzip member is not exactly one WARC record: {problem}",
                    )
                    continue
                if index == 0 and headers.get("warc-type") != "warcinfo":
                    report.error(
                        "warc-first-record",
                        f"{name}: first record is {headers.get('warc-type')!r}, not warcinfo",
                    )
                for field in ("warc-block-digest", "warc-payload-digest"):
                    label = headers.get(field, "")
                    if label.lower().startswith("sha256:") and not SHA256_LABEL.match(label):
                        report.error(
                            "warc-digest",
                            f"{name} @ {offset}: {field} {label!r} is not sha256:<64 lowercase hex>",
                        )
                if headers.get("warc-type") == "response":
                    check_payload(name, offset, headers, block, report, summary)
                label = headers.get("warc-block-digest")
                if label:
                    ok = digest_matches(label, block)
                    if ok is None:
                        report.error("warc-digest", f"{name} @ {offset}: unknown WARC-Block-Digest form {label!r}")
                    elif not ok:
                        report.error(
                            "warc-digest",
                            f"{name} @ {offset}: WARC-Block-Digest {label} does not match the block",
                        )
    except ValueError as exc:
        report.error("warc-member", f"{name}: {exc}")
    return offsets


def check_with_warcio(warcio, zf, name, offsets, report, tmp):
    """`warcio index` of the extracted WARC: exit 0 and the same record offsets."""
    path = os.path.join(tmp, os.path.basename(name))
    with zf.open(name) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst, CHUNK)
    try:
        proc = subprocess.run([warcio, "index", path], capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        report.error("warcio", f"{name}: warcio index exited {proc.returncode}: {' | '.join(tail)}")
        return
    found = []
    for line in proc.stdout.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "warc-type" in row:
            found.append(int(row.get("offset", -1)))
    if found != offsets:
        first = next((i for i, (a, b) in enumerate(zip(found, offsets)) if a != b), min(len(found), len(offsets)))
        report.error(
            "warcio",
            f"{name}: warcio index found {len(found)} records, the gzip walk {len(offsets)};"
            f" they differ from record {first}",
        )


# -- the index and the pages -------------------------------------------------------------


class MemberReader:
    """Random access to a zip member's bytes. A stored member is read straight
    from the zip file at its data offset (zipfile's own seek reads forward from
    the start for every backward seek, which index order makes the rule)."""

    def __init__(self, zf, name):
        info = zf.getinfo(name)
        self._ext = None
        self._raw = None
        if info.compress_type == zipfile.ZIP_STORED:
            self._raw = open(zf.filename, "rb")
            self._raw.seek(info.header_offset)
            local = self._raw.read(30)
            if len(local) == 30 and local[:4] == b"PK\x03\x04":
                name_len, extra_len = struct.unpack("<HH", local[26:30])
                self._base = info.header_offset + 30 + name_len + extra_len
                self._size = info.file_size
                return
            self._raw.close()
            self._raw = None
        self._ext = zf.open(name)

    def read_at(self, offset, length):
        if self._raw is not None:
            if offset < 0 or offset >= self._size:
                return b""
            self._raw.seek(self._base + offset)
            return self._raw.read(max(0, min(length, self._size - offset)))
        self._ext.seek(offset)
        return self._ext.read(length)

    def close(self):
        (self._raw or self._ext).close()


def check_cdxj(zf, warc_names, report):
    """Return (number of entries, set of urls) of the index."""
    urls = set()
    try:
        text = zf.read("indexes/index.cdxj")
    except KeyError:
        return 0, urls
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    else:
        report.error("cdxj-line", "index.cdxj does not end with a newline")
    for i in range(1, len(lines)):
        if lines[i - 1] > lines[i]:
            report.error("cdxj-order", f"index.cdxj line {i + 1} sorts before line {i} (bytewise)")
    handles = {}
    try:
        for number, raw in enumerate(lines, 1):
            line = raw.decode("utf-8", "replace")
            m = CDXJ_LINE.match(line)
            fields = None
            if m:
                try:
                    fields = json.loads(m.group(3))
                except ValueError:
                    fields = None
            if not isinstance(fields, dict):
                report.error(
                    "cdxj-line",
                    f"index.cdxj line {number} is not '<key> <timestamp> <json object>': {line[:120]!r}",
                )
                continue
            missing = [k for k in ("url", "offset", "length", "filename") if k not in fields]
            if missing:
                report.error("cdxj-line", f"index.cdxj line {number} lacks {', '.join(missing)}")
                continue
            url = fields["url"]
            urls.add(url)
            try:
                offset, length = int(fields["offset"]), int(fields["length"])
            except (TypeError, ValueError):
                report.error("cdxj-line", f"index.cdxj line {number}: offset/length not integers")
                continue
            member = "archive/" + str(fields["filename"])
            if member not in warc_names:
                report.error(
                    "cdxj-file",
                    f"index.cdxj line {number} names {fields['filename']!r}, not a WARC of archive/",
                )
                continue
            if member not in handles:
                handles[member] = MemberReader(zf, member)
            chunk = handles[member].read_at(offset, length)
            d = zlib.decompressobj(wbits=31)
            try:
                data = d.decompress(chunk)
                whole = d.eof and not d.unused_data and len(chunk) == length
            except zlib.error:
                whole = False
            if not whole:
                report.error(
                    "cdxj-offset",
                    f"index.cdxj line {number} ({url}): bytes {offset}+{length} of {fields['filename']}"
                    " are not one whole gzip member",
                )
                continue
            headers, _block, problem = parse_warc_record(data)
            if problem:
                report.error("cdxj-offset", f"index.cdxj line {number} ({url}): not a WARC record there: {problem}")
                continue
            target = headers.get("warc-target-uri", "")
            if data.startswith(b"WARC/1.0") and target.startswith("<") and target.endswith(">"):
                target = target[1:-1]  # WARC/1.0's grammar brackets the URI; wget writes it so
            if target != url:
                report.error(
                    "cdxj-target",
                    f"index.cdxj line {number}: url {url!r} but the record's WARC-Target-URI is {target!r}",
                )
    finally:
        for fh in handles.values():
            fh.close()
    return len(lines), urls


def check_pages(zf, indexed_urls, report):
    """Return the number of pages."""
    try:
        lines = zf.read("pages/pages.jsonl").decode("utf-8", "replace").splitlines()
    except KeyError:
        return 0
    if not lines:
        report.error("pages-header", "pages.jsonl is empty")
        return 0
    try:
        header = json.loads(lines[0])
    except ValueError:
        header = None
    if header != PAGES_HEADER:
        report.error("pages-header", f"first line of pages.jsonl is {lines[0][:120]!r}, not {json.dumps(PAGES_HEADER)}")
    count = 0
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        count += 1
        try:
            page = json.loads(line)
        except ValueError:
            page = None
        if not isinstance(page, dict):
            report.error("pages-entry", f"pages.jsonl line {number} is not a JSON object")
            continue
        url, ts = page.get("url"), page.get("ts")
        if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
            report.error("pages-entry", f"pages.jsonl line {number}: url {url!r} is not an absolute http(s) URL")
        elif url not in indexed_urls:
            report.error("page-unindexed", f"pages.jsonl line {number}: {url} has no entry in index.cdxj")
        if not isinstance(ts, str) or not ISO_UTC.match(ts):
            report.error("pages-entry", f"pages.jsonl line {number}: ts {ts!r} is not ISO 8601 UTC")
        if not isinstance(page.get("title"), str):
            report.error("pages-entry", f"pages.jsonl line {number}: no title string")
    return count


# -- the package ---------------------------------------------------------------------------


def check_datapackage(zf, names, report):
    try:
        raw = zf.read("datapackage.json")
    except KeyError:
        return
    try:
        package = json.loads(raw)
    except ValueError as exc:
        report.error("profile", f"datapackage.json is not JSON: {exc}")
        return
    if not isinstance(package, dict):
        report.error("profile", "datapackage.json is not a JSON object")
        return
    if package.get("profile") != "data-package":
        report.error("profile", f"datapackage.json profile is {package.get('profile')!r}, not 'data-package'")
    if package.get("wacz_version") != "1.1.1":
        report.error("profile", f"datapackage.json wacz_version is {package.get('wacz_version')!r}, not '1.1.1'")
    resources = package.get("resources")
    if not isinstance(resources, list):
        report.error("profile", "datapackage.json has no resources list")
        resources = []
    listed = set()
    for res in resources:
        path = res.get("path") if isinstance(res, dict) else None
        if not isinstance(path, str):
            report.error("resource-missing", f"datapackage.json resource without a path: {res!r}"[:160])
            continue
        listed.add(path)
        if path not in names:
            report.error("resource-missing", f"datapackage.json lists {path}, which is not in the zip")
            continue
        size = zf.getinfo(path).file_size
        if res.get("bytes") != size:
            report.error(
                "resource-bytes",
                f"{path}: datapackage.json says {res.get('bytes')!r} bytes, the member has {size}",
            )
        label = res.get("hash")
        if not isinstance(label, str) or not SHA256_LABEL.match(label):
            report.error("resource-hash", f"{path}: hash {label!r} is not sha256:<64 lowercase hex>")
        elif sha256_of_member(zf, path) != label:
            report.error("resource-hash", f"{path}: sha256 of the member differs from datapackage.json's {label}")
    for name in sorted(names - listed - {"datapackage.json", "datapackage-digest.json"}):
        if not name.endswith("/"):
            report.error("resource-unlisted", f"{name} is in the zip but not in datapackage.json resources")

    try:
        digest = json.loads(zf.read("datapackage-digest.json"))
    except KeyError:
        return
    except ValueError as exc:
        report.error("digest-file", f"datapackage-digest.json is not JSON: {exc}")
        return
    if not isinstance(digest, dict) or digest.get("path") != "datapackage.json":
        report.error("digest-file", "datapackage-digest.json does not name path 'datapackage.json'")
        return
    expected = "sha256:" + hashlib.sha256(raw).hexdigest()
    if digest.get("hash") != expected:
        report.error(
            "digest-file",
            f"datapackage-digest.json hash {digest.get('hash')!r} is not datapackage.json's {expected}",
        )


def check(path, warcio):
    """Check the WACZ at `path`; return (Report, summary dict)."""
    report = Report()
    summary = {"wacz": path, "warcs": [], "cdxj_entries": 0, "pages": 0, "responses": [],
               "payload_digests_verified": 0}
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        report.error("missing-member", f"not a zip file: {exc}")
        return report, summary
    with zf:
        infos = zf.infolist()
        names = {i.filename for i in infos}
        for name in REQUIRED:
            if name not in names:
                report.error("missing-member", f"no {name}")
        warc_names = sorted(n for n in names if n.startswith("archive/") and re.search(r"\.warc(\.gz)?$", n))
        if not warc_names:
            report.error("missing-member", "no archive/*.warc.gz")
        for info in infos:
            if info.filename.startswith("archive/") and info.compress_type != zipfile.ZIP_STORED:
                report.error(
                    "archive-compressed",
                    f"{info.filename} is compressed (method {info.compress_type}), not stored",
                )
        check_datapackage(zf, names, report)
        with tempfile.TemporaryDirectory(prefix="check-wacz-") as tmp:
            for name in warc_names:
                offsets = check_warc(zf, name, report, summary)
                check_with_warcio(warcio, zf, name, offsets, report, tmp)
                summary["warcs"].append({"name": name, "records": len(offsets), "bytes": zf.getinfo(name).file_size})
        summary["cdxj_entries"], urls = check_cdxj(zf, set(warc_names), report)
        summary["pages"] = check_pages(zf, urls, report)
    return report, summary


def main(argv=None):
    parser = argparse.ArgumentParser(description="Independent WACZ 1.1.1 structure check.")
    parser.add_argument("wacz")
    parser.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    parser.add_argument(
        "--warcio", help="path of the warcio.js CLI (default: $ORCH_TEST_TOOLS/node_modules/.bin/warcio)"
    )
    args = parser.parse_args(argv)
    try:
        warcio = find_warcio(args.warcio)
    except ToolMissing as exc:
        print(f"check_wacz: {exc}", file=sys.stderr)
        return 2
    if not os.path.isfile(args.wacz):
        print(f"check_wacz: no such file {args.wacz}", file=sys.stderr)
        return 2
    report, summary = check(args.wacz, warcio)
    summary["ok"] = not report.errors
    summary["errors"] = report.errors
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for err in report.errors:
            print(f"check_wacz: [{err['check']}] {err['message']}")
        if not report.errors:
            records = sum(w["records"] for w in summary["warcs"])
            print(
                f"check_wacz: {args.wacz}: ok ({len(summary['warcs'])} WARCs, {records} records,"
                f" {summary['cdxj_entries']} index entries, {summary['pages']} pages,"
                f" {summary['payload_digests_verified']} payload digests verified)"
            )
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
