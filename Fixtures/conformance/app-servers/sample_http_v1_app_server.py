#!/usr/bin/env python3
"""A sample HTTP v1 app server on firebase-admin that follows the conformance runner's HTTP contract
(docs/conformance.md, "The HTTP contract"), in two manners:

  sample_http_v1_app_server.py                 careful: passes `conformance run builtin-http`
  sample_http_v1_app_server.py --break A,B,... careless in those ways only: retry-at-once,
      ignore-retry-after, retry-invalid, keep-unregistered, no-limits, token-per-send, stale-token
  sample_http_v1_app_server.py --via-proxy     sends to https://fcm.googleapis.com as published,
      through HTTPS_PROXY (the emulator's proxy mode), trusting REQUESTS_CA_BUNDLE

Environment (set by the runner): FCM_HTTP_URL, GOOGLE_APPLICATION_CREDENTIALS (its token_uri points
at the emulator), FCM_PROJECT_ID; HTTPS_PROXY and REQUESTS_CA_BUNDLE with --via-proxy. Each stdin line {"send_to": TOKEN, "data": {...}, "id": ID} is
sent as one v1 message; one JSON line per outcome goes to stdout, a log to stderr.

firebase-admin is used as published. Two things are set through its internals, as
Tests/Integration/ccs_support/firebase_driver.py does: the base URL (`_MessagingService.FCM_URL`), and
its HTTP adapter, because firebase-admin retries 500 and 503 itself through urllib3, whose backoff
starts at 0 s: the first retry comes at once. The careful manner turns that off and retries itself;
`--break retry-at-once` keeps firebase-admin's own retrying.
"""

from __future__ import annotations

import os
import warnings

import firebase_admin
import requests
from firebase_admin import credentials, exceptions, messaging

from http_sample import Attempt, Sender, log, parse_args

WAYS = ("retry-at-once", "ignore-retry-after", "retry-invalid", "keep-unregistered", "no-limits",
        "token-per-send", "stale-token")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], WAYS, via_proxy=True)
    breaks = args.breaks
    # firebase-admin 7 warns that Message.token is deprecated; it is still the field v1 sends.
    warnings.filterwarnings("ignore", category=DeprecationWarning, message="Message.token")
    if not args.via_proxy:
        messaging._MessagingService.FCM_URL = os.environ["FCM_HTTP_URL"] + "/v1/projects/{0}/messages:send"
    cred = credentials.Certificate(os.environ["GOOGLE_APPLICATION_CREDENTIALS"])
    app = firebase_admin.initialize_app(cred, {"projectId": os.environ["FCM_PROJECT_ID"]})
    if "retry-at-once" not in breaks:
        # Retries are this app server's own (backoff from 1 s, Retry-After honoured).
        session = messaging._get_messaging_service(app)._client.session
        for prefix in ("http://", "https://", "https://fcm.googleapis.com"):
            session.mount(prefix, requests.adapters.HTTPAdapter(max_retries=0))
    google_cred = cred.get_credential()
    fetched = {"first": False}

    def attempt(token: str, data: dict) -> Attempt:
        if "token-per-send" in breaks:
            cred.get_access_token()   # CARELESS (reuse-access-token): a new OAuth2 token for every send
        try:
            messaging.send(messaging.Message(token=token, data=data), app=app)
            return Attempt(200)
        except exceptions.FirebaseError as e:
            response = e.http_response
            status = response.status_code if response is not None else 0
            retry_after = response.headers.get("Retry-After") if response is not None else None
            code = getattr(e, "code", None)
            fcm = type(e).__name__
            error = {"UnregisteredError": "UNREGISTERED", "QuotaExceededError": "QUOTA_EXCEEDED"}.get(fcm, str(code))
            log(f"v1 send to {token[:12]}…: {status} {fcm}: {e}")
            return Attempt(status, error=error, retry_after=float(retry_after) if retry_after else None)
        finally:
            if "stale-token" in breaks and not fetched["first"] and google_cred.token:
                fetched["first"] = True
                # CARELESS (refresh-access-token): the token is never fetched again, even after a 401.
                google_cred.refresh = lambda request: None

    Sender(attempt, breaks).serve()


if __name__ == "__main__":
    main()
