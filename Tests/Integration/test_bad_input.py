"""The bad-input matrix (docs/bad-input.md): every listener fed input nobody should send. Each row checks the
documented answer, the connection's fate, that a healthy app-server connection opened before it still works
after it, that nothing was stored that should not be, and that the server is alive. Each row of the doc's
table is one case here, and a test keeps the two in step."""

from __future__ import annotations

import json
import re
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from ccs_support import new_key, new_sender_id, register_device
from ccs_support.admin_api import http_json
from ccs_support.fcm_http import access_token, credentials_file, raw
from ccs_support.xmpp import SASL_NS, STREAM_NS, XmppConn, gcm_stanza, plain_payload, q, stream_header

DOC = Path(__file__).resolve().parents[2] / "docs" / "bad-input.md"
STREAMS_NS = "urn:ietf:params:xml:ns:xmpp-streams"


@dataclass
class Ctx:
    server: object
    sender: str
    key: str
    token: str          # a registered device of `sender`, offline: its queue shows what was stored
    device: dict        # its registration (device_id, device_secret)
    bearer: str

    def ccs(self) -> XmppConn:
        c = XmppConn(self.server.ccs_port, self.server.ca_cert)
        c.login(self.sender, self.key)
        return c

    def ccs_raw(self) -> XmppConn:
        return XmppConn(self.server.ccs_port, self.server.ca_cert)

    def device_conn(self, login: bool = True) -> XmppConn:
        c = XmppConn(self.server.device_port, self.server.ca_cert)
        if login:
            c.open_stream("devices.ccs-emulator")
            res = c.auth_plain(plain_payload("", self.device["device_id"], self.device["device_secret"]))
            assert res.tag == q(SASL_NS, "success"), res.raw
            c.open_stream("devices.ccs-emulator")
            c.bind("bad-input")
        return c

    def queued(self) -> int:
        status, dev = http_json("GET", f"{self.server.http_base}/emulator/v1/devices/{self.token}")
        assert status == 200
        return dev["queued"]

    def http(self, method: str, path: str, body=None, headers: dict | None = None):
        return raw(method, self.server.http_base + path, body, headers or {})


# -- checks ------------------------------------------------------------------------------------------

def stream_error(c: XmppConn, condition: str) -> None:
    """The next item (after a stream header, if the error came before one) is <stream:error><CONDITION/>."""
    item = c.next_item()
    if item.kind == "header":
        item = c.next_item()
    assert item.kind == "element" and item.tag == q(STREAM_NS, "error"), item.raw[:300]
    assert item.elem.find(q(STREAMS_NS, condition)) is not None, item.raw[:300]


def closed(c: XmppConn) -> None:
    c.wait_closed(timeout=15)


def kept(c: XmppConn) -> None:
    c.send('<iq type="get" id="still-there"><ping xmlns="urn:xmpp:ping"/></iq>')
    while True:
        item = c.next_element()
        if item.elem.get("id") == "still-there":
            assert item.elem.get("type") == "result", item.raw
            return


def nack(c: XmppConn, code: str, message_id: str) -> dict:
    payload, item = c.wait_gcm(message_id)
    assert payload["message_type"] == "nack" and payload["error"] == code, item.raw
    return payload


def stanza_error(c: XmppConn) -> None:
    item = c.next_element()
    assert item.elem.get("type") == "error" and "bad-request" in item.raw, item.raw[:300]


def status_is(answer, expected: int, contains: str = "") -> None:
    status, _, body = answer
    assert status == expected, (status, body[:300])
    assert contains in body, body[:300]


def sasl_failure(c: XmppConn, condition: str) -> None:
    item = c.next_element()
    assert item.tag == q(SASL_NS, "failure") and item.elem.find(q(SASL_NS, condition)) is not None, item.raw


def refused(answer) -> None:
    assert answer.tag == q(SASL_NS, "failure") and answer.elem.find(q(SASL_NS, "not-authorized")) is not None, answer.raw


def gcm(payload: str) -> str:
    return gcm_stanza(payload)


# -- the rows ------------------------------------------------------------------------------------------

def ccs_post(data, answer: Callable[[XmppConn], None], fate: Callable[[XmppConn], None]):
    def run(ctx: Ctx):
        c = ctx.ccs()
        c.send(data(ctx) if callable(data) else data)
        answer(c)
        fate(c)
    return run


def ccs_pre(data, answer, fate=closed, after_stream: bool = False):
    def run(ctx: Ctx):
        c = ctx.ccs_raw()
        if after_stream:
            c.open_stream()
        c.send(data)
        answer(c)
        fate(c)
    return run


def downstream(extra: str) -> Callable[[Ctx], str]:
    return lambda ctx: gcm('{"to":"%s",%s}' % (ctx.token, extra))


def apns_case(build: Callable[[bytes], bytes], status: int | None):
    """A raw frame to the APNs gateway: the error response with `status` then close (None: just closed)."""
    def run(ctx: Ctx):
        from ccs_support.apns import connect, issue_cert, read_until_closed, register_ios
        app = f"com.example.bad.{new_sender_id()}"
        cert = issue_cert(ctx.server.data_dir, app, Path(ctx.server.data_dir).parent / f"cert-{app}")
        device = register_ios(ctx.server.http_base, app)
        with connect(int(ctx.server.ready["apns_port"]), cert["combined"]) as sock:
            sock.sendall(build(bytes.fromhex(device["apns_token"])))
            answer = read_until_closed(sock)
        if status is None:
            assert answer == b"", answer
        else:
            assert answer[:2] == bytes([8, status]), answer
    return run


def apns_frame(items: bytes) -> bytes:
    return b"\x02" + len(items).to_bytes(4, "big") + items


def item(item_id: int, data: bytes) -> bytes:
    return bytes([item_id]) + len(data).to_bytes(2, "big") + data


def good_items(token: bytes, payload: bytes = b'{"aps":{"alert":"x"}}') -> bytes:
    return item(1, token) + item(2, payload) + item(3, (7).to_bytes(4, "big")) + item(4, b"\0\0\0\0") + item(5, b"\x0a")


def not_tls(port_of: Callable[[Ctx], int]):
    def run(ctx: Ctx):
        s = socket.create_connection(("127.0.0.1", port_of(ctx)), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        data = b""
        try:
            while chunk := s.recv(4096):
                data += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        assert not data.startswith(b"HTTP/"), "a TLS port answered plain HTTP"
    return run


def ccs_nothing_stored(data, answer):
    def run(ctx: Ctx):
        before = ctx.queued()
        ccs_post(data, answer, kept)(ctx)
        assert ctx.queued() == before, "a refused message was stored"
    return run


def device_upstream(payload: str, error: str):
    def run(ctx: Ctx):
        c = ctx.device_conn()
        c.send(gcm(payload))
        item = c.next_element()
        answer = json.loads(item.elem.find("{google:mobile:data}gcm").text)
        assert answer["message_type"] == "send_error" and answer["error"] == error, item.raw
        kept(c)
    return run


H_JSON = {"Content-Type": "application/json"}


def legacy(body, status: int, contains: str, ctype: str = "application/json", auth: bool = True):
    def run(ctx: Ctx):
        headers = {"Content-Type": ctype}
        if auth:
            headers["Authorization"] = f"key={ctx.key}"
        text = body(ctx) if callable(body) else body
        before = ctx.queued()
        status_is(ctx.http("POST", "/fcm/send", text, headers), status, contains)
        assert ctx.queued() == before
    return run


def v1(body, status: int, contains: str, bearer: bool = True):
    def run(ctx: Ctx):
        headers = dict(H_JSON)
        if bearer:
            headers["Authorization"] = f"Bearer {ctx.bearer}"
        text = body(ctx) if callable(body) else body
        before = ctx.queued()
        status_is(ctx.http("POST", f"/v1/projects/{ctx.sender}/messages:send", text, headers), status, contains)
        assert ctx.queued() == before
    return run


def simple_http(method: str, path, body, status: int, contains: str = "", headers: Callable[[Ctx], dict] | None = None):
    def run(ctx: Ctx):
        p = path(ctx) if callable(path) else path
        b = body(ctx) if callable(body) else body
        status_is(ctx.http(method, p, b, headers(ctx) if headers else dict(H_JSON)), status, contains)
    return run


def admin_nothing_registered(body: bytes, status: int, contains: str):
    def run(ctx: Ctx):
        before = len(http_json("GET", f"{ctx.server.http_base}/emulator/v1/devices")[1]["devices"])
        status_is(ctx.http("POST", "/emulator/v1/devices", body, dict(H_JSON)), status, contains)
        assert len(http_json("GET", f"{ctx.server.http_base}/emulator/v1/devices")[1]["devices"]) == before
    return run


def declared_length(path, headers: Callable[[Ctx], dict]):
    """A head that announces 10^12 bytes, then ten: 413 at once (not at the request deadline), and the
    connection closed after it."""
    def run(ctx: Ctx):
        p = path(ctx) if callable(path) else path
        head = f"POST {p} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000000000\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers(ctx).items()) + "\r\n"
        with socket.create_connection(("127.0.0.1", ctx.server.http_port), timeout=5) as sock:
            sock.sendall(head.encode() + b"0123456789")
            received = b""
            while True:  # until the server closes its side: a timeout here fails the case
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        assert received.startswith(b"HTTP/1.1 413"), received[:200]
    return run


def key_headers(ctx: Ctx) -> dict:
    return {"Authorization": f"key={ctx.key}", "Content-Type": "application/json", "project_id": ctx.sender}


HEADER = stream_header()
CASES: list[tuple[str, Callable[[Ctx], None]]] = [
    # CCS, before authentication
    ("ccs-pre-not-xml", ccs_pre("GET / HTTP/1.1\r\nHost: x\r\n\r\n", lambda c: stream_error(c, "invalid-xml"))),
    ("ccs-pre-doctype", ccs_pre("<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'b'>]>" + HEADER,
                                lambda c: stream_error(c, "restricted-xml"))),
    ("ccs-pre-comment", ccs_pre("<!-- hello -->", lambda c: stream_error(c, "restricted-xml"), after_stream=True)),
    ("ccs-pre-processing-instruction", ccs_pre("<?php echo 1; ?>", lambda c: stream_error(c, "restricted-xml"), after_stream=True)),
    ("ccs-pre-huge-attribute", ccs_pre("<stream:stream to='gcm.googleapis.com' x='" + "a" * 20000 + "' version='1.0' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>",
                                       lambda c: stream_error(c, "policy-violation"))),
    ("ccs-pre-wrong-stream-namespace", ccs_pre("<stream:stream to='gcm.googleapis.com' version='1.0' xmlns='jabber:client' xmlns:stream='urn:wrong'>",
                                               lambda c: stream_error(c, "invalid-namespace"))),
    ("ccs-pre-invalid-utf8", ccs_pre(HEADER.encode() + b"<a>\xff\xfe</a>", lambda c: stream_error(c, "invalid-xml"))),
    ("ccs-pre-stanza-before-auth", ccs_pre('<iq type="get" id="x"><ping xmlns="urn:xmpp:ping"/></iq>',
                                           lambda c: stream_error(c, "not-authorized"), after_stream=True)),
    ("ccs-pre-unknown-mechanism", ccs_pre('<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="DIGEST-MD5">x</auth>',
                                          lambda c: sasl_failure(c, "invalid-mechanism"), after_stream=True)),
    ("ccs-pre-bad-base64", ccs_pre('<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">!!!notbase64</auth>',
                                   lambda c: sasl_failure(c, "malformed-request"), after_stream=True)),
    ("ccs-pre-oversized-auth", ccs_pre('<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">' + "A" * 10000 + "</auth>",
                                       lambda c: stream_error(c, "policy-violation"), after_stream=True)),
    ("ccs-pre-deep-nesting", ccs_pre("<a>" * 30, lambda c: stream_error(c, "policy-violation"), after_stream=True)),
    ("ccs-not-tls", not_tls(lambda ctx: ctx.server.ccs_port)),
    # CCS, after authentication
    ("ccs-mismatched-tag", ccs_post(gcm("{}").replace("</gcm>", "</wrong>"), lambda c: stream_error(c, "invalid-xml"), closed)),
    ("ccs-invalid-utf8", ccs_post(b'<message><gcm xmlns="google:mobile:data">{"to":"\xff\xfe","message_id":"u8"}</gcm></message>',
                                  lambda c: stream_error(c, "invalid-xml"), closed)),
    ("ccs-oversized-stanza", ccs_post(downstream('"message_id":"big","data":{"a":"%s"}' % ("x" * 70000)),
                                      lambda c: stream_error(c, "policy-violation"), closed)),
    ("ccs-deep-nesting", ccs_post("<message>" + "<a>" * 40 + "</a>" * 40 + "</message>",
                                  lambda c: stream_error(c, "policy-violation"), closed)),
    ("ccs-too-many-elements", ccs_post("<message>" + "<a/>" * 5000 + "</message>", lambda c: stream_error(c, "policy-violation"), closed)),
    ("ccs-unknown-namespace", ccs_nothing_stored('<message><gcm xmlns="urn:other">{"to":"x","message_id":"u"}</gcm></message>', lambda c: None)),
    ("ccs-unknown-stanza", ccs_nothing_stored("<foo><bar/></foo>", lambda c: None)),
    ("ccs-json-not-json", ccs_nothing_stored(gcm("not json at all"), stanza_error)),
    ("ccs-json-not-object", ccs_nothing_stored(gcm("[1,2]"), stanza_error)),
    ("ccs-json-huge-number", ccs_nothing_stored(downstream('"message_id":"h1","time_to_live":1e400,"data":{}'), stanza_error)),
    ("ccs-json-deep-nesting", ccs_nothing_stored(downstream('"message_id":"dj","data":%s' % ("[" * 200 + "]" * 200)), stanza_error)),
    ("ccs-json-wrong-type", ccs_nothing_stored(downstream('"message_id":"wt","data":"a string"'), lambda c: nack(c, "INVALID_JSON", "wt"))),
    ("ccs-json-ttl-out-of-range", ccs_nothing_stored(downstream('"message_id":"tr","time_to_live":99999999999,"data":{}'),
                                                     lambda c: nack(c, "INVALID_JSON", "tr"))),
    ("ccs-json-reserved-data-key", ccs_nothing_stored(downstream('"message_id":"rk","data":{"from":"x"}'), lambda c: nack(c, "INVALID_JSON", "rk"))),
    ("ccs-json-message-too-big", ccs_nothing_stored(downstream('"message_id":"tb","data":{"a":"%s"}' % ("x" * 5000)),
                                                    lambda c: nack(c, "INVALID_JSON", "tb"))),
    ("ccs-json-duplicate-keys", ccs_nothing_stored(lambda ctx: gcm('{"to":"%s","to":"not-a-token","message_id":"dk","data":{}}' % ctx.token),
                                                   lambda c: nack(c, "INVALID_JSON", "dk"))),
    ("ccs-json-duplicate-message-id", ccs_nothing_stored(lambda ctx: gcm('{"to":"%s","message_id":"d1","message_id":"d2","data":{}}' % ctx.token),
                                                         stanza_error)),
    ("ccs-json-5mb-string", ccs_post(downstream('"message_id":"5m","data":{"a":"%s"}' % ("x" * (5 << 20))),
                                     lambda c: stream_error(c, "policy-violation"), closed)),
    ("ccs-bad-ack", ccs_nothing_stored(gcm('{"to":"x","message_type":"ack"}'), lambda c: c.wait_gcm(None))),
    # The device channel
    ("device-bad-credentials", lambda ctx: (lambda c: (c.open_stream("devices.ccs-emulator"),
                                                       refused(c.auth_plain(plain_payload("", "0000000000000000", "wrong"))),
                                                       closed(c)))(ctx.device_conn(login=False))),
    ("device-invalid-xml", lambda ctx: (lambda c: (c.send("<message><gcm></wrong></message>"),
                                                   stream_error(c, "invalid-xml"), closed(c)))(ctx.device_conn())),
    ("device-upstream-no-message-id", device_upstream('{"to":"1@gcm.googleapis.com","data":{}}', "MISSING_MESSAGE_ID")),
    ("device-upstream-bad-ttl", device_upstream('{"to":"1@gcm.googleapis.com","message_id":"x","time_to_live":"soon","data":{}}', "INVALID_TTL")),
    ("device-ack-unknown-id", lambda ctx: (lambda c: (c.send('<message id="no-such-id"><gcm xmlns="google:mobile:data">{"message_type":"ack","message_id":"no-such-id"}</gcm></message>'),
                                                      kept(c)))(ctx.device_conn())),
    ("device-not-tls", not_tls(lambda ctx: ctx.server.device_port)),
    # FCM HTTP: legacy
    ("legacy-malformed-json", legacy("{bad", 400, "JSON_PARSING_ERROR")),
    ("legacy-huge-number", legacy(lambda ctx: '{"to":"%s","time_to_live":1e400,"data":{}}' % ctx.token, 400, "Number out of range")),
    ("legacy-wrong-content-type", legacy(lambda ctx: json.dumps({"to": ctx.token, "data": {}}), 400, "application/json", ctype="text/xml")),
    ("legacy-duplicate-keys", legacy(lambda ctx: '{"to":"%s","to":"%s","data":{}}' % (ctx.token, ctx.token), 400, "Duplicate field")),
    ("legacy-invalid-utf8", legacy(lambda ctx: b'{"to":"%s","data":{"a":"\xff\xfe"}}' % ctx.token.encode(), 400, "UTF-8")),
    ("legacy-huge-content-length", declared_length("/fcm/send", lambda ctx: {"Authorization": f"key={ctx.key}", "Content-Type": "application/json"})),
    ("legacy-too-many-tokens", legacy(json.dumps({"registration_ids": ["t"] * 1001, "data": {}}), 400, "exceeds maximum allowed (1000)")),
    ("legacy-no-authorization", legacy(lambda ctx: json.dumps({"to": ctx.token}), 401, "Unauthorized", auth=False)),
    ("legacy-body-over-1mib", legacy("x" * (2 << 20), 413, "")),
    ("legacy-data-not-object", legacy(lambda ctx: json.dumps({"to": ctx.token, "data": [1]}), 400, "")),
    # FCM HTTP: v1
    ("v1-malformed-json", v1("{bad", 400, "INVALID_ARGUMENT")),
    ("v1-data-not-string", v1(lambda ctx: json.dumps({"message": {"token": ctx.token, "data": {"n": 1}}}), 400, "message.data")),
    ("v1-bad-ttl-duration", v1(lambda ctx: json.dumps({"message": {"token": ctx.token, "android": {"ttl": "soon"}}}), 400, "message.android.ttl")),
    ("v1-unknown-field", v1(lambda ctx: json.dumps({"message": {"token": ctx.token, "colour": "red"}}), 400, "colour")),
    ("v1-no-bearer", v1(lambda ctx: json.dumps({"message": {"token": ctx.token}}), 401, "UNAUTHENTICATED", bearer=False)),
    ("v1-body-over-1mib", v1("x" * (2 << 20), 413, "")),
    ("v1-duplicate-keys", v1(lambda ctx: '{"message":{"token":"%s","token":"%s"}}' % (ctx.token, ctx.token), 400, "Duplicate field")),
    ("v1-invalid-utf8", v1(lambda ctx: b'{"message":{"token":"%s","data":{"a":"\xff"}}}' % ctx.token.encode(), 400, "UTF-8")),
    ("v1-huge-content-length", declared_length(lambda ctx: f"/v1/projects/{ctx.sender}/messages:send",
                                               lambda ctx: {"Authorization": f"Bearer {ctx.bearer}", "Content-Type": "application/json"})),
    # FCM HTTP: Instance ID and device groups
    ("iid-malformed-json", simple_http("POST", "/iid/v1:batchAdd", "{bad", 400, "INVALID_ARGUMENT", key_headers)),
    ("iid-too-many-tokens", simple_http("POST", "/iid/v1:batchAdd", json.dumps({"to": "/topics/a", "registration_tokens": ["t"] * 1001}),
                                        400, "1 to 1000 tokens", key_headers)),
    ("groups-malformed-json", simple_http("POST", "/fcm/notification", "{bad", 400, "must be a JSON object", key_headers)),
    ("groups-unknown-operation", simple_http("POST", "/fcm/notification", lambda ctx: json.dumps(
        {"operation": "explode", "notification_key_name": "g", "registration_ids": [ctx.token]}), 400, "is not", key_headers)),
    # The admin API
    ("admin-not-json", simple_http("POST", "/emulator/v1/devices", "nope", 400, "INVALID_ARGUMENT")),
    ("admin-wrong-types", simple_http("POST", "/emulator/v1/devices", json.dumps({"app": "a", "senders": 5}), 400, "senders")),
    ("admin-state-not-bool", simple_http("POST", lambda ctx: f"/emulator/v1/devices/{ctx.token}/state",
                                         json.dumps({"foreground": "yes"}), 400, "true or false")),
    ("admin-fault-out-of-range", simple_http("POST", "/emulator/v1/faults", json.dumps({"action": "delay_ack", "delay_ms": 10 ** 15}), 400, "delay_ms")),
    ("admin-body-over-1mib", simple_http("POST", "/emulator/v1/devices", "x" * (2 << 20), 413)),
    ("admin-invalid-utf8", admin_nothing_registered(b'{"app":"bad\xff\xfeapp","senders":["1"]}', 400, "UTF-8")),
    ("admin-duplicate-keys", admin_nothing_registered(b'{"app":"first","app":"second","senders":["1"]}', 400, "Duplicate field")),
    ("admin-huge-content-length", declared_length("/emulator/v1/devices", lambda ctx: dict(H_JSON))),
    ("admin-not-json-content-type", simple_http("POST", "/emulator/v1/devices", json.dumps({"app": "a", "senders": ["1"]}), 415,
                                                "application/json", lambda ctx: {"Content-Type": "text/plain"})),
    ("admin-foreign-host", simple_http("GET", "/emulator/v1/info", None, 403, "--public-host", lambda ctx: {"Host": "rebind.attacker.example"})),
    ("admin-cross-origin", simple_http("POST", "/emulator/v1/reset", None, 403, "another origin",
                                       lambda ctx: {"Origin": "https://attacker.example"})),
    ("admin-unknown-route", simple_http("GET", "/emulator/v1/nothing-here", None, 404)),
    # APNs
    ("apns-zero-length-token", apns_case(lambda t: apns_frame(good_items(b"")), 2)),
    ("apns-payload-too-big", apns_case(lambda t: apns_frame(good_items(t, b'{"aps":{"alert":"' + b"x" * 3000 + b'"}}')), 7)),
    ("apns-payload-not-json", apns_case(lambda t: apns_frame(good_items(t, b"not json")), 4)),
    ("apns-unknown-command", apns_case(lambda t: b"\x09" + b"\0" * 40, None)),
    ("apns-frame-too-long", apns_case(lambda t: b"\x02" + (10 ** 8).to_bytes(4, "big"), 128)),
    ("apns-not-tls", not_tls(lambda ctx: int(ctx.server.ready["apns_port"]))),
]


@pytest.fixture(scope="module")
def ctx(server, tmp_path_factory) -> Ctx:
    sender, key = new_sender_id(), new_key()
    device = register_device(server.http_base, "com.example.badinput", [sender])
    creds = tmp_path_factory.mktemp("creds") / "sa.json"
    credentials_file(server, sender, creds)
    # The sender's key is known from its first CCS login, so legacy requests with it act for it.
    c = XmppConn(server.ccs_port, server.ca_cert)
    c.login(sender, key)
    c.close()
    return Ctx(server, sender, key, device["token"], device, access_token(creds))


@pytest.fixture(scope="module")
def canary(server, ctx):
    """An app-server connection opened before any bad input; it must keep working through all of them."""
    c = XmppConn(server.ccs_port, server.ca_cert)
    c.login(new_sender_id(), new_key())
    yield c
    c.close()


@pytest.mark.parametrize("case_id,run", CASES, ids=[c[0] for c in CASES])
def test_bad_input(server, ctx, canary, case_id, run):
    run(ctx)
    assert server.alive, f"the server died on {case_id}"
    canary.send('<iq type="get" id="canary"><ping xmlns="urn:xmpp:ping"/></iq>')
    pong = canary.next_element()
    assert pong.elem.get("id") == "canary" and pong.elem.get("type") == "result", pong.raw


def test_the_doc_table_and_the_cases_agree():
    rows = re.findall(r"^\| `([a-z0-9-]+)` \|", DOC.read_text(), re.M)
    assert len(rows) >= 50
    assert rows == [c[0] for c in CASES], set(rows) ^ {c[0] for c in CASES}
