#!/usr/bin/env bash
# Standalone test of the default plugins (plugins/*): runs each hook by hand the
# way the workers do (argv, cwd, allow-listed env; see plugins/README.md)
# against scripts/demo_site served on 127.0.0.1 and a server that stalls.
#
#   ORCH_SOURCE_DIR=/path/to/repo bash tests/plugins/test_plugins.sh
#
# Prints one line per check and ends with "N passed, M failed"; exits non-zero
# on any failure. Needs python3, wget and chromium. The visit plugin's WARC is
# checked in depth by test_visit.py (CTest plugins_visit).
set -euo pipefail

SRC=${ORCH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PLUGINS=$SRC/plugins
SITE=$SRC/scripts/demo_site
# The real interpreter (not a wrapper/shim), so $! is the hook's own pid.
PY=$(python3 -c 'import sys; print(sys.executable)')

WORK=$(mktemp -d /tmp/orch-plugins-test.XXXXXX)
DATA=$WORK/data
OUT=$WORK/out
mkdir -p "$DATA" "$OUT" "$WORK/tmp"

STARTED_PIDS=()
PASSED=0
FAILED=0

cleanup() {
    local pid
    for pid in "${STARTED_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    sleep 0.5
    for pid in "${STARTED_PIDS[@]}"; do
        kill -KILL "$pid" 2>/dev/null || true
    done
    # Anything still naming our private work directory (chromium profiles live
    # under it) was started by this test.
    for pid in $(procs_naming "$WORK"); do
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

check() { # check <description> <command...>
    local what=$1
    shift
    if "$@"; then
        echo "PASS: $what"
        PASSED=$((PASSED + 1))
    else
        echo "FAIL: $what"
        FAILED=$((FAILED + 1))
    fi
}

# procs_naming <text>: pids whose /proc/<pid>/cmdline contains <text>.
procs_naming() {
    "$PY" - "$1" <<'EOF'
import os, sys
needle = sys.argv[1].encode()
me = {os.getpid(), os.getppid()}
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) not in me:
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if needle in fh.read():
                    print(entry)
        except OSError:
            pass
EOF
}

no_procs_naming() { [ -z "$(procs_naming "$1")" ]; }

# wait_until <seconds> <command...>: poll every 0.1 s.
wait_until() {
    local limit=$1
    shift
    local end=$((SECONDS + limit))
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.1
    done
}

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

port_open() {
    "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()' "$1" \
        2>/dev/null
}

new_id() { cat /proc/sys/kernel/random/uuid; }

# Assertions over a hook's stdout: every non-empty line is a JSON object, at
# most one ArchiveResult, and <expr> (Python) holds. Names: ar (the
# ArchiveResult or None), snaps (Snapshot records), recs (all records).
PYQ='
import json, sys
expr, path = sys.argv[1], sys.argv[2]
recs, bad = [], []
with open(path, encoding="utf-8") as fh:
    for line in fh:
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad.append(line)
            continue
        (recs if isinstance(rec, dict) else bad).append(rec)
ars = [r for r in recs if r.get("type") == "ArchiveResult"]
snaps = [r for r in recs if r.get("type") == "Snapshot"]
ar = ars[0] if len(ars) == 1 else None
try:
    ok = not bad and len(ars) <= 1 and bool(eval(expr))
except Exception as exc:
    print(f"  ({path}: {exc!r})", file=sys.stderr)
    ok = False
if not ok:
    print(f"  stdout of {path}: {open(path).read()[:600]!r}", file=sys.stderr)
sys.exit(0 if ok else 1)
'
out_ok() { "$PY" -c "$PYQ" "$2" "$1"; } # out_ok <stdout file> <expr>

file_magic() { # file_magic <file> <python bytes literal>
    "$PY" -c 'import sys, ast; sys.exit(0 if open(sys.argv[1], "rb").read(16).startswith(ast.literal_eval(sys.argv[2])) else 1)' "$1" "$2" 2>/dev/null
}

rc_in() { # rc_in <rc file> <codes...>
    local rc
    rc=$(cat "$1")
    shift
    local c
    for c in "$@"; do [ "$rc" = "$c" ] && return 0; done
    echo "  exit code was $rc" >&2
    return 1
}

# A hook stops its own network work a little before its timeout; the hard bound
# is the worker's, which kills the hook at the timeout. Interpreter start-up on a
# loaded machine is not the hook's to control, so allow SLACK seconds on top:
# the check still fails for a hook that ignores its timeout (it would hang).
SLACK=${TIMEOUT_SLACK:-3}
elapsed_below() { # elapsed_below <elapsed file> <seconds>
    "$PY" -c 'import sys; t = float(open(sys.argv[1]).read()); print(f"  took {t:.2f} s", file=sys.stderr); sys.exit(0 if t < float(sys.argv[2]) + float(sys.argv[3]) else 1)' "$1" "$2" "$SLACK"
}

CRAWL_ID=$(new_id)
CRAWL_DIR=$DATA/crawls/$CRAWL_ID

# hook_env <snapshot id or ""> -> env -i arguments the worker would pass
# (the plugin config variables are appended by the caller).
hook_env() {
    local snap=$1
    HOOK_ENV=(env -i "PATH=$PATH" "HOME=$HOME" "LANG=C.UTF-8" "TMPDIR=$WORK/tmp" "DATA_DIR=$DATA" "CRAWL_DIR=$CRAWL_DIR")
    if [ -n "$snap" ]; then
        HOOK_ENV+=("SNAP_DIR=$DATA/snapshots/$snap")
    fi
}

# run_snapshot_hook <tag> <plugin> <hook file> <snapshot id> <url> [VAR=value...]
# Foreground run; leaves $OUT/<tag>.{out,err,rc,elapsed}.
run_snapshot_hook() {
    local tag=$1 plugin=$2 hook=$3 snap=$4 url=$5
    shift 5
    local dir=$DATA/snapshots/$snap/$plugin
    mkdir -p "$dir"
    hook_env "$snap"
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    (cd "$dir" && exec "${HOOK_ENV[@]}" "$@" "$PY" "$PLUGINS/$plugin/$hook" \
        "--url=$url" "--snapshot-id=$snap" "--crawl-id=$CRAWL_ID") \
        >"$OUT/$tag.out" 2>"$OUT/$tag.err" || rc=$?
    t1=$(date +%s.%N)
    echo "$rc" >"$OUT/$tag.rc"
    "$PY" -c 'import sys; print(float(sys.argv[2]) - float(sys.argv[1]))' "$t0" "$t1" >"$OUT/$tag.elapsed"
}

# start_chrome_hook <tag> <crawl dir> [VAR=value...]: background; sets CHROME_PID.
start_chrome_hook() {
    local tag=$1 crawl_dir=$2
    shift 2
    mkdir -p "$crawl_dir/chrome"
    local saved=$CRAWL_DIR
    CRAWL_DIR=$crawl_dir
    hook_env ""
    CRAWL_DIR=$saved
    (cd "$crawl_dir/chrome" && exec "${HOOK_ENV[@]}" "$@" "$PY" "$PLUGINS/chrome/on_Crawl__10_chrome.bg.py" \
        "--url=$BASE/" "--crawl-id=$(basename "$crawl_dir")") >"$OUT/$tag.out" 2>"$OUT/$tag.err" &
    CHROME_PID=$!
    STARTED_PIDS+=("$CHROME_PID")
}

# ---------------------------------------------------------------------------
# Servers: the demo site, and one whose /stall page never finishes loading.
PORT=$(free_port)
"$PY" -m http.server --bind 127.0.0.1 --directory "$SITE" "$PORT" >"$OUT/http.log" 2>&1 &
STARTED_PIDS+=("$!")
BASE=http://127.0.0.1:$PORT

cat >"$WORK/stall_server.py" <<'EOF'
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TRICKY = b"""<!DOCTYPE html><html><head><title>  Links &amp; \n  entities  </title>
<base href="/base/dir/"></head><body>
<a href="a.html">relative to base</a> <a href="a.html#frag">same, with fragment</a>
<a href="../up.html">up</a> <a href="/abs.html">absolute path</a>
<a href="https://example.org/x?q=1#y">other host</a> <a href="mailto:x@example.org">mail</a>
<a href="javascript:void(0)">js</a> <a href="#top">fragment only</a> <a href="">empty</a>
<area href="map.html"> <a href="ftp://example.org/f">ftp</a> <a href="http://[bad">bad</a>
</body></html>"""


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path in ("/links", "/notitle"):
            body = TRICKY if self.path == "/links" else b"<html><body><p>no title here</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        # Status, headers and the start of a body, then nothing, forever.
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        self.wfile.write(b"<!DOCTYPE html><html><head><title>Stalled</title></head><body><p>loading")
        self.wfile.flush()
        while True:
            time.sleep(3600)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
server.serve_forever()
EOF
STALL_PORT=$(free_port)
"$PY" "$WORK/stall_server.py" "$STALL_PORT" >"$OUT/stall.log" 2>&1 &
STARTED_PIDS+=("$!")
STALL=http://127.0.0.1:$STALL_PORT/stall

wait_until 10 port_open "$PORT" || { echo "demo site server did not start"; exit 1; }
wait_until 10 port_open "$STALL_PORT" || { echo "stall server did not start"; exit 1; }
echo "demo site at $BASE/, stalling page at $STALL, data in $DATA"

# ---------------------------------------------------------------------------
# The websocket client under the CDP helpers (plugins/chrome/cdp.py).
WS_RC=0
WS_OUT=$("$PY" "$(dirname "${BASH_SOURCE[0]}")/test_cdp_websocket.py" "$PLUGINS" 2>&1) || WS_RC=$?
echo "$WS_OUT"
WS_PASSED=$(grep -c '^PASS: ' <<<"$WS_OUT" || true)
WS_FAILED=$(grep -c '^FAIL: ' <<<"$WS_OUT" || true)
PASSED=$((PASSED + WS_PASSED))
FAILED=$((FAILED + WS_FAILED))
[ "$WS_PASSED" -gt 0 ] || { echo "FAIL: cdp websocket test did not run"; FAILED=$((FAILED + 1)); }
# A crash after its last line, or a failure it did not print as FAIL, still fails.
if [ "$WS_RC" -ne 0 ] && [ "$WS_FAILED" -eq 0 ]; then
    echo "FAIL: cdp websocket test exited $WS_RC"; FAILED=$((FAILED + 1))
fi

# ---------------------------------------------------------------------------
# html (wget) on the demo index; the crawl has no browser yet, so it runs.
S1=$(new_id)
SNAP1=$DATA/snapshots/$S1
EXPECTED_LINKS="{\"$BASE/about.html\", \"$BASE/news.html\", \"$BASE/gallery.html\", \"$BASE/contact.html\"}"

run_snapshot_hook html html on_Snapshot__20_html.py "$S1" "$BASE/"
check "html: succeeded with output_str index.html" out_ok "$OUT/html.out" 'ar["status"] == "succeeded" and ar["output_str"] == "index.html"'
check "html: index.html saved" test -s "$SNAP1/html/index.html"
check "html: requisites style.css and logo.png saved" test -s "$SNAP1/html/style.css" -a -s "$SNAP1/html/logo.png"
check "html: logo.png is a PNG" file_magic "$SNAP1/html/logo.png" 'b"\x89PNG"'
check "html: requisites referenced by relative paths" grep -q 'href="style.css"' "$SNAP1/html/index.html"
check "html: WARC warc/<snapshot-id>-wget.warc.gz written" test -s "$SNAP1/html/warc/$S1-wget.warc.gz"
check "html: title record and the 4 page links from the saved page" \
    out_ok "$OUT/html.out" "{'type': 'Snapshot', 'title': 'Demo Archive Site'} in snaps and {s['url'] for s in snaps if 'url' in s} == $EXPECTED_LINKS"

STALL_BASE=http://127.0.0.1:$STALL_PORT
S6=$(new_id)
run_snapshot_hook html_404 html on_Snapshot__20_html.py "$S6" "$BASE/missing.html"
check "html: a 404 page -> failed" out_ok "$OUT/html_404.out" 'ar["status"] == "failed" and "404" in ar["error"]'

# ---------------------------------------------------------------------------
# The crawl's chromium, and the visit through it.
start_chrome_hook chrome "$CRAWL_DIR"
PROFILE=$CRAWL_DIR/chrome/profile
check "chrome: cdp_url.txt published within 30 s" wait_until 30 test -s "$CRAWL_DIR/chrome/cdp_url.txt"
check "chrome: cdp_url.txt holds a DevTools ws URL" grep -qE '^ws://127\.0\.0\.1:[0-9]+/devtools/browser/' "$CRAWL_DIR/chrome/cdp_url.txt"
check "chrome: hook still running (foreground, not daemonized)" kill -0 "$CHROME_PID"

run_snapshot_hook visit visit on_Snapshot__20_visit.py "$S1" "$BASE/"
check "visit: succeeded through the crawl browser, exit 0" \
    out_ok "$OUT/visit.out" 'ar["status"] == "succeeded" and ar["output_json"]["via"] == "crawl browser" and ar["output_json"]["status"] == 200'
check "visit: title record without url matches the page" \
    out_ok "$OUT/visit.out" '[s for s in snaps if "url" not in s] == [{"type": "Snapshot", "title": "Demo Archive Site"}]'
check "visit: Snapshot records are exactly the 4 pages" \
    out_ok "$OUT/visit.out" "{s['url'] for s in snaps if 'url' in s} == $EXPECTED_LINKS"
check "visit: links.json lists the 4 pages" \
    "$PY" -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if set(d['links']) == $EXPECTED_LINKS else 1)" "$SNAP1/visit/links.json"
check "visit: headers.json has status 200 and headers" \
    "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if d["status"] == 200 and d["headers"] else 1)' "$SNAP1/visit/headers.json"
check "visit: screenshot.png is a valid PNG" file_magic "$SNAP1/visit/screenshot.png" 'b"\x89PNG\r\n\x1a\n"'
check "visit: output.pdf is a valid PDF" file_magic "$SNAP1/visit/output.pdf" 'b"%PDF-"'
check "visit: dom.html starts with the doctype" file_magic "$SNAP1/visit/dom.html" 'b"<!DOCTYPE html>"'
check "visit: WARC warc/<snapshot-id>-00000.warc.gz written" test -s "$SNAP1/visit/warc/$S1-00000.warc.gz"
run_snapshot_hook html_with_browser html on_Snapshot__20_html.py "$S1" "$BASE/about.html"
check "html: skipped while the crawl has a browser (HTML_ONLY_WITHOUT_BROWSER)" \
    out_ok "$OUT/html_with_browser.out" 'ar["status"] == "skipped" and "browser" in ar["error"]'
S2=$(new_id)
run_snapshot_hook visit2 visit on_Snapshot__20_visit.py "$S2" "$BASE/about.html"
check "visit: about.html title" out_ok "$OUT/visit2.out" '[s["title"] for s in snaps if "url" not in s] == ["About the Demo Site"]'

# Edge cases: link resolution by the browser (base href, fragments, schemes,
# dedupe), a page without <title>, a 404.
run_snapshot_hook visit_tricky visit on_Snapshot__20_visit.py "$S2" "$STALL_BASE/links"
check "visit: base href, fragments, non-http schemes, duplicates and bad URLs handled" \
    out_ok "$OUT/visit_tricky.out" "[s['url'] for s in snaps if 'url' in s] == ['$STALL_BASE/base/dir/a.html', '$STALL_BASE/base/up.html', '$STALL_BASE/abs.html', 'https://example.org/x?q=1', '$STALL_BASE/base/dir/']"
check "visit: title entities decoded, whitespace collapsed" \
    out_ok "$OUT/visit_tricky.out" '[s["title"] for s in snaps if "url" not in s] == ["Links & entities"]'
run_snapshot_hook visit_none visit on_Snapshot__20_visit.py "$S6" "$STALL_BASE/notitle"
check "visit: page without <title> -> no title record, title noresults" \
    out_ok "$OUT/visit_none.out" 'ar["status"] == "succeeded" and not [s for s in snaps if "url" not in s] and ar["output_json"]["outputs"]["title"]["status"] == "noresults"'
S8=$(new_id)
run_snapshot_hook visit_404 visit on_Snapshot__20_visit.py "$S8" "$BASE/missing.html"
check "visit: a 404 is recorded (succeeded, status 404)" out_ok "$OUT/visit_404.out" 'ar["status"] == "succeeded" and ar["output_json"]["status"] == 404'

# Stalled pages: every hook must give up within its timeout and report failed.
# Run them in parallel (each measures its own time); visit uses the crawl browser.
S3=$(new_id)
run_snapshot_hook stall_html html on_Snapshot__20_html.py "$S3" "$STALL" HTML_TIMEOUT=4 HTML_ONLY_WITHOUT_BROWSER=false &
P1=$!
run_snapshot_hook stall_visit visit on_Snapshot__20_visit.py "$S3" "$STALL" VISIT_TIMEOUT=5 &
P2=$!
wait "$P1" "$P2" || true
for h in html:4 visit:5; do
    tag=stall_${h%%:*}
    limit=${h##*:}
    check "$tag: failed with a timeout" out_ok "$OUT/$tag.out" 'ar["status"] == "failed" and "timed out" in ar["error"]'
    check "$tag: finished within its ${limit} s timeout (+${SLACK} s start-up slack)" elapsed_below "$OUT/$tag.elapsed" "$limit"
done
check "chrome: browser still serves after the stalled page" \
    "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import cdp; sys.exit(0 if cdp.browser_answers(open(sys.argv[2]).read().strip()) else 1)' \
    "$PLUGINS/chrome" "$CRAWL_DIR/chrome/cdp_url.txt"

if [ -n "$(procs_naming chrome_crashpad_handler | while read -r p; do grep -lF "$PROFILE" "/proc/$p/cmdline" 2>/dev/null; done)" ]; then
    echo "info: chrome_crashpad_handler of this browser is running and names the profile"
fi
check "chrome: browser processes name the user-data-dir" test -n "$(procs_naming "$PROFILE")"

T0=$SECONDS
kill -TERM "$CHROME_PID"
CHROME_RC=0
wait "$CHROME_PID" || CHROME_RC=$?
echo "info: chrome hook exited $CHROME_RC $((SECONDS - T0)) s after SIGTERM"
check "chrome: exits 0 on SIGTERM" test "$CHROME_RC" = 0
check "chrome: reports succeeded" out_ok "$OUT/chrome.out" 'ar["status"] == "succeeded" and ar["output_json"]["cdp_url"].startswith("ws://")'
check "chrome: no process naming its user-data-dir within 5 s (incl. crashpad)" wait_until 5 no_procs_naming "$PROFILE"
check "chrome: cdp_url.txt removed" test ! -e "$CRAWL_DIR/chrome/cdp_url.txt"

# One-off chromium when the crawl browser is not there.
S4=$(new_id)
run_snapshot_hook oneoff_visit visit on_Snapshot__20_visit.py "$S4" "$BASE/news.html"
check "visit: one-off chromium fallback succeeded" out_ok "$OUT/oneoff_visit.out" 'ar["status"] == "succeeded" and ar["output_json"]["via"] == "one-off chromium"'
check "visit: one-off screenshot.png is a valid PNG" file_magic "$DATA/snapshots/$S4/visit/screenshot.png" 'b"\x89PNG\r\n\x1a\n"'
check "visit: one-off output.pdf is a valid PDF" file_magic "$DATA/snapshots/$S4/visit/output.pdf" 'b"%PDF-"'
run_snapshot_hook oneoff_stall visit on_Snapshot__20_visit.py "$S4" "$STALL" VISIT_TIMEOUT=5
check "visit: one-off chromium on the stalled page fails with a timeout" \
    out_ok "$OUT/oneoff_stall.out" 'ar["status"] == "failed" and "timed out" in ar["error"] and ar["output_json"]["via"] == "one-off chromium"'
check "visit: one-off chromium on the stalled page finished within its 5 s timeout (+${SLACK} s start-up slack)" elapsed_below "$OUT/oneoff_stall.elapsed" 5
check "one-off: no chromium left behind" wait_until 5 no_procs_naming "$WORK/tmp"

# ---------------------------------------------------------------------------
# Missing tools: skipped with a reason.
CRAWL2=$DATA/crawls/$(new_id)
start_chrome_hook chrome_missing "$CRAWL2" CHROME_BINARY=/nonexistent
CHROME2_RC=0
wait "$CHROME_PID" || CHROME2_RC=$?
check "chrome: CHROME_BINARY=/nonexistent -> exit 0/10" test "$CHROME2_RC" = 0 -o "$CHROME2_RC" = 10
check "chrome: CHROME_BINARY=/nonexistent -> skipped with reason" \
    out_ok "$OUT/chrome_missing.out" 'ar["status"] == "skipped" and "/nonexistent" in ar["error"]'

S5=$(new_id)
SAVED_CRAWL_DIR=$CRAWL_DIR
CRAWL_DIR=$CRAWL2 # the crawl whose chrome hook found no chromium
run_snapshot_hook skip_visit_crawl visit on_Snapshot__20_visit.py "$S5" "$BASE/"
run_snapshot_hook html_no_browser html on_Snapshot__20_html.py "$S5" "$BASE/about.html"
CRAWL_DIR=$SAVED_CRAWL_DIR
check "visit: skipped when the crawl's chrome found no chromium" \
    out_ok "$OUT/skip_visit_crawl.out" 'ar["status"] == "skipped" and ar["error"]'
check "visit: exit 0/10 when skipped" rc_in "$OUT/skip_visit_crawl.rc" 0 10
check "html: runs when the crawl's chrome found no chromium" out_ok "$OUT/html_no_browser.out" 'ar["status"] == "succeeded"'

run_snapshot_hook skip_visit visit on_Snapshot__20_visit.py "$S5" "$BASE/" CHROME_BINARY=/nonexistent
check "visit: CHROME_BINARY=/nonexistent -> skipped" out_ok "$OUT/skip_visit.out" 'ar["status"] == "skipped" and "/nonexistent" in ar["error"]'
run_snapshot_hook skip_visit2 visit on_Snapshot__20_visit.py "$S5" "$BASE/" VISIT_CHROME_BINARY=/nonexistent
check "visit: VISIT_CHROME_BINARY=/nonexistent -> skipped" out_ok "$OUT/skip_visit2.out" 'ar["status"] == "skipped" and "/nonexistent" in ar["error"]'
run_snapshot_hook skip_html html on_Snapshot__20_html.py "$S5" "$BASE/" HTML_WGET_BINARY=/nonexistent
check "html: missing wget -> skipped" out_ok "$OUT/skip_html.out" 'ar["status"] == "skipped" and "wget" in ar["error"]'

# Non-http(s) URLs are refused (no file:// reads, no option-looking URLs).
S7=$(new_id)
for spec in html:on_Snapshot__20_html.py visit:on_Snapshot__20_visit.py; do
    plugin=${spec%%:*}
    run_snapshot_hook "file_$plugin" "$plugin" "${spec#*:}" "$S7" "file:///etc/passwd"
    run_snapshot_hook "dash_$plugin" "$plugin" "${spec#*:}" "$S7" "--disable-web-security"
    check "$plugin: file:// and option-looking URLs -> skipped, nothing written" \
        bash -c '"$0" -c "$1" "$2" "$4" && "$0" -c "$1" "$2" "$5" && [ -z "$(ls -A "$3")" ]' \
        "$PY" "$PYQ" 'ar["status"] == "skipped" and "unsupported URL" in ar["error"]' \
        "$DATA/snapshots/$S7/$plugin" "$OUT/file_$plugin.out" "$OUT/dash_$plugin.out"
done

# ---------------------------------------------------------------------------
check "no hook created *.stdout.log / *.stderr.log / *.cmd.sh files" \
    test -z "$(find "$DATA" -name '*.stdout.log' -o -name '*.stderr.log' -o -name '*.cmd.sh')"

if [ "$FAILED" -gt 0 ]; then
    echo "--- stderr of failing hooks is in the logs below ---"
    for f in "$OUT"/*.err; do
        [ -s "$f" ] || continue
        echo "== $(basename "$f")"
        grep -v dbus "$f" | tail -n 5
    done
    echo "== demo site server log (last lines)"
    tail -n 15 "$OUT/http.log"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
