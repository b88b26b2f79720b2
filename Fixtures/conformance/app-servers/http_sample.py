"""What the two sample HTTP app servers share (docs/conformance.md, "The HTTP contract"): the loop
that reads the runner's send requests from stdin, FCM's limits checked before a send, the retry
policy, and the memory of dead and replaced tokens. Each API's own sending is in its sample:
sample_http_v1_app_server.py (firebase-admin) and sample_http_legacy_app_server.py (requests).

Each careless behaviour a `--break WAY` turns on is marked CARELESS with the rule it breaks.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional

MAX_PAYLOAD_BYTES = 4096                    # concept-options: data messages up to 4096 bytes
RESERVED_KEYS = {"from", "message_type"}    # http-server-ref: data keys FCM keeps for itself
RESERVED_PREFIXES = ("google", "gcm")
MAX_ATTEMPTS = 5
INITIAL_BACKOFF = 1.0                       # ErrorCode UNAVAILABLE: 1 s, then 2 s, 4 s, ...


def log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def outcome(request_id: str, what: str, **fields) -> None:
    """One JSON line per request on stdout (the contract allows it; the runner does not rely on it)."""
    print(json.dumps({"id": request_id, "outcome": what, **fields}), flush=True)


@dataclass
class Attempt:
    """What one HTTP attempt came to, in the sample's own terms."""
    status: int                       # HTTP status (200 for a legacy answer whose result holds an error)
    error: Optional[str] = None       # FCM's error code: UNAVAILABLE, NotRegistered, ...
    retry_after: Optional[float] = None
    canonical: Optional[str] = None   # legacy: the result's registration_id


RETRYABLE_ERRORS = {"UNAVAILABLE", "INTERNAL", "QUOTA_EXCEEDED", "Unavailable", "InternalServerError"}
UNREGISTERED_ERRORS = {"UNREGISTERED", "NotRegistered", "InvalidRegistration"}


def parse_args(description: str, ways: tuple[str, ...], via_proxy: bool = False) -> argparse.Namespace:
    """`--break WAY,...` as a set in `.breaks`; with via_proxy, `--via-proxy` too."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--break", dest="breaks", default="",
                        help="comma-separated careless ways: " + ", ".join(ways))
    if via_proxy:
        parser.add_argument("--via-proxy", action="store_true",
                            help="reach Google's hosts through HTTPS_PROXY (proxy mode) instead of FCM_HTTP_URL")
    args = parser.parse_args()
    args.breaks = {w for w in args.breaks.split(",") if w}
    unknown = args.breaks - set(ways)
    if unknown:
        parser.error(f"unknown --break way(s): {', '.join(sorted(unknown))}; known: {', '.join(ways)}")
    return args


def over_limits(data: dict) -> Optional[str]:
    """Why FCM would refuse this data payload, or None."""
    for key in data:
        if key in RESERVED_KEYS or key.startswith(RESERVED_PREFIXES):
            return f"reserved data key {key!r}"
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in data.items())
    if size > MAX_PAYLOAD_BYTES:
        return f"payload of {size} bytes, over {MAX_PAYLOAD_BYTES}"
    return None


class Sender:
    """Delivers the runner's requests through `attempt` (one HTTP request), carefully unless broken."""

    def __init__(self, attempt: Callable[[str, dict], Attempt], breaks: set[str]):
        self.attempt = attempt
        self.breaks = breaks
        self.dead: set[str] = set()            # tokens FCM called unregistered
        self.canonical: dict[str, str] = {}    # old token -> its canonical registration id

    def retryable(self, a: Attempt) -> bool:
        if a.status == 400 and "retry-invalid" in self.breaks:
            return True   # CARELESS (no-retry-invalid): a 400 cannot succeed unchanged
        return a.status >= 500 or a.status == 429 or a.error in RETRYABLE_ERRORS

    def delay(self, failures: int, a: Attempt) -> float:
        if "retry-at-once" in self.breaks:
            return 0.0    # CARELESS (retry-backoff): no backoff at all
        backoff = INITIAL_BACKOFF * 2 ** (failures - 1)
        if a.retry_after is not None and "ignore-retry-after" not in self.breaks:
            return max(a.retry_after, backoff)
        return backoff    # CARELESS with --break ignore-retry-after (retry-backoff): Retry-After unread

    def handle(self, request: dict) -> None:
        rid, token, data = request.get("id", "?"), request["send_to"], request.get("data", {})
        if "ignore-canonical" not in self.breaks:   # else CARELESS (use-canonical-id)
            token = self.canonical.get(token, token)
        if token in self.dead and "keep-unregistered" not in self.breaks:   # else CARELESS (drop-unregistered)
            outcome(rid, "dropped", reason="the token is unregistered")
            return
        why = over_limits(data)
        if why and "no-limits" not in self.breaks:   # else CARELESS (message-limits)
            outcome(rid, "refused", reason=why)
            return
        failures = 0
        while True:
            a = self.attempt(token, data)
            if a.canonical:
                self.canonical[request["send_to"]] = a.canonical
            if a.error in UNREGISTERED_ERRORS:
                self.dead.add(token)
            if a.status == 200 and a.error is None:
                outcome(rid, "sent", attempts=failures + 1)
                return
            failures += 1
            if not self.retryable(a) or failures >= MAX_ATTEMPTS:
                outcome(rid, "failed", status=a.status, error=a.error, attempts=failures)
                return
            wait = self.delay(failures, a)
            log(f"{rid}: {a.status} {a.error or ''}, retrying in {wait:.1f} s")
            time.sleep(wait)

    def serve(self) -> None:
        """Reads one request per line until stdin ends (the runner closes it when a scenario ends)."""
        for line in sys.stdin:
            if line.strip():
                self.handle(json.loads(line))
