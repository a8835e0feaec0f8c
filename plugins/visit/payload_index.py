"""The crawl-wide index of stored payloads: $CRAWL_DIR/visit/payloads/<hex>.

One file per sha256 payload digest, holding JSON {uri, date, warc,
snapshot_id} of the response record that stored the payload in full. Files
are created with O_CREAT|O_EXCL, so among concurrent snapshot workers the
first writer wins and nobody overwrites an entry; the content is written with
one write() right after creation. A reader that finds an empty or unreadable
entry (a writer killed between the two calls) treats the payload as not
stored, which only costs a duplicate payload, never a dangling revisit.

Entries are published by the writer only after the record they point to is
fsynced (see publish()), so a revisit always refers to a record on disk.
"""

import errno
import json
import os


class PayloadIndex:
    def __init__(self, crawl_dir):
        self._dir = os.path.join(crawl_dir, "visit", "payloads") if crawl_dir else None
        self._pending = []  # (hex, entry) of records written but not yet fsynced
        self._local = {}  # hex -> entry, this page's own payloads (already stored, maybe not yet published)
        if self._dir:
            os.makedirs(self._dir, exist_ok=True)

    def lookup(self, hex_digest):
        """The entry of an already stored payload, or None."""
        if hex_digest in self._local:
            return self._local[hex_digest]
        if not self._dir:
            return None
        try:
            with open(os.path.join(self._dir, hex_digest), encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and entry.get("uri") and entry.get("date") else None

    def stored(self, hex_digest, entry):
        """Note a payload just written in full (published later by publish())."""
        self._local[hex_digest] = entry
        self._pending.append((hex_digest, entry))

    def publish(self):
        """Create the index files of the pending payloads. Call only after the
        WARC holding them is fsynced. Returns how many entries this call created."""
        created = 0
        if not self._dir:
            self._pending.clear()
            return 0
        for hex_digest, entry in self._pending:
            path = os.path.join(self._dir, hex_digest)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    continue  # another snapshot stored it first
                raise
            try:
                os.write(fd, json.dumps(entry).encode("utf-8"))
            finally:
                os.close(fd)
            created += 1
        self._pending.clear()
        return created
