#!/usr/bin/env python3
"""Snapshot hook: the page with its requisites (CSS, images, scripts) via wget,
links rewritten for offline viewing.

Runs: wget --page-requisites --convert-links --adjust-extension
--no-host-directories -e robots=off --timeout=T --tries=2 <url>, bounded as a
whole by the plugin timeout. output_str is the path of the main document
relative to this directory. Config (env, defaults from config.json):
HTML_TIMEOUT, HTML_WGET_BINARY, HTML_USER_AGENT. See plugins/README.md.
"""

import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep the plugins directory clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hooklib  # noqa: E402
from hooklib import budget, emit  # noqa: E402

OPTIONS = hooklib.Options("HTML_", __file__)


# wget --no-verbose: '2025-01-01 12:00:00 URL:http://h/p [123/123] -> "p.html" [1]'
SAVED = re.compile(r'URL:\s*(\S+).*?->\s*"(.+?)"')


def list_files(root):
    out = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def main():
    args = hooklib.parse_args()
    if args is None:
        return 0
    started = time.monotonic()

    timeout = max(1.0, OPTIONS.num("timeout", 60))
    limit = budget(timeout)

    wget = hooklib.find_tool("wget", str(OPTIONS.opt("wget_binary", "wget") or "wget"))
    if not wget:
        return 0

    cmd = [
        wget,
        "--no-verbose",
        "--page-requisites",
        "--convert-links",
        "--adjust-extension",
        "--no-host-directories",
        "--no-parent",
        "-e",
        "robots=off",
        # wget's own (per read/connect) timeout stays above the overall
        # bound below, so a stalled page is reported as a timeout of the hook.
        f"--timeout={limit + 1:.1f}",
        "--tries=2",  # one retry for transient errors ("No data received"); bounded below
        "--restrict-file-names=unix",
        "--directory-prefix=.",
    ]
    user_agent = str(OPTIONS.opt("user_agent", "") or "")
    if user_agent:
        cmd.append(f"--user-agent={user_agent}")
    cmd += ["--", args.url]

    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        _, err = proc.communicate()
    log = err.decode("utf-8", "replace")
    if log.strip():
        print(log.rstrip(), file=sys.stderr)

    saved = [m.group(2) for m in SAVED.finditer(log)]
    files = list_files(".")
    if timed_out:
        emit("failed", error=f"timed out after {timeout:g} s", output_json={"files": files})
        return 1
    main_doc = saved[0] if saved else None
    if main_doc and main_doc.startswith("./"):
        main_doc = main_doc[2:]
    if not main_doc or not os.path.isfile(main_doc):
        errors = [l.strip() for l in log.splitlines()
                  if any(w in l.lower() for w in ("error", "failed", "giving up", "unable"))]
        emit("failed", error=f"wget exit {proc.returncode}: " + ("; ".join(errors[-3:]) or "page not saved"))
        return 1
    # Exit 8 (server error on some requisite) still leaves a usable page.
    elapsed = time.monotonic() - started
    emit(
        "succeeded",
        output_str=main_doc,
        output_json={
            "main": main_doc,
            "files": files,
            "requisites": len(files) - 1,
            "wget_exit": proc.returncode,
            "elapsed_seconds": round(elapsed, 3),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
