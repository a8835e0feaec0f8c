"""Shared plumbing of the default Python hooks (standard library only).

Not a hook and not a plugin: the workers scan only the directories under
plugins/ and run only files named on_*, so this file at the top level is
never run by itself. Hooks import it with a path relative to their own file:

    sys.dont_write_bytecode = True  # keep the plugins directory clean
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import hooklib  # noqa: E402

What is here is part of the hook contract (plugins/README.md): the result
record, the http(s)-only URL rule, the time budget, the option lookup and
decoding a saved HTML page. A
change here changes every hook that uses it.
"""

import argparse
import json
import os
import re
import shutil
import time
import urllib.parse

# -- configuration ------------------------------------------------------------


def load_config(plugin_dir):
    """The plugin's config.json as a dict ({} when missing or unreadable)."""
    try:
        with open(os.path.join(plugin_dir, "config.json"), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


class Options:
    """A plugin's options: the environment variable <prefix><KEY> when set
    (the worker passes the effective config that way), else the key in the
    config.json next to hook_file, else the default."""

    def __init__(self, prefix, hook_file):
        self.prefix = prefix
        self.config = load_config(os.path.dirname(os.path.abspath(hook_file)))

    def opt(self, key, default=None):
        value = os.environ.get(self.prefix + key.upper())
        return self.config.get(key, default) if value is None else value

    def num(self, key, default):
        """The option as a float; the default when it is not a number."""
        try:
            return float(self.opt(key, default))
        except (TypeError, ValueError):
            return float(default)


def as_bool(value):
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")


# -- the result record and the URL argument ------------------------------------


def emit(status, output_str="", error="", output_json=None):
    """Print the hook's ArchiveResult record (at most one per run)."""
    record = {"type": "ArchiveResult", "status": status, "output_str": output_str}
    if output_json is not None:
        record["output_json"] = output_json
    if error:
        record["error"] = error
    print(json.dumps(record), flush=True)


def link_url(base, href):
    """The absolute http(s) URL of `href` (resolved against `base`) without its
    fragment, or None for any other scheme, no host or a bad port."""
    try:
        absolute, _ = urllib.parse.urldefrag(urllib.parse.urljoin(base, href))
        parts = urllib.parse.urlsplit(absolute)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        parts.port  # raises ValueError on a bad port
    except ValueError:
        return None
    return absolute


def http_url(url):
    """Only http(s) URLs are archived (no file://, no option-looking text)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc) and not url.startswith("-")


def parse_args():
    """The hook's arguments (--url is required; others are ignored). Returns
    None after reporting `skipped` when the URL is not http(s): the hook then
    exits 0 without fetching anything."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--url", required=True)
    args, _ = parser.parse_known_args()
    if not http_url(args.url):
        emit("skipped", output_str="not an http(s) URL", error=f"unsupported URL (only http and https): {args.url[:200]}")
        return None
    return args


def find_tool(name, configured):
    """shutil.which(configured); when it is not found, reports `skipped`
    ("<name> not found (<configured>)") and returns None."""
    path = shutil.which(configured)
    if not path:
        emit("skipped", output_str=f"{name} not found ({configured})", error=f"{name} not found ({configured})")
    return path


# -- time budget -------------------------------------------------------------------


def budget(timeout):
    """Seconds a hook may spend before reporting, leaving a margin inside the
    worker's timeout for cleanup and printing the result."""
    margin = min(5.0, max(1.5, 0.15 * timeout))
    return max(0.5, timeout - margin)


# -- decoding a saved page -----------------------------------------------------------


def decode(body, charset=None):
    """Text of an HTML body: the given charset, else a <meta charset>, else UTF-8."""
    if not charset:
        m = re.search(rb'<meta[^>]+charset=["\']?([A-Za-z0-9_.:-]+)', body[:4096], re.I)
        charset = m.group(1).decode("ascii") if m else "utf-8"
    try:
        return body.decode(charset, "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


# -- the crawl's browser while it starts ----------------------------------------------


def wait_for_crawl_browser(deadline):
    """Wait (until `deadline`, time.monotonic()) while the crawl's chrome hook
    is still starting its browser: $CRAWL_DIR/chrome/ exists (the worker made
    it for the hook) but holds neither cdp_url.txt nor unavailable.txt, and no
    browser.json says the browser stopped. The first snapshots of a crawl start
    right after the background hook, before the browser has published itself;
    without the wait they would fall back to a one-off chromium (visit) or to
    wget (html). Returns at once when the crawl has no chrome directory."""
    crawl_dir = os.environ.get("CRAWL_DIR")
    if not crawl_dir:
        return
    chrome_dir = os.path.join(crawl_dir, "chrome")
    while time.monotonic() < deadline and os.path.isdir(chrome_dir):
        if any(os.path.exists(os.path.join(chrome_dir, f)) for f in ("cdp_url.txt", "unavailable.txt")):
            return
        try:
            with open(os.path.join(chrome_dir, "browser.json"), encoding="utf-8") as fh:
                if "stopped_at" in json.load(fh):
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
