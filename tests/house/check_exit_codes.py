#!/usr/bin/env python3
"""The exit-code table of docs/ops.md ("Exit codes") says what the code does:

* its table of the shared codes lists every member of `enum class ExitCode`
  (common/base/exit_codes.hpp) with its value, and nothing else;
* its table of `orchestrator status` lists every member of `enum class
  LsbStatus` (orchestrator/ops_commands.hpp) with its value; any other row
  there is a shared code (an ExitCode member with that value);
* its table of `orchestrator db status` gives `running` and `stopped` the two
  codes orchestrator/main.cpp returns for it (`command_db(...) ? A : B`);
  any other row there is a shared code;
* no other Markdown file of the tree carries an exit-code table of its own
  (one place; the others link to it).

Table rows are `| CODE | `name` | meaning |`.

    check_exit_codes.py SOURCE_DIR     check; exit 1 and list each disagreement
    check_exit_codes.py --self-test    show that each kind of disagreement is caught
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

DOC = "docs/ops.md"
EXIT_CODES = "common/base/exit_codes.hpp"
LSB = "orchestrator/ops_commands.hpp"
MAIN = "orchestrator/main.cpp"
SOURCES = (DOC, EXIT_CODES, LSB, MAIN)

ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|")
MEMBER = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*,", re.M)
DB_STATUS = re.compile(r"command_db\([^()]*\)\s*\?\s*(\d+)\s*:\s*(\d+)")
# The header of an exit-code table anywhere: "| code | ..." or "| exit | ...".
TABLE_HEADER = re.compile(r"^\|\s*(?:exit )?code\s*\|", re.I | re.M)
# The three tables, each found under the first heading matching its pattern.
SECTIONS = {
    "shared": re.compile(r"^#{2,4} .*all (?:the )?(?:three )?executables", re.I),
    "status": re.compile(r"^#{2,4} .*`orchestrator status`", re.I),
    "db status": re.compile(r"^#{2,4} .*`orchestrator db status`", re.I),
}


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def enum_members(text, name, where, found):
    match = re.search(r"enum class " + name + r"\b[^{]*\{(.*?)\};", text, re.S)
    if not match:
        found.append(f"{where}: no `enum class {name}`")
        return {}
    body = re.sub(r"//[^\n]*", "", match.group(1))
    return {member: int(value) for member, value in MEMBER.findall(body)}


def doc_tables(text, found):
    """{section: [(code, name, line number)]} for the three tables of DOC."""
    lines = text.splitlines()
    tables = {}
    for key, heading in SECTIONS.items():
        start = next((i for i, line in enumerate(lines) if heading.match(line)), None)
        if start is None:
            found.append(f"{DOC}: no heading for the exit codes of {key} (pattern {heading.pattern})")
            continue
        rows = []
        for i in range(start + 1, len(lines)):
            if lines[i].startswith("#"):
                break
            match = ROW.match(lines[i])
            if match:
                rows.append((int(match.group(1)), match.group(2), i + 1))
        if not rows:
            found.append(f"{DOC}:{start + 1}: no `| code | `name` | meaning |` rows under this heading")
        tables[key] = rows
    return tables


def compare(section, rows, expected, shared, found):
    """rows must hold every (name, code) of expected; extra rows must be shared codes."""
    seen = {}
    for code, name, line in rows:
        if name in seen:
            found.append(f"{DOC}:{line}: {section}: `{name}` listed twice")
        seen[name] = code
        want = expected.get(name, shared.get(name) if shared is not None else None)
        if want is None:
            found.append(f"{DOC}:{line}: {section}: `{name}` ({code}) is not in the code")
        elif want != code:
            found.append(f"{DOC}:{line}: {section}: `{name}` is {code} in the table, {want} in the code")
    for name, code in sorted(expected.items(), key=lambda kv: kv[1]):
        if name not in seen:
            found.append(f"{DOC}: {section}: `{name}` = {code} is missing from the table")


def tracked_markdown(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "*.md"], check=True,
                             capture_output=True).stdout.decode()
        return [p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build")]
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names if n.endswith(".md")]
        return files


def disagreements(root):
    found = []
    shared = enum_members(read(root, EXIT_CODES), "ExitCode", EXIT_CODES, found)
    lsb = enum_members(read(root, LSB), "LsbStatus", LSB, found)
    match = DB_STATUS.search(read(root, MAIN))
    db = {}
    if match:
        db = {"running": int(match.group(1)), "stopped": int(match.group(2))}
    else:
        found.append(f"{MAIN}: no `command_db(...) ? A : B` giving the codes of `db status`")
    tables = doc_tables(read(root, DOC), found)
    if "shared" in tables:
        compare("all executables", tables["shared"], shared, None, found)
    if "status" in tables:
        compare("orchestrator status", tables["status"], lsb, shared, found)
    if "db status" in tables:
        compare("orchestrator db status", tables["db status"], db, shared, found)
    for rel in tracked_markdown(root):
        if rel != DOC and TABLE_HEADER.search(read(root, rel)):
            found.append(f"{rel}: an exit-code table of its own; link to {DOC}#exit-codes instead")
    return found


def self_test():
    here = os.path.dirname(os.path.abspath(__file__))
    real = os.path.dirname(os.path.dirname(here))
    failed = False
    breaks = [
        ("a shared code renumbered in the table", DOC, r"^\| 8 \| `lease_lost`", "| 11 | `lease_lost`"),
        ("a shared code missing from the table", DOC, r"^\| 9 \| `already_running`.*\n", ""),
        ("a code the source does not have", DOC, r"^(\| 10 \| `interrupted`.*\n)", r"\1| 12 | `vanished` | x |\n"),
        ("a new code in exit_codes.hpp", EXIT_CODES, r"(interrupted = 10,)", r"\1\n    timed_out = 11,"),
        ("an LSB code changed in the source", LSB, r"dead_row = 1,", "dead_row = 2,"),
        ("the status table naming a code of neither enum", DOC, r"(`orchestrator status`[^\n]*\n(?:.*\n)*?)\| 1 \| `dead_row`",
         r"\1| 1 | `stale_row`"),
        ("db status returning another code", MAIN, r"command_db\(common, db_action\) \? 0 : 3",
         "command_db(common, db_action) ? 0 : 1"),
        ("a second exit-code table elsewhere", "README.md", r"\A", "| code | meaning |\n|---|---|\n| 0 | done |\n\n"),
    ]
    with tempfile.TemporaryDirectory() as scratch:
        def tree(edit=None):
            root = os.path.join(scratch, "tree")
            shutil.rmtree(root, ignore_errors=True)
            for rel in SOURCES + ("README.md",):
                os.makedirs(os.path.dirname(os.path.join(root, rel)) or root, exist_ok=True)
                shutil.copy(os.path.join(real, rel), os.path.join(root, rel))
            if edit:
                rel, pattern, replacement = edit
                text = read(root, rel)
                changed, n = re.subn(pattern, replacement, text, count=1, flags=re.M)
                if n != 1:
                    raise SystemExit(f"self-test: could not apply the edit {pattern!r} to {rel}")
                with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                    f.write(changed)
            return root
        found = disagreements(tree())
        if found:
            print("self-test: the tree as it is was judged bad:", *found, sep="\n  ")
            return True
        for what, rel, pattern, replacement in breaks:
            found = disagreements(tree((rel, pattern, replacement)))
            if found:
                print(f"self-test: {what}: caught ({found[0]})")
            else:
                print(f"self-test: {what}: not caught")
                failed = True
    return failed


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(1 if self_test() else 0)
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    found = disagreements(sys.argv[1])
    for line in found:
        print(line)
    if found:
        sys.exit(1)
    print(f"check_exit_codes: {DOC} agrees with {EXIT_CODES}, {LSB} and {MAIN}")


if __name__ == "__main__":
    main()
