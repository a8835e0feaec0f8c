"""One visit of one page in a browser: navigate once, record the network,
then take every capture from the same rendered page.

visit() opens a fresh browser context and target on the browser at ws_url,
enables Network (large buffers, cache and service workers bypassed), navigates,
waits for the load event and then for network idle (no request in flight for
idle_ms, at most idle_timeout seconds, never past load_deadline), and takes
the DOM, title, links, screenshot and PDF. The context is disposed of
afterwards in every case.

Blocking: bounded by `deadline` (absolute, time.monotonic()). Failures of the
browser connection and of the navigation come back in VisitResult.error, a
capture that fails alone in VisitResult.outputs[name]["error"]; nothing is
raised for them.
"""

import base64
import time

from devtools_session import CDPError, DeadlineExceeded, DevToolsSession, WebSocketError
from network_recorder import NetworkRecorder

_BROWSER_ERRORS = (OSError, WebSocketError, CDPError, DeadlineExceeded, KeyError, ValueError)

# Rendered DOM with its doctype; title; the browser-resolved hrefs of a[href].
_DOM_JS = """(() => {
  const d = document.doctype;
  const doctype = d ? '<!DOCTYPE ' + d.name + (d.publicId ? ' PUBLIC "' + d.publicId + '"' : '')
      + (!d.publicId && d.systemId ? ' SYSTEM' : '') + (d.systemId ? ' "' + d.systemId + '"' : '') + '>\\n' : '';
  return doctype + document.documentElement.outerHTML;
})()"""
_TITLE_JS = "document.title"
_LINKS_JS = "Array.from(document.querySelectorAll('a[href]'), a => a.href)"


class VisitOptions:
    def __init__(self, width=1280, height=800, full_page=True, max_screenshot_height=16384, screenshot=True,
                 pdf=True, dom=True, print_background=True, idle_ms=500, idle_timeout=10.0,
                 max_page_bytes=100_000_000, user_agent="", fresh_context=False):
        self.width, self.height = int(width), int(height)
        self.full_page = bool(full_page)
        self.max_screenshot_height = max(1, int(max_screenshot_height))
        self.screenshot, self.pdf, self.dom = bool(screenshot), bool(pdf), bool(dom)
        self.print_background = bool(print_background)
        self.idle_seconds = max(0.0, float(idle_ms) / 1000.0)
        self.idle_timeout = max(0.0, float(idle_timeout))
        self.max_page_bytes = int(max_page_bytes)
        self.user_agent = user_agent
        self.fresh_context = bool(fresh_context)


class VisitResult:
    def __init__(self):
        self.error = None  # why the page did not load (the visit failed)
        self.timed_out = False
        self.recorder = None
        self.loader_id = None
        self.final_url = None
        self.load_seconds = None
        self.network_idle = False
        self.title = None
        self.links = []
        self.dom = None
        self.screenshot = None  # PNG bytes
        self.pdf = None  # PDF bytes
        self.outputs = {}  # capture name -> {"error": ...} for captures that failed


def _evaluate(session, target, expression, deadline):
    result = session.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                          session_id=target, deadline=deadline)
    if result.get("exceptionDetails"):
        raise CDPError(f"evaluation failed: {result['exceptionDetails'].get('text', 'exception')}")
    return result.get("result", {}).get("value")


def _pump(session, recorder, target, until, stop):
    """Feed events to the recorder until stop(event) is true or the time
    `until` passes; returns True when stop() ended it."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return False
        ev = session.next_event(min(left, 0.1))
        if ev is None:
            if stop(None):
                return True
            continue
        recorder.handle(ev)
        if stop(ev):
            return True


def visit(ws_url, url, options, load_deadline, deadline):
    result = VisitResult()
    started = time.monotonic()
    try:
        session = DevToolsSession(ws_url, deadline)
    except _BROWSER_ERRORS as exc:
        result.error = f"cannot connect to the browser: {exc}"
        return result
    context_id = target_id = None
    try:
        # A browser context of its own isolates the page's cookies and storage
        # from the crawl's other pages; a tab in the browser's default context
        # shares them (as one person browsing the site would) and is cheaper.
        target_params = {"url": "about:blank"}
        if options.fresh_context:
            context_id = session.call("Target.createBrowserContext", {"disposeOnDetach": True},
                                      deadline=deadline)["browserContextId"]
            target_params["browserContextId"] = context_id
        target_id = session.call("Target.createTarget", target_params, deadline=deadline)["targetId"]
        target = session.call("Target.attachToTarget", {"targetId": target_id, "flatten": True},
                              deadline=deadline)["sessionId"]

        def cmd(method, params=None):
            return session.call(method, params, session_id=target, deadline=deadline)

        recorder = NetworkRecorder(session, target, options.max_page_bytes, deadline)
        result.recorder = recorder
        cmd("Page.enable")
        cmd("Network.enable", {"maxTotalBufferSize": 512 * 1024 * 1024, "maxResourceBufferSize": 256 * 1024 * 1024,
                               "maxPostDataSize": 1024 * 1024})
        cmd("Network.setCacheDisabled", {"cacheDisabled": True})
        cmd("Network.setBypassServiceWorker", {"bypass": True})
        if options.user_agent:
            cmd("Network.setUserAgentOverride", {"userAgent": options.user_agent})
        cmd("Emulation.setDeviceMetricsOverride",
            {"width": options.width, "height": options.height, "deviceScaleFactor": 1, "mobile": False})

        try:
            nav = session.call("Page.navigate", {"url": url}, session_id=target, deadline=load_deadline)
        except DeadlineExceeded:
            result.error, result.timed_out = "timed out waiting for the server", True
            return result
        if nav.get("errorText"):
            result.error = f"navigation failed: {nav['errorText']}"
            _pump(session, recorder, target, time.monotonic() + 0.2, lambda ev: False)
            return result
        result.loader_id = nav.get("loaderId")

        loaded = _pump(session, recorder, target, load_deadline,
                       lambda ev: ev is not None and ev.get("method") == "Page.loadEventFired"
                       and ev.get("sessionId") == target)
        if not loaded:
            result.error, result.timed_out = "timed out waiting for the page to load", True
            return result
        result.load_seconds = round(time.monotonic() - started, 3)

        quiet_since = [time.monotonic() if recorder.inflight == 0 else None]

        def idle(_ev):
            now = time.monotonic()
            if recorder.inflight:
                quiet_since[0] = None
                return False
            if quiet_since[0] is None:
                quiet_since[0] = now
            return now - quiet_since[0] >= options.idle_seconds

        result.network_idle = _pump(session, recorder, target,
                                    min(load_deadline, time.monotonic() + options.idle_timeout), idle)

        _capture(session, target, cmd, options, result, deadline)
        # Late events (ExtraInfo of the last responses).
        _pump(session, recorder, target, min(deadline, time.monotonic() + 0.05), lambda ev: False)
        return result
    except _BROWSER_ERRORS as exc:
        if isinstance(exc, DeadlineExceeded):
            result.timed_out = True
        result.error = result.error or f"browser error: {exc}"
        return result
    finally:
        cleanup = time.monotonic() + 1.5
        for method, params in (("Target.closeTarget", {"targetId": target_id}),
                               ("Target.disposeBrowserContext", {"browserContextId": context_id})):
            if params[next(iter(params))]:
                try:
                    session.call(method, params, deadline=cleanup)
                except _BROWSER_ERRORS:
                    pass
        session.close()


def _capture(session, target, cmd, options, result, deadline):
    """The captures of the loaded page; each failure is recorded on its own."""
    def attempt(name, action):
        try:
            action()
        except _BROWSER_ERRORS as exc:
            result.outputs[name] = {"error": str(exc) or type(exc).__name__}

    def title():
        result.title = _evaluate(session, target, _TITLE_JS, deadline) or ""

    def final_url():
        result.final_url = _evaluate(session, target, "document.URL", deadline)

    def links():
        result.links = [h for h in (_evaluate(session, target, _LINKS_JS, deadline) or []) if isinstance(h, str)]

    def dom():
        result.dom = _evaluate(session, target, _DOM_JS, deadline) or ""

    def screenshot():
        params = {"format": "png"}
        if options.full_page:
            metrics = cmd("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
            params["clip"] = {"x": 0, "y": 0, "width": max(1, int(size.get("width", options.width))),
                              "height": max(1, min(int(size.get("height", options.height)),
                                                   options.max_screenshot_height)), "scale": 1}
            params["captureBeyondViewport"] = True
        result.screenshot = base64.b64decode(cmd("Page.captureScreenshot", params)["data"])

    def pdf():
        data = cmd("Page.printToPDF", {"printBackground": options.print_background, "preferCSSPageSize": True})
        result.pdf = base64.b64decode(data["data"])

    attempt("title", title)
    attempt("final_url", final_url)
    attempt("links", links)
    if options.dom:
        attempt("dom", dom)
    if options.screenshot:
        attempt("screenshot", screenshot)
    if options.pdf:
        attempt("pdf", pdf)
