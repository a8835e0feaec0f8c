#!/usr/bin/env python3
"""The layers of common/: every #include between its folders follows the order
that common/CMakeLists.txt declares (ORCH_COMMON_LAYERS), so no folder reaches a
later one, two folders never include each other, and common/ includes nothing of
the executables or the tests. Folders listed in NO_POSTGRES include no libpqxx.
Across the production code (common/ and the executables), no two units (a
.hpp/.cpp pair) depend on each other, directly or round a longer cycle.

    check_layers.py SOURCE_DIR      check the tree; exit 1 and list each breach
    check_layers.py --self-test     show that each kind of breach is caught
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
LAYERS = re.compile(r'set\(ORCH_COMMON_LAYERS\s+([^)]*)\)')
# The core layers that must not know the database.
NO_POSTGRES = ("base", "url", "archive", "config", "supervision")
EXECUTABLES = ("orchestrator", "crawl_worker", "snapshot_worker", "tests")


def layers_of(root):
    with open(os.path.join(root, "common", "CMakeLists.txt")) as f:
        match = LAYERS.search(f.read())
    if not match:
        raise SystemExit("check_layers: no ORCH_COMMON_LAYERS in common/CMakeLists.txt")
    return match.group(1).split()


def breaches(root):
    layers = layers_of(root)
    rank = {name: i for i, name in enumerate(layers)}
    found = []
    common = os.path.join(root, "common")
    for entry in sorted(os.listdir(common)):
        path = os.path.join(common, entry)
        if os.path.isfile(path) and entry != "CMakeLists.txt":
            found.append(f"common/{entry}: a file at the top of common/ (only the layer folders belong there)")
        elif os.path.isdir(path) and entry not in rank:
            found.append(f"common/{entry}/: a folder missing from ORCH_COMMON_LAYERS")
    edges = set()
    for layer in layers:
        folder = os.path.join(common, layer)
        if not os.path.isdir(folder):
            found.append(f"common/{layer}/: listed in ORCH_COMMON_LAYERS but missing")
            continue
        for dirpath, _, files in os.walk(folder):
            for name in sorted(files):
                if not name.endswith((".hpp", ".cpp")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                with open(os.path.join(dirpath, name), errors="replace") as f:
                    text = f.read()
                for target in INCLUDE.findall(text):
                    parts = target.split("/")
                    if parts[0] in EXECUTABLES:
                        found.append(f"{rel}: includes {target}, a part of an executable or the tests")
                    elif parts[0] == "common":
                        other = parts[1] if len(parts) > 2 else None
                        if other not in rank:
                            found.append(f"{rel}: includes {target}, which is in no layer")
                        elif rank[other] > rank[layer]:
                            found.append(f"{rel}: includes {target}: {layer} comes before {other}")
                        elif other != layer:
                            edges.add((layer, other))
                    elif parts[0] == "pqxx" and layer in NO_POSTGRES:
                        found.append(f"{rel}: includes <{target}>: {layer} knows nothing of PostgreSQL")
    # A layer's CMake target links only earlier layers.
    link = re.compile(r'\bcommon_([a-z_]+)\b')
    for layer in layers:
        cmake = os.path.join(common, layer, "CMakeLists.txt")
        if not os.path.isfile(cmake):
            found.append(f"common/{layer}/CMakeLists.txt: missing")
            continue
        with open(cmake) as f:
            for other in set(link.findall(f.read())):
                if other != layer and other in rank and rank[other] > rank[layer]:
                    found.append(f"common/{layer}/CMakeLists.txt: links common_{other}, a later layer")
    found += unit_cycles(root)
    return found, edges


PRODUCTION = ("common", "orchestrator", "crawl_worker", "snapshot_worker")


def unit_cycles(root):
    """Units (a path without its .hpp/.cpp) that reach themselves through their
    includes: each cycle once, as its members in order."""
    deps = {}
    for top in PRODUCTION:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".hpp", ".cpp")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                unit = rel.rsplit(".", 1)[0]
                with open(os.path.join(dirpath, name), errors="replace") as f:
                    targets = INCLUDE.findall(f.read())
                deps.setdefault(unit, set()).update(
                    t.rsplit(".", 1)[0] for t in targets if t.split("/")[0] in PRODUCTION and t.rsplit(".", 1)[0] != unit)
    # Tarjan's strongly connected components, iteratively.
    index, low, on_stack, stack, cycles, counter = {}, {}, set(), [], [], [0]
    for start in sorted(deps):
        if start in index:
            continue
        work = [(start, iter(sorted(deps.get(start, ()))))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in deps:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]; counter[0] += 1
                    stack.append(nxt); on_stack.add(nxt)
                    work.append((nxt, iter(sorted(deps.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    m = stack.pop(); on_stack.discard(m); members.append(m)
                    if m == node:
                        break
                if len(members) > 1:
                    cycles.append(sorted(members))
    return [f"{c[0]}: units that include each other: {' <-> '.join(c)}" for c in sorted(cycles)]


def self_test():
    """Builds small trees that break the rules one at a time; each must be caught."""
    def tree(files):
        root = tempfile.mkdtemp(prefix="check_layers.")
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        return root
    good = {
        "common/CMakeLists.txt": "set(ORCH_COMMON_LAYERS base db)\n",
        "common/base/CMakeLists.txt": "add_library(common_base STATIC a.cpp)\n",
        "common/base/a.hpp": "#pragma once\n#include <string>\n",
        "common/db/CMakeLists.txt": "add_library(common_db STATIC b.cpp)\ntarget_link_libraries(common_db PUBLIC common_base)\n",
        "common/db/b.cpp": '#include "common/base/a.hpp"\n#include <pqxx/pqxx>\n',
    }
    cases = {
        "an include against the order": {"common/base/a.cpp": '#include "common/db/b.hpp"\n'},
        "a cycle between two folders": {"common/base/c.cpp": '#include "common/db/b.hpp"\n',
                                         "common/db/d.cpp": '#include "common/base/a.hpp"\n'},
        "an executable included from common": {"common/db/e.cpp": '#include "orchestrator/work_queue.hpp"\n'},
        "a file at the top of common": {"common/stray.cpp": "int x;\n"},
        "a folder in no layer": {"common/extra/f.cpp": "int y;\n"},
        "libpqxx in a core layer": {"common/base/g.cpp": "#include <pqxx/pqxx>\n"},
        "a link to a later layer": {"common/base/CMakeLists.txt": "target_link_libraries(common_base PUBLIC common_db)\n"},
        "two units that include each other": {"orchestrator/x.hpp": '#include "orchestrator/y.hpp"\n',
                                               "orchestrator/y.cpp": '#include "orchestrator/x.hpp"\n',
                                               "orchestrator/y.hpp": "#pragma once\n"},
        "a cycle of three units": {"common/db/p.hpp": '#include "common/db/q.hpp"\n',
                                   "common/db/q.cpp": '#include "common/db/r.hpp"\n',
                                   "common/db/r.cpp": '#include "common/db/p.hpp"\n'},
    }
    failures = 0
    found, _ = breaches(tree(good))
    if found:
        print("self-test: the good tree was judged bad:", found)
        failures += 1
    for what, change in cases.items():
        found, _ = breaches(tree({**good, **change}))
        if not found:
            print(f"self-test: {what} was not caught")
            failures += 1
        else:
            print(f"self-test: {what}: caught ({found[0]})")
    return failures


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(1 if self_test() else 0)
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    found, edges = breaches(sys.argv[1])
    for line in found:
        print(line)
    if found:
        print(f"check_layers: {len(found)} breach(es) of the order {' < '.join(layers_of(sys.argv[1]))}")
        sys.exit(1)
    print(f"check_layers: order {' < '.join(layers_of(sys.argv[1]))}; "
          f"{len(edges)} folder dependencies, all forward")


if __name__ == "__main__":
    main()
