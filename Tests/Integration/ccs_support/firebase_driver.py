"""Runs firebase-admin (unmodified, from PyPI) against the emulator: python firebase_driver.py JOB.json.

JOB: {"credentials": PATH, "fcm_base": "http://127.0.0.1:PORT" or null, "ops": [OP, …]}. The only redirection
is the one firebase-admin's own source offers: the class attribute
`messaging._MessagingService.FCM_URL`, set before the app's messaging service is created; the
service-account file's `token_uri` (written by `ccs-emulator credentials`) sends google-auth to the
emulator's /token. With "fcm_base": null nothing is redirected in code: proxy mode (HTTPS_PROXY and
the CA in REQUESTS_CA_BUNDLE / SSL_CERT_FILE, set by the caller) takes the unmodified SDK there.

OP: {"op": "send", "message": MSG, "dry_run": bool} or {"op": "send_each", "messages": [MSG…], "dry_run": bool}
or {"op": "send_each_async", …} (the same through firebase-admin's httpx client, which offers HTTP/2)
or {"op": "send_multicast" | "send_multicast_async", "tokens": [...], "message": MSG without a target, "dry_run": bool}
or {"op": "subscribe" | "unsubscribe", "tokens": [...], "topic": T} (the v1 registrations API on
fcm.googleapis.com: proxy mode only, its URL is fixed when the service is made)
or {"op": "subscribe_legacy" | "unsubscribe_legacy", "tokens": [...], "topic": T} (the Instance ID API, whose
base `messaging._MessagingService.IID_URL` is set to the emulator's HTTP port too).
MSG: {"token" | "topic" | "condition", "data", "notification": {"title", "body", "image"}, "android": {"ttl", "priority",
"collapse_key", "notification": {AndroidNotification kwargs}}, "apns": {"headers", "payload": {"aps": {Aps kwargs},
custom keys…}, "fcm_options": {"image"}}, "webpush": {"headers", "data", "notification": {…}, "fcm_options": {"link"}}}.
Prints one JSON line: {"results": [RESULT…]}, RESULT {"name": …} or {"error": CLASS, "code": …, "message": …};
send_each gives {"responses": [RESULT…], "success_count", "failure_count"}.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import sys

import firebase_admin
from firebase_admin import credentials, messaging


def build(spec: dict) -> messaging.Message:
    notification = None
    if "notification" in spec:
        notification = messaging.Notification(**spec["notification"])
    android = None
    if "android" in spec:
        a = dict(spec["android"])
        if "ttl" in a:
            a["ttl"] = datetime.timedelta(seconds=a["ttl"])
        if "notification" in a:
            a["notification"] = messaging.AndroidNotification(**a["notification"])
        android = messaging.AndroidConfig(**a)
    apns = None
    if "apns" in spec:
        a = spec["apns"]
        payload = None
        if "payload" in a:
            custom = {k: v for k, v in a["payload"].items() if k != "aps"}
            aps = dict(a["payload"].get("aps", {}))
            if isinstance(aps.get("alert"), dict):
                aps["alert"] = messaging.ApsAlert(**aps["alert"])
            payload = messaging.APNSPayload(aps=messaging.Aps(**aps), **custom)
        options = messaging.APNSFCMOptions(**a["fcm_options"]) if "fcm_options" in a else None
        apns = messaging.APNSConfig(headers=a.get("headers"), payload=payload, fcm_options=options)
    webpush = None
    if "webpush" in spec:
        w = spec["webpush"]
        webpush = messaging.WebpushConfig(
            headers=w.get("headers"), data=w.get("data"),
            notification=messaging.WebpushNotification(**w["notification"]) if "notification" in w else None,
            fcm_options=messaging.WebpushFCMOptions(**w["fcm_options"]) if "fcm_options" in w else None)
    return messaging.Message(token=spec.get("token"), topic=spec.get("topic"), condition=spec.get("condition"),
                             data=spec.get("data"), notification=notification, android=android, apns=apns,
                             webpush=webpush)


def describe(error: Exception) -> dict:
    return {"error": type(error).__name__, "code": getattr(error, "code", None), "message": str(error)}


def main() -> None:
    job = json.load(open(sys.argv[1]))
    if job.get("fcm_base"):  # None: proxy mode, nothing redirected in code
        messaging._MessagingService.FCM_URL = job["fcm_base"] + "/v1/projects/{0}/messages:send"
        # The Instance ID API's base, for the topic calls that use it (subscribe_to_topic_legacy).
        messaging._MessagingService.IID_URL = job["fcm_base"]
    app = firebase_admin.initialize_app(credentials.Certificate(job["credentials"]), name="emulator-test")
    results = []
    # One event loop for the job: firebase-admin keeps its httpx client (and its pooled connections,
    # bound to the loop that opened them) for the app's lifetime.
    loop = asyncio.new_event_loop()
    try:
        for op in job["ops"]:
            dry_run = bool(op.get("dry_run", False))
            if op["op"] == "send":
                try:
                    results.append({"name": messaging.send(build(op["message"]), dry_run=dry_run, app=app)})
                except Exception as e:  # the test asserts on the class firebase-admin raised
                    results.append(describe(e))
            elif op["op"] in ("send_each", "send_each_async", "send_multicast", "send_multicast_async"):
                if op["op"] == "send_each":
                    batch = messaging.send_each([build(m) for m in op["messages"]], dry_run=dry_run, app=app)
                elif op["op"] == "send_each_async":
                    batch = loop.run_until_complete(messaging.send_each_async(
                        [build(m) for m in op["messages"]], dry_run=dry_run, app=app))
                else:
                    one = build(op["message"])
                    multicast = messaging.MulticastMessage(
                        tokens=op["tokens"], data=one.data, notification=one.notification, android=one.android,
                        apns=one.apns, webpush=one.webpush)
                    if op["op"] == "send_multicast":
                        batch = messaging.send_each_for_multicast(multicast, dry_run=dry_run, app=app)
                    else:
                        batch = loop.run_until_complete(messaging.send_each_for_multicast_async(
                            multicast, dry_run=dry_run, app=app))
                results.append({
                    "success_count": batch.success_count, "failure_count": batch.failure_count,
                    "responses": [{"name": r.message_id} if r.success else describe(r.exception) for r in batch.responses],
                })
            elif op["op"] in ("subscribe", "unsubscribe", "subscribe_legacy", "unsubscribe_legacy"):
                call = {"subscribe": messaging.subscribe_to_topic, "unsubscribe": messaging.unsubscribe_from_topic,
                        "subscribe_legacy": messaging.subscribe_to_topic_legacy,
                        "unsubscribe_legacy": messaging.unsubscribe_from_topic_legacy}[op["op"]]
                r = call(op["tokens"], op["topic"], app=app)
                results.append({"success_count": r.success_count, "failure_count": r.failure_count,
                                "errors": [{"index": e.index, "reason": e.reason} for e in r.errors]})
            else:
                raise ValueError(f"unknown op {op['op']!r}")
    finally:
        firebase_admin.delete_app(app)
        loop.close()
    print(json.dumps({"results": results}), flush=True)


if __name__ == "__main__":
    main()
