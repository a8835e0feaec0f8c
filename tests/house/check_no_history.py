#!/usr/bin/env python3
"""No file of the tracked tree cites what a reader cannot look up: numbered work
items or past runs (a work-item word such as issue, stop or session followed by
its number, or "the issue's goals") or paths outside the repository (the shared
reference folder one level up, "/work/...").
Code comments, tests, scripts and the text they print are all covered; every
finding is printed as FILE:LINE: TEXT.

    check_no_history.py SOURCE_DIR     check the tree; exit 1 and list each finding
    check_no_history.py --self-test    show what is caught and what is not

Legitimate numbers stay legal: "HTTP status 404", "exit code 7", "row 2 of
scripts/bench", a stop followed by a duration, "stops 2 workers" and "the
../../etc/passwd a test feeds in" are not findings. The self-test spells its
samples from pieces, so that this file passes the plain grep for them too.
"""
import os
import re
import subprocess
import sys
import tempfile

# A number after a work-item word, with or without '#', one or several numbers,
# a possessive after it. A number followed by a unit or a count noun is ordinary
# prose (a stop some seconds later, "stops 2 workers"); the trailing (?![\d.]) keeps the
# backtracking from matching a shorter prefix of the number.
_WORD = r"(?:stops?|issues?|sessions?|tickets?|work[ -]items?|milestones?|sprints?)"
_UNIT = (r"(?:ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hours?|days?|%|x|times|bytes?|KiB|MiB|GiB|"
         r"workers?|processes|process|crawls?|snapshots?|hooks?|trees?|rows?|children|members?|statements?|queries|"
         r"signals?|lines?|passes)\b")
NUMBERED = re.compile(r"\b" + _WORD + r"\s+#?\s*\d+(?![\d.])(?!\s*" + _UNIT + r")", re.I)
# A work item named without its number ("the goals"), and past work
# sessions. ("The last stop signal" and "a session setting" stay legal.)
UNNUMBERED = re.compile(r"\bissue's\b|\b(?:previous|earlier|past) sessions?\b", re.I)
# Paths outside the repository: a sibling folder of the checkout, or an
# absolute path into the machine the project was developed on.
OUTSIDE = re.compile(r"\.\./shared\b|(?<![\w./-])/(?:work|shared|home/[\w.-]+)/")
PATTERNS = (NUMBERED, UNNUMBERED, OUTSIDE)

# This file names the patterns it looks for.
SELF = "tests/house/check_no_history.py"


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        # Not a git checkout (an unpacked tarball): every file but build output.
        files = []
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build")]
            files += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
        return sorted(files)


def findings(root):
    found = []
    for rel in tracked_files(root):
        if rel == SELF:
            continue
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue  # binary (an image), or deleted in the work tree
        for number, line in enumerate(lines, 1):
            for pattern in PATTERNS:
                match = pattern.search(line)
                if match:
                    found.append(f"{rel}:{number}: [{match.group(0)}] {line.strip()}")
                    break
    return found


def self_test():
    # Spelled from pieces: the samples must match the checker, not a grep of this file.
    w = {"stop": "st" + "op", "Stop": "St" + "op", "issue": "iss" + "ue", "Issue": "Iss" + "ue",
         "session": "sess" + "ion", "shared": ".." + "/shared/"}
    bad = [line.format(**w) for line in [
        "// measured at the end of {stop} 14",
        "-- Bench row 2 ({issue} 10): two costs",
        "# Builds in Release, runs the benchmarks of {Issue} #10",
        "on {stop} 29's VM, where a program takes 18 ms",
        "slow process starts ({stop}s 26 and 33)",
        "as found in {session} 7",
        "the machine the {issue}'s goals were set on",
        "// {issue}'s reference figures were measured",
        "see `{shared}reference/process-teardown.md`",
        "printf(\"reference: /work/shared/pg-queues.md\\n\");",
        "the figures of the previous {session}",
    ]]
    good = [line.format(**w) for line in [
        "a hook that answers HTTP status 404 fails",
        "exit code 7: invalid input",
        "row 2 of scripts/bench measures a crawl",
        "a {stop} 10 s later kills the tree",
        "the orchestrator {stop}s 2 workers at once",
        "{issue} 3 statements per snapshot",
        "the test feeds in ../../etc/passwd",
        "#include \"common/work/lease.hpp\"",
        "the {session} settings of the connection",
        "a {stop} signal during the wait",
        "the last {stop} signal wins",
    ]]
    failed = False
    with tempfile.TemporaryDirectory() as root:
        def run(lines):
            with open(os.path.join(root, "sample.txt"), "w") as f:
                f.write("\n".join(lines) + "\n")
            return findings(root)
        for line in bad:
            found = run([line])
            if not found:
                print(f"self-test: not caught: {line}")
                failed = True
            else:
                print(f"self-test: caught: {found[0]}")
        for line in good:
            found = run([line])
            if found:
                print(f"self-test: legitimate text judged bad: {found[0]}")
                failed = True
    if not failed:
        print(f"self-test: {len(bad)} references caught, {len(good)} legitimate lines passed")
    return failed


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(1 if self_test() else 0)
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    found = findings(sys.argv[1])
    for line in found:
        print(line)
    if found:
        print(f"check_no_history: {len(found)} reference(s) to numbered work items, past runs or paths outside "
              "the repository; say what was measured or decided instead")
        sys.exit(1)
    print("check_no_history: no references to work items, past runs or outside paths")


if __name__ == "__main__":
    main()
