#!/usr/bin/env python3
"""Checks a crawl's index files against docs/archive-layout.md, reading them as
any program would: the standard library only, none of the project's code.

    check_archive_index.py DATA_DIR CRAWL_ID

Checks DATA_DIR/crawls/CRAWL_ID/index.json field by field (names, JSON types,
enumerations, UUIDs, UTC timestamps), then each snapshot it lists: its
directory's index.json, the same way, and that both agree (url, title,
status), and that every output file listed exists with the size given.
Prints "ok: N snapshots" and exits 0, or prints each problem and exits 1.
"""
import json
import os
import re
import sys

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
STATUSES = {"queued", "started", "sealed"}
OUTCOMES = {"succeeded", "partial", "failed", "cancelled", "timed_out"}
RESULT_STATUSES = {"queued", "started", "succeeded", "failed", "skipped", "noresults"}
problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check(where, obj, fields):
    """fields: name -> (predicate, description); every name must be present, no other."""
    if not isinstance(obj, dict):
        problem(where, "not an object")
        return False
    for name, (ok, what) in fields.items():
        if name not in obj:
            problem(where, f"missing {name}")
        elif not ok(obj[name]):
            problem(where, f"{name} is not {what}: {obj[name]!r}")
    for name in obj:
        if name not in fields:
            problem(where, f"undocumented field {name}")
    return True


def text(v):
    return isinstance(v, str)


def opt(pred):
    return lambda v: v is None or pred(v)


def uuid(v):
    return isinstance(v, str) and UUID.match(v) is not None


def utc(v):
    return isinstance(v, str) and UTC.match(v) is not None


def count(v):
    return is_int(v) and v >= 0


def list_of(pred):
    return lambda v: isinstance(v, list) and all(pred(x) for x in v)


def snapshot_dir_ok(v):
    return isinstance(v, str) and re.match(r"^snapshots/[0-9a-f-]{36}$", v) is not None


def load(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        problem(path, f"cannot read: {exc}")
        return None


def check_snapshot_index(data_dir, entry):
    path = os.path.join(data_dir, entry["dir"], "index.json")
    doc = load(path)
    if doc is None:
        return
    check(path, doc, {
        "format": (lambda v: v == 1, "1"),
        "id": (uuid, "a UUID"),
        "crawl_id": (uuid, "a UUID"),
        "url": (text, "a string"),
        "title": (opt(text), "a string or null"),
        "depth": (count, "a count"),
        "parent": (lambda v: v is None or (isinstance(v, dict) and uuid(v.get("id"))
                                            and (v.get("url") is None or text(v.get("url")))
                                            and set(v) == {"id", "url"}), "null or {id, url}"),
        "status": (lambda v: v in STATUSES, "a snapshot status"),
        "outcome": (lambda v: v is None or v in OUTCOMES, "an outcome or null"),
        "error": (opt(text), "a string or null"),
        "attempt": (count, "a count"),
        "created_at": (utc, "a UTC timestamp"),
        "started_at": (opt(utc), "a UTC timestamp or null"),
        "sealed_at": (opt(utc), "a UTC timestamp or null"),
        "dir": (snapshot_dir_ok, "snapshots/<id>"),
        "hooks": (lambda v: isinstance(v, list), "an array"),
    })
    for name in ("id", "url", "title", "status", "outcome", "dir"):
        if doc.get(name) != entry.get(name):
            problem(path, f"{name} {doc.get(name)!r} differs from the crawl index's {entry.get(name)!r}")
    for i, hook in enumerate(doc.get("hooks") or []):
        where = f"{path} hooks[{i}]"
        check(where, hook, {
            "plugin": (text, "a string"),
            "hook_name": (text, "a string"),
            "status": (lambda v: v in RESULT_STATUSES, "a result status"),
            "attempts": (count, "a count"),
            "started_at": (opt(utc), "a UTC timestamp or null"),
            "ended_at": (opt(utc), "a UTC timestamp or null"),
            "output_str": (opt(text), "a string or null"),
            "error": (opt(text), "a string or null"),
            "output_size": (count, "a count"),
            "output_files": (list_of(lambda f: isinstance(f, dict) and text(f.get("path")) and count(f.get("size"))
                                     and set(f) == {"path", "size"}), "an array of {path, size}"),
        })
        for f in hook.get("output_files") or []:
            file_path = os.path.join(data_dir, doc["dir"], hook["plugin"], f["path"])
            if not os.path.isfile(file_path):
                problem(where, f"output file {f['path']} does not exist")
            elif os.path.getsize(file_path) != f["size"]:
                problem(where, f"output file {f['path']} is not {f['size']} bytes")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    data_dir, crawl_id = sys.argv[1], sys.argv[2]
    path = os.path.join(data_dir, "crawls", crawl_id, "index.json")
    doc = load(path)
    if doc is None:
        print("\n".join(problems))
        return 1
    check(path, doc, {
        "format": (lambda v: v == 1, "1"),
        "written_at": (utc, "a UTC timestamp"),
        "crawl": (lambda v: isinstance(v, dict), "an object"),
        "snapshots": (lambda v: isinstance(v, list), "an array"),
    })
    crawl = doc.get("crawl") or {}
    counts = {k: (count, "a count") for k in ("total", "succeeded", "partial", "failed", "cancelled", "timed_out",
                                               "unsealed")}
    check(path + " crawl", crawl, {
        "id": (lambda v: v == crawl_id, "the crawl id"),
        "urls": (lambda v: isinstance(v, list) and v and all(text(u) for u in v), "a non-empty array of strings"),
        "label": (opt(text), "a string or null"),
        "tags": (list_of(text), "an array of strings"),
        "config": (lambda v: isinstance(v, dict), "an object"),
        "max_depth": (count, "a count"),
        "max_urls": (opt(count), "a count or null"),
        "status": (lambda v: v in STATUSES | {"paused"}, "a crawl status"),
        "outcome": (lambda v: v is None or v in OUTCOMES, "an outcome or null"),
        "seal_reason": (opt(text), "a string or null"),
        "created_at": (utc, "a UTC timestamp"),
        "started_at": (opt(utc), "a UTC timestamp or null"),
        "sealed_at": (opt(utc), "a UTC timestamp or null"),
        "counts": (lambda v: isinstance(v, dict), "an object"),
    })
    check(path + " crawl.counts", crawl.get("counts") or {}, counts)
    entries = doc.get("snapshots") or []
    if (crawl.get("counts") or {}).get("total") != len(entries):
        problem(path, f"counts.total is {(crawl.get('counts') or {}).get('total')}, {len(entries)} snapshots listed")
    for i, entry in enumerate(entries):
        where = f"{path} snapshots[{i}]"
        if not check(where, entry, {
            "id": (uuid, "a UUID"),
            "url": (text, "a string"),
            "title": (opt(text), "a string or null"),
            "depth": (count, "a count"),
            "status": (lambda v: v in STATUSES, "a snapshot status"),
            "outcome": (lambda v: v is None or v in OUTCOMES, "an outcome or null"),
            "error": (opt(text), "a string or null"),
            "sealed_at": (opt(utc), "a UTC timestamp or null"),
            "dir": (snapshot_dir_ok, "snapshots/<id>"),
            "outputs": (list_of(lambda o: isinstance(o, dict) and text(o.get("plugin")) and text(o.get("path"))
                                and count(o.get("size")) and set(o) == {"plugin", "path", "size"}),
                        "an array of {plugin, path, size}"),
            "outputs_total": (count, "a count"),
        }):
            continue
        for o in entry.get("outputs") or []:
            if not os.path.isfile(os.path.join(data_dir, entry["dir"], o["path"])):
                problem(where, f"output {o['path']} does not exist")
        if snapshot_dir_ok(entry.get("dir")):
            check_snapshot_index(data_dir, entry)
    if problems:
        print("\n".join(problems))
        return 1
    print(f"ok: {len(entries)} snapshots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
