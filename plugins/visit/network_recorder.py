"""Every HTTP exchange of one page visit, from the CDP Network domain.

Why Network (and not Fetch): Network.* events see every response the page
loads, redirects included (requestWillBeSent.redirectResponse), together with
the raw headers of the *ExtraInfo events, without pausing any request. The
Fetch domain would intercept and hold each request, which changes the page's
timing and needs a reply per request (a missed one stalls the page). Bodies
come from Network.getResponseBody as soon as loadingFinished arrives (the
renderer may evict them later), with large buffers set at Network.enable.
Bodies of 3xx responses are not kept by the browser: a redirect is recorded
with its headers and an empty body.

Byte cap: bodies are counted as they are fetched; the one that crosses
max_page_bytes is cut to what is left and later ones to zero, all marked
truncated (the WARC writer adds WARC-Truncated: length). A body cut off by
the connection is kept as far as it came, marked "disconnect".

Not thread-safe; handle() calls back into the session (getResponseBody), so
it runs on the thread that issues commands.
"""

import base64

from devtools_session import CDPError, DeadlineExceeded, WebSocketError


class Exchange:
    """One request/response hop (a redirect chain has one per hop)."""

    def __init__(self, request_id, request, wall_time, resource_type):
        self.request_id = request_id
        self.url = request.get("url", "")
        self.method = request.get("method", "GET")
        self.request_headers = request.get("headers") or {}
        post = request.get("postData")
        self.post_data = post.encode("utf-8") if isinstance(post, str) else b""
        self.wall_time = wall_time
        self.resource_type = resource_type or ""
        self.response = None  # CDP Response object
        self.body = None  # bytes, decoded by the browser
        self.body_error = None
        self.truncated = None  # WARC-Truncated reason ("length", "disconnect") or None
        self.finished = False
        self.raw_request_headers = None  # from requestWillBeSentExtraInfo
        self.raw_response = None  # responseReceivedExtraInfo params

    @property
    def status(self):
        return int((self.response or {}).get("status", 0))


class NetworkRecorder:
    def __init__(self, session, target_session, max_page_bytes, deadline):
        self._session = session
        self._target = target_session
        self._max_page_bytes = max(0, int(max_page_bytes))
        self._deadline = deadline
        self._current = {}  # requestId -> Exchange in flight
        self._extra_request = {}  # requestId -> [headers] in arrival order
        self._extra_response = {}  # requestId -> [params] in arrival order
        self.exchanges = []  # finished hops, in completion order
        self.failed = []  # (url, errorText) of requests that got no response
        self.body_bytes = 0
        self.truncated_count = 0
        self.ignored = 0  # data:, blob:, ... responses (not HTTP)

    @property
    def inflight(self):
        return len(self._current)

    def handle(self, event):
        """Feed one CDP event (others than Network.* are ignored)."""
        method = event.get("method", "")
        if not method.startswith("Network.") or event.get("sessionId") != self._target:
            return
        p = event.get("params", {})
        rid = p.get("requestId")
        if method == "Network.requestWillBeSent":
            previous = self._current.pop(rid, None)
            if previous is not None and p.get("redirectResponse"):
                previous.response = p["redirectResponse"]
                previous.body = b""
                previous.finished = True
                self.exchanges.append(previous)
            if not p.get("request", {}).get("url", "").startswith(("http://", "https://")):
                self.ignored += 1
                return
            self._current[rid] = Exchange(rid, p.get("request", {}), p.get("wallTime"), p.get("type"))
        elif method == "Network.requestWillBeSentExtraInfo":
            self._extra_request.setdefault(rid, []).append(p.get("headers") or {})
        elif method == "Network.responseReceivedExtraInfo":
            self._extra_response.setdefault(rid, []).append(p)
        elif method == "Network.responseReceived":
            ex = self._current.get(rid)
            if ex is not None:
                ex.response = p.get("response") or {}
                ex.resource_type = p.get("type") or ex.resource_type
        elif method == "Network.loadingFinished":
            ex = self._current.pop(rid, None)
            if ex is not None and ex.response is not None:
                self._fetch_body(ex)
                ex.finished = True
                self.exchanges.append(ex)
        elif method == "Network.loadingFailed":
            ex = self._current.pop(rid, None)
            if ex is None:
                return
            if ex.response is not None:
                # Headers arrived, the body did not complete: keep what there is.
                ex.body = b""
                ex.body_error = p.get("errorText") or "loading failed"
                ex.truncated = "disconnect"
                ex.finished = True
                self.exchanges.append(ex)
            else:
                self.failed.append((ex.url, p.get("errorText") or "failed"))

    def _fetch_body(self, ex):
        left = self._max_page_bytes - self.body_bytes
        try:
            result = self._session.call("Network.getResponseBody", {"requestId": ex.request_id},
                                        session_id=self._target, deadline=self._deadline)
            data = result.get("body", "")
            body = base64.b64decode(data) if result.get("base64Encoded") else data.encode("utf-8")
        except CDPError as exc:
            body, ex.body_error = b"", str(exc)  # e.g. no body for a 204 or an opaque response
        except (DeadlineExceeded, WebSocketError) as exc:
            body, ex.body_error = b"", str(exc)
        if len(body) > left:
            body = body[: max(0, left)]
            ex.truncated = "length"
            self.truncated_count += 1
        ex.body = body
        self.body_bytes += len(body)

    def unfinished(self):
        """Requests still in flight (no loadingFinished/loadingFailed)."""
        return list(self._current.values())

    def pair_raw_headers(self):
        """Attach the ExtraInfo headers to the hops, in order per requestId.
        Called at the end, because ExtraInfo events may trail loadingFinished."""
        seen = {}
        for ex in self.exchanges:
            n = seen.get(ex.request_id, 0)
            seen[ex.request_id] = n + 1
            req = self._extra_request.get(ex.request_id, [])
            resp = self._extra_response.get(ex.request_id, [])
            if n < len(req):
                ex.raw_request_headers = req[n]
            if n < len(resp):
                ex.raw_response = resp[n]
