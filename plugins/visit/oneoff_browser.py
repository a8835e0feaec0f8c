"""A one-off headless chromium for a visit when the crawl has no browser.

OneOffBrowser(binary, deadline) launches chromium with the crawl browser's
flags, --remote-debugging-port=0 and a temporary --user-data-dir outside the
hook's directory, and waits (bounded by `deadline`) for DevToolsActivePort.
Use it as a context manager: `ws_url` is the DevTools endpoint; on exit the
process group is stopped and every process naming the profile is swept, and
the profile removed. Raises OSError when chromium cannot be started and
RuntimeError when it does not publish its endpoint in time.
"""

import os
import shutil
import subprocess
import tempfile
import time

import cdp


class OneOffBrowser:
    def __init__(self, binary, deadline):
        self._tmp = tempfile.mkdtemp(prefix="orch-visit-chrome-")
        self._profile = os.path.join(self._tmp, "profile")
        os.mkdir(self._profile)
        self._proc = None
        self.ws_url = None
        try:
            self._start(binary, deadline)
        except BaseException:
            self.close()
            raise

    def _start(self, binary, deadline):
        cmd = [binary, *cdp.CHROME_FLAGS, "--remote-debugging-port=0", f"--user-data-dir={self._profile}",
               "about:blank"]
        log = open(os.path.join(self._tmp, "chromium.log"), "wb")
        with log:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                          env=cdp.chrome_env(self._profile), preexec_fn=cdp.child_setup)
        port_file = os.path.join(self._profile, "DevToolsActivePort")
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"chromium exited with code {self._proc.returncode}")
            try:
                with open(port_file, encoding="utf-8") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                lines = []
            if len(lines) >= 2 and lines[0].strip().isdigit() and lines[1].startswith("/"):
                self.ws_url = f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}"
                return
            time.sleep(0.05)
        raise RuntimeError("timed out waiting for the one-off chromium to start")

    def close(self):
        if self._proc is not None:
            # A throwaway browser: no state worth a graceful close.
            cdp.stop_group(self._proc, grace=0.5)
            self._proc = None
        cdp.sweep(self._profile, grace=0.2)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
