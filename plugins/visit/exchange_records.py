"""The WARC records of the recorded exchanges: response (or revisit) plus
request per hop, linked by WARC-Concurrent-To.

A payload already stored in the crawl (PayloadIndex, or earlier on this page)
is written as a `revisit` with the identical-payload-digest profile: the block
is the HTTP response head only, WARC-Payload-Digest that of the stored
payload. Empty and truncated payloads are always stored as responses (an empty
payload is not worth a reference, and a truncated one is not the payload).
"""

import datetime
import hashlib

import http_message
from warc_writer import REVISIT_PROFILE, new_record_id, sha256_label, warc_date


def _when(wall_time):
    try:
        return datetime.datetime.fromtimestamp(float(wall_time), datetime.timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.datetime.now(datetime.timezone.utc)


def write_exchange(writer, index, ex, snapshot_id):
    """Write one hop; returns "response" or "revisit"."""
    response = ex.response or {}
    raw = ex.raw_response or {}
    status = int(raw.get("statusCode") or response.get("status") or 0)
    reason = http_message.reason_phrase(status, raw.get("headersText"), response.get("statusText"))
    body = ex.body or b""
    head = http_message.response_head(status, reason, raw.get("headers") or response.get("headers"), len(body))
    request_block = http_message.request_message(ex.method, ex.url, ex.raw_request_headers or ex.request_headers,
                                                 ex.post_data)
    date = warc_date(_when(ex.wall_time))
    response_id = new_record_id()
    payload_hex = hashlib.sha256(body).hexdigest()
    common = [("WARC-Record-ID", response_id), ("WARC-Date", date), ("WARC-Target-URI", ex.url)]
    if response.get("remoteIPAddress"):
        common.append(("WARC-IP-Address", response["remoteIPAddress"].strip("[]")))

    original = index.lookup(payload_hex) if body and not ex.truncated else None
    if original is not None:
        kind = "revisit"
        fields = [*common, ("WARC-Profile", REVISIT_PROFILE),
                  ("WARC-Refers-To-Target-URI", original["uri"]), ("WARC-Refers-To-Date", original["date"])]
        if original.get("record_id"):
            fields.append(("WARC-Refers-To", original["record_id"]))
        fields += [("Content-Type", "application/http; msgtype=response"),
                   ("WARC-Block-Digest", sha256_label(head)),
                   ("WARC-Payload-Digest", "sha256:" + payload_hex)]
        writer.write("revisit", fields, head)
    else:
        kind = "response"
        block = head + body
        fields = [*common, ("Content-Type", "application/http; msgtype=response"),
                  ("WARC-Block-Digest", sha256_label(block)), ("WARC-Payload-Digest", "sha256:" + payload_hex)]
        if ex.truncated:
            fields.append(("WARC-Truncated", ex.truncated))
        warc_file = writer.write("response", fields, block)
        if body and not ex.truncated:
            index.stored(payload_hex, {"uri": ex.url, "date": date, "record_id": response_id,
                                       "warc": warc_file, "snapshot_id": snapshot_id})

    request_payload = ex.post_data or b""
    writer.write("request", [("WARC-Record-ID", new_record_id()), ("WARC-Date", date), ("WARC-Target-URI", ex.url),
                             ("WARC-Concurrent-To", response_id),
                             ("Content-Type", "application/http; msgtype=request"),
                             ("WARC-Block-Digest", sha256_label(request_block)),
                             ("WARC-Payload-Digest", sha256_label(request_payload))], request_block)
    return kind
