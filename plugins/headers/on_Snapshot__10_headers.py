#!/usr/bin/env python3
"""Snapshot hook: HTTP response status and headers of the page, via curl.

Writes headers.json and prints an ArchiveResult whose output_json is
{"status": <int>, "headers": {name: value}}. Config (env, defaults from
config.json): HEADERS_TIMEOUT, HEADERS_CURL_BINARY, HEADERS_USER_AGENT,
HEADERS_FOLLOW_REDIRECTS. See plugins/README.md.
"""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep the plugins directory clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import hooklib  # noqa: E402
from hooklib import as_bool, budget, emit  # noqa: E402

OPTIONS = hooklib.Options("HEADERS_", __file__)


def parse_blocks(raw):
    """Split curl's -D output (one block per response, incl. redirects and 1xx)."""
    blocks = []
    current = None
    for line in raw.decode("iso-8859-1").split("\n"):
        line = line.rstrip("\r")
        if line.startswith("HTTP/"):
            parts = line.split(" ", 2)
            try:
                code = int(parts[1])
            except (IndexError, ValueError):
                code = 0
            current = {
                "http_version": parts[0][5:],
                "status": code,
                "reason": parts[2] if len(parts) > 2 else "",
                "raw_headers": [],
            }
            blocks.append(current)
        elif current is not None and ":" in line:
            name, _, value = line.partition(":")
            current["raw_headers"].append([name.strip(), value.strip()])
    return blocks


def main():
    args = hooklib.parse_args()
    if args is None:
        return 0
    started = time.monotonic()

    timeout = max(1.0, OPTIONS.num("timeout", 30))
    limit = budget(timeout)

    curl = hooklib.find_tool("curl", str(OPTIONS.opt("curl_binary", "curl") or "curl"))
    if not curl:
        return 0

    cmd = [
        curl,
        "--silent",
        "--show-error",
        "--dump-header",
        "-",
        "--output",
        os.devnull,
        "--max-time",
        f"{limit:.1f}",
        "--connect-timeout",
        f"{min(limit, 10.0):.1f}",
        "--proto",
        "=http,https",
    ]
    if as_bool(OPTIONS.opt("follow_redirects", True)):
        cmd += ["--location", "--max-redirs", "10"]
    user_agent = str(OPTIONS.opt("user_agent", "") or "")
    if user_agent:
        cmd += ["--user-agent", user_agent]
    cmd += ["--", args.url]

    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # curl enforces --max-time itself; this is a backstop.
        raw, err = proc.communicate(timeout=limit + 0.5)
    except subprocess.TimeoutExpired:
        proc.kill()
        raw, err = proc.communicate()
        proc.returncode = 28
    err_text = err.decode("utf-8", "replace").strip()
    if err_text:
        print(err_text, file=sys.stderr)

    blocks = [b for b in parse_blocks(raw) if not 100 <= b["status"] < 200]
    elapsed = time.monotonic() - started
    if proc.returncode == 28:
        emit("failed", error=f"timed out after {timeout:g} s ({err_text or 'curl exit 28'})",
             output_json={"partial_responses": blocks} if blocks else None)
        return 1
    if proc.returncode != 0 or not blocks:
        emit("failed", error=f"curl exit {proc.returncode}: {err_text or 'no response'}")
        return 1

    final = blocks[-1]
    headers = {}
    for name, value in final["raw_headers"]:
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    doc = {
        "url": args.url,
        "status": final["status"],
        "reason": final["reason"],
        "http_version": final["http_version"],
        "headers": headers,
        "raw_headers": final["raw_headers"],
        "redirects": [{"status": b["status"], "location": dict((k.lower(), v) for k, v in b["raw_headers"]).get("location")}
                      for b in blocks[:-1]],
        "elapsed_seconds": round(elapsed, 3),
    }
    with open("headers.json", "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    emit("succeeded", output_str=f"HTTP {final['status']} {final['reason']}".strip(),
         output_json={"status": final["status"], "headers": headers})
    return 0


if __name__ == "__main__":
    sys.exit(main())
