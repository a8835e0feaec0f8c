"""WARC/1.1 writer of the visit plugin: one gzip member per record.

Layout: <directory>/<prefix>-<NNNNN>.warc.gz, NNNNN counting from 00000. Every
file starts with a `warcinfo` record; a record that would take a file past
max_bytes starts the next file (a record larger than max_bytes still gets a
file of its own). Digests are `sha256:<64 lowercase hex>` (block: the whole
record block; payload: the HTTP entity body as stored).

Crash behaviour: each record is compressed in memory and handed to the file
with one write() (looping only on a short write), so a kill mid-write leaves
at most one incomplete final gzip member; close() fsyncs. Files are opened
with O_EXCL so an existing WARC is never overwritten.

Raises OSError (from the file system) on write failures.
"""

import datetime
import gzip
import hashlib
import os
import uuid

WARC_VERSION = "WARC/1.1"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


def sha256_label(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def warc_date(when=None):
    """ISO 8601 UTC to the microsecond (allowed by WARC 1.1)."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_record_id():
    return f"<urn:uuid:{uuid.uuid4()}>"


def build_record(warc_type, headers, block):
    """The uncompressed record: version line, named fields, block, CRLF CRLF.
    `headers` is a list of (name, value); Content-Length is added here."""
    lines = [WARC_VERSION, f"WARC-Type: {warc_type}"]
    for name, value in headers:
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(block)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
    return head + block + b"\r\n\r\n"


class WarcWriter:
    """Writes records into rolling WARC files; not thread-safe."""

    def __init__(self, directory, prefix, max_bytes, info_fields):
        self._directory = directory
        self._prefix = prefix
        self._max_bytes = max(1, int(max_bytes))
        self._info_fields = info_fields  # list of (name, value) for warcinfo
        self._fd = None
        self._size = 0
        self._records_in_file = 0
        self._index = -1
        self._warcinfo_id = None
        self.files = []  # names relative to the hook directory, in order
        self.counts = {}  # WARC-Type -> records written
        os.makedirs(directory, exist_ok=True)

    @property
    def current_file(self):
        return self.files[-1] if self.files else None

    def _open_next(self):
        self._close_current()
        self._index += 1
        name = f"{self._prefix}-{self._index:05d}.warc.gz"
        path = os.path.join(self._directory, name)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self._size = 0
        self._records_in_file = 0
        self.files.append(os.path.join(os.path.basename(self._directory), name))
        self._warcinfo_id = new_record_id()
        body = "".join(f"{k}: {v}\r\n" for k, v in [("format", "WARC File Format 1.1"), *self._info_fields])
        body = body.encode("utf-8")
        record = build_record(
            "warcinfo",
            [
                ("WARC-Record-ID", self._warcinfo_id),
                ("WARC-Date", warc_date()),
                ("WARC-Filename", name),
                ("Content-Type", "application/warc-fields"),
                ("WARC-Block-Digest", sha256_label(body)),
            ],
            body,
        )
        self._write_member(gzip.compress(record, compresslevel=6, mtime=0), "warcinfo")

    def _write_member(self, member, warc_type):
        view = memoryview(member)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._size += len(member)
        self._records_in_file += 1
        self.counts[warc_type] = self.counts.get(warc_type, 0) + 1

    def write(self, warc_type, headers, block):
        """Append one record (`headers` without WARC-Type, Content-Length and
        WARC-Warcinfo-ID, which are added); returns the file it went to.
        Starts the next file first when this record would pass max_bytes."""
        if self._fd is None:
            self._open_next()
        member = self._member(warc_type, headers, block)
        if self._records_in_file > 1 and self._size + len(member) > self._max_bytes:
            self._open_next()
            member = self._member(warc_type, headers, block)  # names the new file's warcinfo
        self._write_member(member, warc_type)
        return self.current_file

    def _member(self, warc_type, headers, block):
        record = build_record(warc_type, [*headers, ("WARC-Warcinfo-ID", self._warcinfo_id)], block)
        return gzip.compress(record, compresslevel=6, mtime=0)

    def sync(self):
        """fsync the current file (the records written so far are then on disk)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def _close_current(self):
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def close(self):
        self._close_current()
