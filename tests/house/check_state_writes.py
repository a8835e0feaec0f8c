#!/usr/bin/env python3
"""The crawl and snapshot state machine has one home: every SQL statement that
writes a crawl's or a snapshot's status, lease (lease_owner, lease_expires_at)
or attempts is in common/work/work_states* (work_states.hpp says what each
operation does). Anywhere else, such a write is a breach:

    UPDATE crawl|snapshot ... SET <one of those columns> = ...
    INSERT INTO crawl|snapshot (<a list naming one of them>) ...
    INSERT INTO crawl|snapshot ... ON CONFLICT ... DO UPDATE SET <one of them>

A table given by a format placeholder (UPDATE {} SET ...) counts as either.
In C++ files the SQL is read from the string literals, adjacent literals (and
literals joined by `+` with named fragments) read as one statement, comments
ignored; in scripts, the whole text but its comments.

Exempt, and why:
    common/work/work_states*   the module itself
    migrations/                the schema: its defaults, checks and triggers
    tests/                     tests put rows into states deliberately (set-up
                               of a crawl at its limit, a lease made to expire,
                               a constraint shown to refuse a bad status)
    build*/, .git/             not sources

    check_state_writes.py SOURCE_DIR      check the tree; exit 1 and list each breach
    check_state_writes.py --self-test     show that planted writes are caught
"""
import os
import re
import sys
import tempfile

GUARDED = ("status", "lease_owner", "lease_expires_at", "attempts")
MODULE_PREFIX = "common/work/work_states"
EXEMPT_DIRS = ("migrations", "tests", ".git")
CPP = (".cpp", ".hpp", ".h", ".cc")
SCRIPTS = (".sh", ".py", ".sql", ".bash")

TABLE = r"(?:ONLY\s+)?(?:public\.)?(crawl|snapshot|\{\w*\})(?![\w.])"
UPDATE = re.compile(r"\bUPDATE\s+" + TABLE + r"(?:\s+(?:AS\s+)?(?!SET\b)\w+)?\s+SET\b", re.I)
INSERT = re.compile(r"\bINSERT\s+INTO\s+" + TABLE + r"(?:\s+(?:AS\s+)?\w+)?\s*\(([^)]*)\)", re.I)
# Where a SET list ends.
# Where a SET list ends (or where its parenthesis closes: a CTE's body).
SET_END = re.compile(r"\b(?:FROM|WHERE|RETURNING)\b|;", re.I)


def literals(text):
    """The SQL of a C++ file: its string literals, as (text, offsets) groups of
    literals that read as one statement, each character mapped to its offset."""
    groups, current, offsets = [], [], []
    i, n = 0, len(text)
    gap = ""  # code between the last literal and the next

    def close():
        if current:
            groups.append(("".join(current), list(offsets)))
        current.clear()
        offsets.clear()

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "'":  # a character literal
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            gap += "x"
            continue
        raw = re.match(r'(?:u8|u|U|L)?R"([^(\s]*)\(', text[i:i + 40])
        if raw or c == '"':
            # Code that is not a concatenation separates statements.
            if re.search(r"[;,{}]", gap):
                close()
            gap = ""
            if raw:
                start = i + raw.end()
                end = text.find(")" + raw.group(1) + '"', start)
                end = n if end < 0 else end
                current.append(text[start:end])
                offsets.extend(range(start, end))
                i = end + len(raw.group(1)) + 2
                continue
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                if text[j] == "\\":
                    j += 1
                j += 1
            current.append(text[i + 1:j])
            offsets.extend(range(i + 1, j))
            i = j + 1
            continue
        gap += c
        i += 1
    close()
    return groups


def without_comments(text):
    """A script's text with its comments (# and -- to the end of a line) blanked."""
    return re.sub(r"(?m)(#|--).*$", lambda m: " " * len(m.group(0)), text)


def top_level_columns(set_list):
    """The columns a SET list assigns: the first name of each top-level item, up
    to the parenthesis that closes the list (a CTE's body)."""
    columns, depth, item = [], 0, ""
    for c in set_list + ",":
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if (c == "," and depth == 0) or depth < 0:
            m = re.match(r"\s*\(([^)]*)\)\s*=", item) or re.match(r"\s*([\w.\"]+)\s*=", item)
            if m:
                columns += [x.strip().strip('"').split(".")[-1].lower() for x in m.group(1).split(",")]
            item = ""
            if depth < 0:
                break
        else:
            item += c
    return columns


def set_list_at(sql, start):
    end = SET_END.search(sql, start)
    return sql[start:end.start() if end else len(sql)]


def writes_in(sql):
    """(offset in sql, table, columns) of each guarded write in one statement's text."""
    found = []
    for m in UPDATE.finditer(sql):
        columns = [c for c in top_level_columns(set_list_at(sql, m.end())) if c in GUARDED]
        if columns:
            found.append((m.start(), m.group(1), columns))
    for m in INSERT.finditer(sql):
        named = [c.strip().strip('"').lower() for c in m.group(2).split(",")]
        columns = [c for c in named if c in GUARDED]
        tail = sql[m.end():]
        conflict = re.match(r"[^;]*?\bON\s+CONFLICT\b[^;]*?\bDO\s+UPDATE\s+SET\b", tail, re.I | re.S)
        if conflict:
            columns += [c for c in top_level_columns(set_list_at(tail, conflict.end())) if c in GUARDED]
        if columns:
            found.append((m.start(), m.group(1), sorted(set(columns))))
    return found


def exempt(rel):
    parts = rel.split("/")
    return (rel.startswith(MODULE_PREFIX) or parts[0] in EXEMPT_DIRS or parts[0].startswith("build")
            or "/." in "/" + rel)


def breaches(root):
    found = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not d.startswith("build"))
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if exempt(rel) or not name.endswith(CPP + SCRIPTS):
                continue
            with open(path, errors="replace") as f:
                text = f.read()
            if name.endswith(CPP):
                groups = literals(text)
            else:
                clean = without_comments(text)
                groups = [(clean, range(len(clean)))]
            for sql, offsets in groups:
                for at, table, columns in writes_in(sql):
                    line = text.count("\n", 0, offsets[at]) + 1
                    target = "crawl or snapshot" if table.startswith("{") else table.lower()
                    found.append(f"{rel}:{line}: writes {target} {', '.join(columns)} outside "
                                 f"{MODULE_PREFIX}* (use or add a work_states operation)")
    return found


def self_test():
    planted = {
        # path: (text, how many breaches it must give)
        "orchestrator/planted.cpp": (
            'auto a = tx.exec("UPDATE snapshot SET "\n'
            '                 "status = \'sealed\', outcome = \'failed\' WHERE id = $1", id);\n'
            'auto b = fmt::format("UPDATE {} SET lease_owner = NULL, "\n'
            '    " lease_expires_at = NULL WHERE id = $1", table);\n'
            'auto c = std::string("UPDATE crawl c SET attempts = c.attempts + 1 FROM ") + k_x + " WHERE c.id = $1";\n'
            'auto d = "INSERT INTO crawl (urls, status) VALUES ($1, \'paused\')";\n'
            'auto e = R"(INSERT INTO snapshot (crawl_id, url) VALUES ($1, $2)\n'
            '   ON CONFLICT (crawl_id, url) DO UPDATE SET lease_owner = NULL)";\n'
            'auto f = "UPDATE crawl SET (status, label) = ($2, $3) WHERE id = $1";\n', 6),
        "scripts/planted.sh": ("psql -c \"UPDATE snapshot SET status = 'queued'\"\n", 1),
        "orchestrator/allowed.cpp": (
            '// UPDATE crawl SET status = \'sealed\' is what work_states does\n'
            'auto a = "UPDATE crawl SET label = $2 WHERE id = $1";\n'
            'auto b = "UPDATE archive_result SET status = \'queued\', attempts = 0 WHERE id = $1";\n'
            'auto c = "UPDATE crawl SET max_per_host = CASE WHEN status = \'sealed\' THEN 1 END WHERE id = $1";\n'
            'auto d = "INSERT INTO snapshot (crawl_id, url, depth) VALUES ($1, $2, 0)";\n'
            'auto e = "UPDATE snapshot SET title = $3 WHERE id = $1 AND (lease_owner = $2) IS TRUE";\n'
            'auto f = "UPDATE process p SET status = \'exited\' FROM snapshot s WHERE s.status = \'x\'";\n', 0),
        "common/work/work_states_planted.cpp": ('auto a = "UPDATE crawl SET status = \'paused\'";\n', 0),
        "migrations/0099_planted.sql": ("UPDATE crawl SET status = 'queued';\n", 0),
        "tests/planted/test_planted.cpp": ('f.exec("UPDATE snapshot SET attempts = 1");\n', 0),
    }
    failures = []
    with tempfile.TemporaryDirectory() as root:
        for rel, (text, _) in planted.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        found = breaches(root)
        for rel, (_, expected) in planted.items():
            got = [b for b in found if b.startswith(rel + ":")]
            if len(got) != expected:
                failures.append(f"{rel}: expected {expected} breaches, found {len(got)}: {got}")
        lines = sorted(int(b.split(":")[1]) for b in found if b.startswith("orchestrator/planted.cpp:"))
        if lines != [1, 3, 5, 6, 7, 9]:
            failures.append(f"orchestrator/planted.cpp: breaches named lines {lines}, not [1, 3, 5, 6, 7, 9]")
    if failures:
        print("check_state_writes self-test FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("check_state_writes self-test: every planted write caught, every allowed one passed")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    found = breaches(argv[1])
    for breach in found:
        print(breach)
    if found:
        print(f"check_state_writes: {len(found)} state writes outside the work_states module")
        return 1
    print("check_state_writes: every crawl and snapshot state write is in the work_states module")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
