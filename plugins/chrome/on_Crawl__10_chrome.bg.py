#!/usr/bin/env python3
"""Crawl background hook: one headless Chromium shared by the crawl's snapshots.

Launches chromium with a fresh --user-data-dir in its output directory, waits
for DevToolsActivePort, and publishes the browser's websocket URL atomically in
$CRAWL_DIR/chrome/cdp_url.txt. Stays in the foreground as long as chromium
lives. On SIGTERM (or SIGINT/SIGHUP): removes cdp_url.txt, sends CDP
Browser.close, waits briefly, terminates chromium's process group, sweeps any
process still naming the user-data-dir, and exits 0 with an ArchiveResult.

Config (env, defaults from config.json): CHROME_BINARY, CHROME_TIMEOUT (launch
bound, seconds), CHROME_KEEP_PROFILE.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep the plugins directory clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cdp  # noqa: E402
import hooklib  # noqa: E402
from hooklib import as_bool, emit  # noqa: E402

OPTIONS = hooklib.Options("CHROME_", __file__)


def log(msg):
    print(f"chrome: {msg}", file=sys.stderr, flush=True)


def write_atomic(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


STOP = {"signal": None}


def on_signal(signum, _frame):
    STOP["signal"] = signum


def read_devtools_port(profile):
    try:
        with open(os.path.join(profile, "DevToolsActivePort"), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    if len(lines) < 2 or not lines[0].strip().isdigit() or not lines[1].startswith("/"):
        return None  # not completely written yet
    return f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}"


def shutdown(proc, ws_url, profile):
    """Close the browser cleanly, then make sure nothing of it is left."""
    if ws_url and proc.poll() is None:
        deadline = time.monotonic() + 2.0
        try:
            client = cdp.CDP(ws_url, deadline)
            try:
                client.call("Browser.close", deadline=deadline)
            finally:
                client.close()
        except (OSError, cdp.WebSocketError, cdp.CDPError, cdp.DeadlineExceeded) as exc:
            log(f"Browser.close failed ({exc}); terminating instead")
    try:
        proc.wait(timeout=3.0)
    except subprocess.TimeoutExpired:
        log("browser still running after Browser.close; terminating its process group")
        cdp.stop_group(proc, grace=2.0)
    cdp.sweep(profile, grace=1.0)


def main():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    out_dir = os.getcwd()
    crawl_dir = os.environ.get("CRAWL_DIR")
    pub_dir = os.path.join(crawl_dir, "chrome") if crawl_dir else out_dir
    os.makedirs(pub_dir, exist_ok=True)
    cdp_file = os.path.join(pub_dir, "cdp_url.txt")
    unavailable_file = os.path.join(pub_dir, "unavailable.txt")
    browser_file = os.path.join(pub_dir, "browser.json")
    for stale in (cdp_file, unavailable_file, browser_file):
        remove(stale)

    configured = str(OPTIONS.opt("binary", "") or "")
    binary = cdp.resolve_binary(configured)
    if not binary:
        reason = f"chromium not found ({configured or 'searched ' + ', '.join(cdp.DEFAULT_BINARIES)})"
        write_atomic(unavailable_file, reason + "\n")
        log(reason)
        emit("skipped", output_str=reason, error=reason)
        return 0

    launch_timeout = max(1.0, OPTIONS.num("timeout", 60))
    profile = os.path.join(out_dir, "profile")
    shutil.rmtree(profile, ignore_errors=True)
    os.makedirs(profile)

    cmd = [binary, *cdp.CHROME_FLAGS, "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"]
    log("launching: " + " ".join(cmd))
    started = time.time()
    with open(os.path.join(out_dir, "chromium.log"), "ab") as chrome_log:
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=chrome_log,
                stderr=chrome_log,
                env=cdp.chrome_env(profile),
                preexec_fn=cdp.child_setup,
                close_fds=True,
            )
        except OSError as exc:
            emit("failed", error=f"cannot start {binary}: {exc}")
            return 1

    ws_url = None
    deadline = time.monotonic() + launch_timeout
    while ws_url is None:
        if STOP["signal"] is not None:
            shutdown(proc, None, profile)
            emit("failed", error="stopped before the browser was ready")
            return 1
        if proc.poll() is not None:
            cdp.sweep(profile, grace=0.5)
            emit("failed", error=f"chromium exited with code {proc.returncode} during startup (see chromium.log)")
            return 1
        if time.monotonic() > deadline:
            shutdown(proc, None, profile)
            emit("failed", error=f"chromium did not publish DevToolsActivePort within {launch_timeout:g} s")
            return 1
        ws_url = read_devtools_port(profile)
        if ws_url is None:
            time.sleep(0.05)

    product = ""
    try:
        vdeadline = min(deadline, time.monotonic() + 10)
        with cdp.CDP(ws_url, max(vdeadline, time.monotonic() + 2)) as client:
            product = client.call("Browser.getVersion", deadline=max(vdeadline, time.monotonic() + 2)).get(
                "product", ""
            )
    except (OSError, cdp.WebSocketError, cdp.CDPError, cdp.DeadlineExceeded) as exc:
        shutdown(proc, None, profile)
        emit("failed", error=f"DevTools endpoint {ws_url} does not answer: {exc}")
        return 1

    info = {
        "cdp_url": ws_url,
        "pid": proc.pid,
        "binary": binary,
        "product": product,
        "user_data_dir": profile,
        "started_at": started,
    }
    write_atomic(browser_file, json.dumps(info, indent=2) + "\n")
    write_atomic(cdp_file, ws_url + "\n")
    log(f"{product or 'chromium'} ready at {ws_url} (pid {proc.pid})")

    while STOP["signal"] is None and proc.poll() is None:
        time.sleep(0.1)

    remove(cdp_file)  # no new hook may pick up a browser that is going away
    if STOP["signal"] is None:
        # A teardown that signals the whole tree at once may reach chromium
        # first; give our own SIGTERM a moment to arrive before calling the
        # exit unexpected.
        grace_end = time.monotonic() + 1.0
        while STOP["signal"] is None and time.monotonic() < grace_end:
            time.sleep(0.05)
    if STOP["signal"] is None:
        code = proc.returncode
        cdp.sweep(profile, grace=0.5)
        info["exit_code"] = code
        write_atomic(browser_file, json.dumps(info, indent=2) + "\n")
        emit("failed", error=f"chromium exited unexpectedly with code {code} (see chromium.log)", output_json=info)
        return 1

    log(f"received signal {STOP['signal']}; closing the browser")
    shutdown(proc, ws_url, profile)
    info["stopped_at"] = time.time()
    info["exit_code"] = proc.returncode
    if not as_bool(OPTIONS.opt("keep_profile", False)):
        shutil.rmtree(profile, ignore_errors=True)
        info["user_data_dir_removed"] = True
    write_atomic(browser_file, json.dumps(info, indent=2) + "\n")
    uptime = info["stopped_at"] - started
    emit(
        "succeeded",
        output_str=f"{product or 'chromium'} served the crawl for {uptime:.1f} s",
        output_json={k: info[k] for k in ("cdp_url", "pid", "product", "exit_code")},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
