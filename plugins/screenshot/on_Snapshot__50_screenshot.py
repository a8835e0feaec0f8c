#!/usr/bin/env python3
"""Snapshot hook: screenshot.png of the page (PNG), through the crawl's chromium
when it is up, else a one-off headless chromium. See plugins/README.md."""

import os
import sys

sys.dont_write_bytecode = True  # keep the plugins directory clean
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chrome"))
import cdp  # noqa: E402

if __name__ == "__main__":
    sys.exit(cdp.run_capture_hook("screenshot", "png", "screenshot.png", __file__))
