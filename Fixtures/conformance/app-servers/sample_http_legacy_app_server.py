#!/usr/bin/env python3
"""A sample legacy HTTP app server (`POST /fcm/send` with a server key) on plain `requests` that
follows the conformance runner's HTTP contract (docs/conformance.md, "The HTTP contract"), in two
manners:

  sample_http_legacy_app_server.py                 careful: passes `conformance run builtin-http`
  sample_http_legacy_app_server.py --break A,B,... careless in those ways only: retry-at-once,
      ignore-retry-after, retry-invalid, keep-unregistered, ignore-canonical, no-limits

Environment (set by the runner): FCM_HTTP_URL, FCM_SERVER_KEY. Each stdin line
{"send_to": TOKEN, "data": {...}, "id": ID} is sent as one JSON request to /fcm/send; one JSON line
per outcome goes to stdout, a log to stderr. A result's `registration_id` (canonical id) replaces
the token from then on; `NotRegistered` retires it; 5xx, 429 and `Unavailable` results are retried
with backoff from 1 s, or after `Retry-After`.
"""

from __future__ import annotations

import os

import requests

from http_sample import Attempt, Sender, log, parse_args

WAYS = ("retry-at-once", "ignore-retry-after", "retry-invalid", "keep-unregistered", "ignore-canonical", "no-limits")


def main() -> None:
    breaks = parse_args(__doc__.splitlines()[0], WAYS).breaks
    url = os.environ["FCM_HTTP_URL"] + "/fcm/send"
    session = requests.Session()
    session.headers.update({"Authorization": "key=" + os.environ["FCM_SERVER_KEY"],
                            "Content-Type": "application/json"})

    def attempt(token: str, data: dict) -> Attempt:
        response = session.post(url, json={"to": token, "data": data}, timeout=30)
        retry_after = response.headers.get("Retry-After")
        delay = float(retry_after) if retry_after and retry_after.isdigit() else None
        if response.status_code != 200:
            log(f"legacy send to {token[:12]}…: {response.status_code} {response.text[:200]}")
            return Attempt(response.status_code, retry_after=delay)
        result = response.json()["results"][0]
        if "error" in result:
            log(f"legacy send to {token[:12]}…: {result['error']}")
        return Attempt(200, error=result.get("error"), retry_after=delay, canonical=result.get("registration_id"))

    Sender(attempt, breaks).serve()


if __name__ == "__main__":
    main()
