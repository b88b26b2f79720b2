"""The emulator as the push service (docs/web-push.md): a web app server's Web Push library —
pywebpush (PyPI), unmodified — posts encrypted, VAPID-signed messages to a subscription's endpoint
(`/fcm/send/<token>`, `/wp/<token>`), by its own http URL and through proxy mode with the emulator's
CA; a simulated browser (`device --push-service emulator`) decrypts each one into a push event. Raw
requests drive every refusal of RFC 8030/8291/8292; the subscription survives kill -9 with its keys
and its waiting messages."""

from __future__ import annotations

import json
import re
import time
import urllib.parse

import pytest
from py_vapid import Vapid01, Vapid02
from pywebpush import WebPushException, WebPusher, webpush

from ccs_support import http_json
from ccs_support.fcm_http import raw

# py_vapid 1.9.2 passes cryptography a curve class where 43 wants an instance: a warning, nothing more.
pytestmark = pytest.mark.filterwarnings("ignore:Curve argument must be an instance")

APP = "https://app.example"
CONTACT = {"sub": "mailto:ops@app.example"}


def new_vapid(kind=Vapid02):
    v = kind()
    v.generate_keys()
    return v


def public_key(v) -> str:
    from cryptography.hazmat.primitives import serialization
    import base64
    point = v.public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(point).rstrip(b"=").decode()


def subscribe(srv, **body) -> dict:
    status, answer = http_json("POST", f"{srv.http_base}/emulator/v1/web-push/subscriptions", body)
    assert status == 201, (status, answer)
    return answer


def received(srv, token: str) -> list[dict]:
    status, body = http_json("GET", f"{srv.http_base}/emulator/v1/web-push/subscriptions/{urllib.parse.quote(token)}/messages")
    assert status == 200, (status, body)
    return body["messages"]


def browser(devices, srv, *extra: str):
    """A simulated browser subscribed with the emulator as its push service; (process, subscription)."""
    dev = devices(srv, APP, [], platform="web", extra=["--push-service", "emulator", *extra])
    registered = dev.expect("registered", timeout=30)
    dev.expect("connected", timeout=30)
    return dev, registered


def local_info(subscription: dict, srv) -> dict:
    """The subscription with its endpoint on this emulator's http port (same path)."""
    path = urllib.parse.urlparse(subscription["endpoint"]).path
    return {**subscription, "endpoint": f"{srv.http_base}{path}"}


@pytest.mark.parametrize("encoding", ["aes128gcm", "aesgcm"])
def test_pywebpush_by_the_subscriptions_own_url(start_server, devices, encoding):
    srv = start_server()
    dev, registered = browser(devices, srv, "--endpoint-form", "local")
    sub = registered["subscription"]
    assert sub["endpoint"] == f"{srv.http_base}/fcm/send/{registered['token']}", sub
    assert sub["expirationTime"] is None and set(sub["keys"]) == {"p256dh", "auth"}, sub
    # The drafts' aesgcm goes with the drafts' `Authorization: WebPush` + `Crypto-Key: p256ecdsa` (Vapid01).
    vapid = new_vapid(Vapid01 if encoding == "aesgcm" else Vapid02)
    notification = json.dumps({"notification": {"title": "Goal", "body": "1-0"}})
    response = webpush(sub, notification, vapid_private_key=vapid, vapid_claims=dict(CONTACT),
                       content_encoding=encoding, ttl=60)
    assert response.status_code == 201 and response.headers["Location"], (response.status_code, response.text)
    push = dev.expect("push", timeout=20)
    assert push["data"] == notification and push["notification"] == {"title": "Goal", "body": "1-0"}, push
    [listed] = received(srv, registered["token"])
    assert listed["data"] == notification and listed["content_encoding"] == encoding, listed
    assert listed["vapid_key"] == public_key(vapid) and listed["vapid_subject"] == CONTACT["sub"], listed


def test_pywebpush_through_the_proxy_with_an_application_server_key(start_server, devices, monkeypatch):
    srv = start_server(extra_args=["--proxy-port", "0"])
    vapid = new_vapid()
    dev, registered = browser(devices, srv, "--application-server-key", public_key(vapid))
    sub = registered["subscription"]
    assert sub["endpoint"].startswith("https://fcm.googleapis.com/fcm/send/"), sub
    # requests reads these at each request: the library itself is not touched.
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{srv.ready['proxy_port']}")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", srv.ca_cert)
    monkeypatch.setenv("NO_PROXY", "")
    response = webpush(sub, "through the proxy", vapid_private_key=vapid, vapid_claims=dict(CONTACT), ttl=30)
    assert response.status_code == 201, response.text
    assert dev.expect("push", timeout=20)["data"] == "through the proxy"
    with pytest.raises(WebPushException) as refused:
        webpush(sub, "another server", vapid_private_key=new_vapid(), vapid_claims=dict(CONTACT), ttl=30)
    assert refused.value.response.status_code == 403 and "applicationServerKey" in refused.value.response.text


def raw_push(sub: dict, vapid, data: bytes = b"x" * 10) -> tuple[dict, bytes]:
    """What pywebpush would post, built from its own parts (its encoder, py_vapid's signer), so that
    each refusal below changes one header or byte of a request that is otherwise accepted."""
    body = WebPusher(sub).encode(data, "aes128gcm")["body"]
    url = urllib.parse.urlparse(sub["endpoint"])
    claims = {**CONTACT, "aud": f"{url.scheme}://{url.netloc}", "exp": int(time.time()) + 3600}
    return {**vapid.sign(claims), "TTL": "5", "Content-Encoding": "aes128gcm"}, body


def test_every_refusal_from_raw_requests(start_server):
    srv = start_server()
    created = subscribe(srv, endpoint="local")
    token, sub = created["token"], created["subscription"]
    url = sub["endpoint"]
    vapid = new_vapid()
    headers, body = raw_push(sub, vapid)

    def post(h=None, b=None, to=url, drop=()):
        sent = {k: v for k, v in {**headers, **(h or {})}.items() if k.lower() not in drop}
        return raw("POST", to, body if b is None else b, sent)

    assert post()[0] == 201
    status, _, text = post(drop=("ttl",))
    assert status == 400 and "TTL" in text, (status, text)
    assert post({"Urgency": "now"})[0] == 400
    assert post({"Topic": "not a topic!"})[0] == 400
    assert post(to=f"{srv.http_base}/fcm/send/unknown-token")[0] == 404
    assert post(b=b"\0" * 4097)[0] == 413
    status, _, text = post(drop=("authorization",))
    assert status == 401 and "Authorization" in text, (status, text)
    # The same token with another signature (64 bytes, as ES256's r ‖ s).
    jwt = re.search(r"t=([^,\s]+)", headers["Authorization"]).group(1)
    forged = headers["Authorization"].replace(jwt, jwt.rsplit(".", 1)[0] + "." + "A" * 86)
    status, _, text = post({"Authorization": forged})
    assert status == 401 and "signature" in text, (status, text)
    tampered = bytearray(body)
    tampered[-1] ^= 1
    status, _, text = post(b=bytes(tampered))
    assert status == 400 and "does not decrypt" in text, (status, text)
    # Refusals are journaled with the reason, like every entry point's.
    status, journal = http_json("GET", f"{srv.http_base}/emulator/v1/messages?"
                                + urllib.parse.urlencode({"token": token, "status": "refused"}))
    assert status == 200 and journal["messages"][0]["api"] == "webpush", journal
    newest = journal["messages"][0]["message_id"]
    status, events = http_json("GET", f"{srv.http_base}/emulator/v1/messages/{urllib.parse.quote(newest, safe='')}")
    assert status == 200 and "does not decrypt" in events["events"][0]["detail"], events
    status, metrics = http_json("GET", f"{srv.http_base}/metrics")
    assert any('api="webpush"' in line and 'code="400"' in line and 'outcome="refused"' in line
               for line in str(metrics).splitlines()), metrics
    # A fault rule: 429 with Retry-After, once.
    status, rule = http_json("POST", f"{srv.http_base}/emulator/v1/faults",
                             {"id": "wp429", "action": "http_error", "status": 429, "retry_after": 9, "token": token, "times": 1})
    assert status == 201, rule
    status, answer_headers, _ = post()
    assert status == 429 and answer_headers.get("retry-after") == "9", (status, answer_headers)
    assert post()[0] == 201
    assert http_json("POST", f"{srv.http_base}/emulator/v1/web-push/subscriptions/{token}/expire")[0] == 200
    status, _, text = post()
    assert status == 410 and "expired" in text, (status, text)
    other = subscribe(srv, endpoint="local")
    assert http_json("POST", f"{srv.http_base}/emulator/v1/web-push/subscriptions/{other['token']}/unsubscribe")[0] == 200
    headers, body = raw_push(other["subscription"], vapid)
    assert post(to=other["subscription"]["endpoint"])[0] == 410


def subscribe_keys(srv, token: str) -> dict:
    status, body = http_json("GET", f"{srv.http_base}/emulator/v1/web-push/subscriptions/{urllib.parse.quote(token)}")
    assert status == 200, body
    return body["subscription"]


def test_offline_store_and_forward_ttl_and_topic(start_server, devices):
    srv = start_server()
    dev, registered = browser(devices, srv, "--endpoint-form", "local")
    sub = registered["subscription"]
    vapid = new_vapid()
    dev.send({"go": "offline"})
    dev.expect("disconnected", timeout=20)

    def push(text, ttl=60, **headers):
        return webpush(sub, text, vapid_private_key=vapid, vapid_claims=dict(CONTACT), headers=headers, ttl=ttl).status_code

    # TTL 0: only for a device that is online now (RFC 8030 §5.2).
    assert push("now or never", ttl=0) == 201
    # A newer message with the same Topic replaces the waiting one (RFC 8030 §5.4).
    assert push("1-0", Topic="score") == 201
    assert push("2-0", Topic="score") == 201
    assert push("kept") == 201
    dev.send({"go": "online"})
    got = [dev.expect("push", timeout=20)["data"] for _ in range(2)]
    assert sorted(got) == ["2-0", "kept"], got
    # What comes next is a new message: the replaced one and the TTL-0 one never arrive.
    assert push("marker") == 201
    assert dev.expect("push", timeout=20)["data"] == "marker"


def test_a_subscription_survives_kill_9_with_its_keys_and_waiting_messages(start_server, devices, tmp_path):
    srv = start_server(base=tmp_path / "wp")
    created = subscribe(srv, app=APP)
    token, sub = created["token"], created["subscription"]
    vapid = new_vapid()
    claims = {**CONTACT, "aud": "https://fcm.googleapis.com"}
    assert webpush(local_info(sub, srv), "waiting", vapid_private_key=vapid, vapid_claims=dict(claims), ttl=600).status_code == 201
    srv.kill()
    srv.start()
    assert subscribe_keys(srv, token) == sub
    dev = devices(srv, APP, [], platform="web", token=token)
    dev.expect("connected", timeout=30)
    assert dev.expect("push", timeout=20)["data"] == "waiting"
    assert webpush(local_info(sub, srv), "after", vapid_private_key=vapid, vapid_claims=dict(claims), ttl=60).status_code == 201
    assert dev.expect("push", timeout=20)["data"] == "after"


def test_the_https_port_and_the_wp_path(start_server, devices, monkeypatch):
    srv = start_server(extra_args=["--https-port", "0"])
    dev, registered = browser(devices, srv, "--endpoint-form", "wp")
    sub = registered["subscription"]
    assert sub["endpoint"] == f"https://fcm.googleapis.com/wp/{registered['token']}", sub
    # The development certificate names localhost; the VAPID audience stays the endpoint's origin.
    direct = {**sub, "endpoint": f"https://localhost:{srv.ready['https_port']}/wp/{registered['token']}"}
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", srv.ca_cert)
    vapid = new_vapid()
    claims = {**CONTACT, "aud": "https://fcm.googleapis.com"}
    assert webpush(direct, "over TLS", vapid_private_key=vapid, vapid_claims=claims, ttl=30).status_code == 201
    assert dev.expect("push", timeout=20)["data"] == "over TLS"
    # A token for the https port's own origin is not one for the subscription's endpoint.
    with pytest.raises(WebPushException) as refused:
        webpush(direct, "wrong audience", vapid_private_key=vapid, vapid_claims=dict(CONTACT), ttl=30)
    assert refused.value.response.status_code == 401 and "aud" in refused.value.response.text


def test_an_application_server_key_refuses_another_key_in_a_raw_request(start_server):
    srv = start_server()
    mine, theirs = new_vapid(), new_vapid()
    created = subscribe(srv, endpoint="local", application_server_key=public_key(mine))
    headers, body = raw_push(created["subscription"], mine)
    assert raw("POST", created["subscription"]["endpoint"], body, headers)[0] == 201
    headers, body = raw_push(created["subscription"], theirs)
    status, _, text = raw("POST", created["subscription"]["endpoint"], body, headers)
    assert status == 403 and "applicationServerKey" in text, (status, text)
