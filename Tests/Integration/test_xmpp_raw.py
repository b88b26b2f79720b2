"""The CCS app-server endpoint over real TLS: stream, SASL PLAIN, bind/session/ping/roster,
downstream ACK/NACK and stanza errors (spec §1–§3, §9). Byte-level checks use the raw client in
ccs_support/xmpp.py; the last test drives slixmpp, a real XMPP client, through a full round trip.
Conversations that read better as transcripts (features, bind, ping/roster/presence, the ACK's shape,
BAD_REGISTRATION, the missing-message_id stanza error, …) are in Fixtures/conformance/transcripts/
(test_transcripts.py); what needs computation stays here.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from ccs_support import new_key, new_sender_id, register_device
from ccs_support.xmpp import (
    BIND_NS, CLIENT_NS, GCM_NS, SASL_NS, SESSION_NS, STANZAS_NS, STREAM_NS, plain_payload, q,
)

HEX16 = re.compile(r"^[0-9A-F]{16}$")


def login(xmpp, sender, key, **kw):
    c = xmpp()
    c.login(sender, key, **kw)
    return c


# ---- stream header and features ------------------------------------------------------------------

@pytest.mark.parametrize("to", ["gcm.googleapis.com", "fcm-xmpp.googleapis.com",
                                "FCM XMPP Client Connection Server"])
def test_stream_header_echoes_to_with_hex_id(xmpp, to):
    c = xmpp()
    header, _ = c.open_stream(to)
    a = header.attrs
    assert a.get("from") == to, header.raw
    assert HEX16.match(a.get("id", "")), f"stream id is not 16 upper-case hex chars: {header.raw}"
    assert a.get("xmlns") == CLIENT_NS, f"default namespace must be jabber:client: {header.raw}"
    assert a.get("xmlns:stream") == STREAM_NS, header.raw
    assert a.get("version") == "1.0", header.raw


def test_stream_ids_differ_between_connections(xmpp):
    ids = set()
    for _ in range(3):
        header, _ = xmpp().open_stream()
        ids.add(header.attrs.get("id"))
    assert len(ids) == 3, ids


def test_xml_declaration_single_quotes_and_newlines_accepted(xmpp):
    """go-xmpp: <?xml version='1.0'?> first, then a multi-line header with single quotes."""
    c = xmpp()
    c.send("<?xml version='1.0'?>")
    c.send(f"<stream:stream to='gcm.googleapis.com' xmlns='{CLIENT_NS}'\n xmlns:stream='{STREAM_NS}' version='1.0'>\n")
    header = c.next_item()
    assert header.kind == "header", header
    assert header.attrs.get("from") == "gcm.googleapis.com"
    feats = c.next_element()
    assert feats.tag == q(STREAM_NS, "features"), feats


# ---- SASL ----------------------------------------------------------------------------------------

PLAIN_SHAPES = {
    "smack4_php": lambda s, k: plain_payload("", f"{s}@gcm.googleapis.com", k),
    "smack3": lambda s, k: plain_payload(f"{s}@gcm.googleapis.com", f"{s}@gcm.googleapis.com", k),
    "goxmpp_sleekxmpp": lambda s, k: plain_payload("", s, k),
    "xmpppy": lambda s, k: plain_payload(f"{s}@gcm.googleapis.com", s, k),
}


@pytest.mark.parametrize("shape", sorted(PLAIN_SHAPES))
def test_plain_payload_shapes_accepted(xmpp, shape):
    sender, key = new_sender_id(), new_key()
    c = xmpp()
    c.open_stream()
    res = c.auth_plain(PLAIN_SHAPES[shape](sender, key))
    assert res.tag == q(SASL_NS, "success"), res.raw
    # The stream restarts and the bound JID carries the sender ID from the payload.
    header, feats = c.open_stream()
    assert HEX16.match(header.attrs.get("id", "")), header.raw
    assert feats.elem.find(q(BIND_NS, "bind")) is not None, feats.raw
    assert feats.elem.find(q(SESSION_NS, "session")) is not None, feats.raw
    assert feats.elem.find(q(SASL_NS, "mechanisms")) is None, feats.raw
    bound = c.bind()
    jid = bound.elem.find(f"{q(BIND_NS, 'bind')}/{q(BIND_NS, 'jid')}").text
    assert re.fullmatch(rf"{sender}@gcm\.googleapis\.com/.+", jid), jid


def expect_not_authorized_and_close(c, res):
    assert res.tag == q(SASL_NS, "failure"), res.raw
    assert res.elem.find(q(SASL_NS, "not-authorized")) is not None, res.raw
    rest = c.wait_closed(15)
    assert "</stream:stream>" in c.buf + rest or any(i.kind == "close" for i in c.items), \
        f"no stream close after the failure: {c.received[-500:]!r}"


@pytest.mark.parametrize("who,password", [
    ("notdigits@gcm.googleapis.com", "some-key"),
    ("12ab34@gcm.googleapis.com", "some-key"),
    ("{sender}@gcm.googleapis.com", ""),
])
def test_bad_credentials_not_authorized_then_closed(xmpp, who, password):
    c = xmpp()
    c.open_stream()
    res = c.auth_plain(plain_payload("", who.format(sender=new_sender_id()), password))
    expect_not_authorized_and_close(c, res)


def test_strict_auth_accepts_only_configured_pairs(start_server, xmpp, tmp_path):
    cfg = tmp_path / "senders.json"
    cfg.write_text(json.dumps({"senders": [{"sender_id": "123", "server_key": "k"}]}))
    srv = start_server(auth="strict", config=cfg)

    ok = xmpp(srv)
    assert ok.login("123", "k")

    for sender, key in [("123", "wrong"), ("456", "k"), ("123", "")]:
        c = xmpp(srv)
        c.open_stream()
        expect_not_authorized_and_close(c, c.auth_plain(plain_payload("", f"{sender}@gcm.googleapis.com", key)))


def test_unauthenticated_connection_closed_after_timeout(start_server, xmpp):
    """A client that opens a stream and never authenticates is disconnected after --auth-timeout,
    with a connection-timeout stream error; one that authenticated in time is not."""
    srv = start_server(extra_args=["--auth-timeout", "2"])
    idle = xmpp(srv)
    idle.open_stream()
    active = xmpp(srv)
    active.login(new_sender_id(), new_key(), session=False)
    idle.wait_closed(20)
    assert '<connection-timeout xmlns="urn:ietf:params:xml:ns:xmpp-streams"/>' in idle.received, idle.received[-500:]
    active.send('<iq type="get" id="still-here"><ping xmlns="urn:xmpp:ping"/></iq>')
    active.read_until('id="still-here"', 10)


# ---- after auth: bind, session, ping, roster, presence, unknown iq -------------------------------

# ---- downstream: ACK -----------------------------------------------------------------------------

def assert_compact_ack(payload, item, token, message_id):
    assert payload.get("message_type") == "ack", item.raw
    assert payload.get("from") == token and payload.get("message_id") == message_id, item.raw
    assert item.raw.startswith(f'<message><gcm xmlns="{GCM_NS}">'), f"ACK must be a typeless, compact <message>: {item.raw}"
    assert item.raw.endswith("</gcm></message>"), item.raw
    assert item.elem.attrib == {}, f"ACK <message> must carry no attributes: {item.raw}"


@pytest.mark.parametrize("variant", ["escaped_quotes", "newline_padded", "smack_attrs", "no_id_attr", "empty_id"])
def test_downstream_wire_variants_acked(xmpp, device, sender, key, variant):
    c = login(xmpp, sender, key)
    token = device["token"]
    mid = f"v-{variant}"
    body = {"to": token, "message_id": mid, "data": {"k": "a \"quoted\" <value> & more"}, "time_to_live": 600}
    text = json.dumps(body)
    if variant == "escaped_quotes":
        c.send_gcm(text, "x1", escape_quotes=True)  # {&quot;to&quot;:...}, as Smack's sample does
    elif variant == "newline_padded":
        c.send(f'\n<message><gcm xmlns="{GCM_NS}">\n    {json.dumps(body).replace("&", "&amp;").replace("<", "&lt;")}\n</gcm></message>\n')
    elif variant == "smack_attrs":
        c.send_gcm(text, "RaNdOm-12", attrs=f" xmlns='{CLIENT_NS}' xml:lang='en'")
    elif variant == "no_id_attr":
        c.send_gcm(text, None)
    elif variant == "empty_id":
        c.send_gcm(text, "")
    payload, item = c.wait_gcm(mid)
    assert_compact_ack(payload, item, token, mid)


@pytest.mark.parametrize("extra", [
    {"time_to_live": 0},
    {"time_to_live": 2419200},
    {"priority": "high"},
    {"priority": "normal", "collapse_key": "updates"},
    {"notification": {"title": "t", "body": "b"}},
    {"data": {"big": "x" * 4000}},
    {"delivery_receipt_requested": False, "content_available": True},
])
def test_valid_options_acked(xmpp, device, sender, key, extra):
    c = login(xmpp, sender, key)
    body = {"to": device["token"], "message_id": "ok-1", "data": {"a": "b"}}
    body.update(extra)
    payload, item = c.downstream(body)
    assert payload.get("message_type") == "ack", f"{extra}: {item.raw}"


# ---- downstream: NACK ----------------------------------------------------------------------------

def test_token_of_other_sender_bad_registration(server, xmpp, sender, key):
    other = register_device(server.http_base, "com.example.other", [new_sender_id()])
    c = login(xmpp, sender, key)
    payload, item = c.downstream({"to": other["token"], "message_id": "bad-2", "data": {"a": "b"}})
    assert payload.get("message_type") == "nack" and payload.get("error") == "BAD_REGISTRATION", item.raw


INVALID = {
    "ttl_negative": {"time_to_live": -1},
    "ttl_too_big": {"time_to_live": 2419201},
    "ttl_not_number": {"time_to_live": "abc"},
    "data_too_big": {"data": {"k": "x" * 4097}},
    "reserved_key_from": {"data": {"from": "me"}},
    "reserved_key_google": {"data": {"google.x": "1"}},
    "bad_priority": {"priority": "urgent"},
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_json_nack_and_connection_stays_open(xmpp, device, sender, key, case):
    c = login(xmpp, sender, key)
    body = {"to": device["token"], "message_id": f"inv-{case}", "data": {"a": "b"}}
    body.update(INVALID[case])
    payload, item = c.downstream(body)
    assert payload.get("message_type") == "nack", item.raw
    assert payload.get("error") == "INVALID_JSON", item.raw
    assert str(payload.get("error_description", "")).startswith("InvalidJson: "), item.raw
    # Still usable.
    ok, item2 = c.downstream({"to": device["token"], "message_id": f"after-{case}", "data": {"a": "b"}})
    assert ok.get("message_type") == "ack", item2.raw


# ---- stanza errors -------------------------------------------------------------------------------

def assert_bad_request_echo(item, stanza_id, sent_text, text_exact=None, text_prefix="InvalidJson: "):
    el = item.elem
    assert el.tag == q(CLIENT_NS, "message") and el.get("type") == "error", item.raw
    assert el.get("id") == stanza_id, item.raw
    g = el.find(q(GCM_NS, "gcm"))
    assert g is not None and (g.text or "").strip() == sent_text.strip(), f"payload not echoed: {item.raw}"
    err = el.find(q(CLIENT_NS, "error"))
    assert err is not None and err.get("code") == "400" and err.get("type") == "modify", item.raw
    assert err.find(q(STANZAS_NS, "bad-request")) is not None, item.raw
    text = err.find(q(STANZAS_NS, "text"))
    assert text is not None, item.raw
    if text_exact is not None:
        assert (text.text or "").strip() == text_exact, item.raw
    assert (text.text or "").strip().startswith(text_prefix), item.raw


@pytest.mark.parametrize("text", ['{"to": "x", "message_id": ', "not json at all"])
def test_unparseable_json_stanza_error(xmpp, device, sender, key, text):
    c = login(xmpp, sender, key)
    c.send_gcm(text, "junk-1")
    item = c.next_element()
    assert_bad_request_echo(item, "junk-1", text)
    payload, _ = c.downstream({"to": device["token"], "message_id": "after-junk", "data": {"a": "b"}})
    assert payload.get("message_type") == "ack"


# ---- a real client: slixmpp ----------------------------------------------------------------------

async def _slixmpp_round_trip(port: int, ca_cert: str, sender: str, key: str, token: str) -> dict:
    import slixmpp
    from slixmpp.xmlstream.handler import Callback
    from slixmpp.xmlstream.matcher import MatchXPath

    from ccs_support.upstream import register_gcm_plugin
    register_gcm_plugin()

    client = slixmpp.ClientXMPP(f"{sender}@gcm.googleapis.com", key)
    client.enable_direct_tls = True       # CCS is TLS from the first byte ("xmpps")
    client.enable_starttls = False
    client.enable_plaintext = False
    client.ca_certs = Path(ca_cert)       # verified against server_hostname=gcm.googleapis.com
    client.use_ipv6 = False

    loop = asyncio.get_running_loop()
    started = loop.create_future()
    ack = loop.create_future()

    def settle(fut, value=None, exc=None):
        if not fut.done():
            fut.set_exception(exc) if exc else fut.set_result(value)

    client.add_event_handler("session_start", lambda _ev: settle(started, True))
    client.add_event_handler("failed_auth", lambda _ev: settle(started, exc=AssertionError("slixmpp: SASL failed")))
    client.add_event_handler("connection_failed",
                             lambda ev: settle(started, exc=AssertionError(f"slixmpp: connection failed: {ev}")))

    def on_message(msg):
        text = msg["gcm"]["json"]
        if text:
            body = json.loads(text)
            if body.get("message_id") == "slix-1":
                settle(ack, {"json": body, "raw": str(msg), "type": msg["type"]})

    # slixmpp's own "message" event only fires for messages with a <body>: match <gcm> directly.
    client.register_handler(Callback("CCS gcm", MatchXPath(f"{{{CLIENT_NS}}}message/{{{GCM_NS}}}gcm"), on_message))
    client.connect(host="127.0.0.1", port=port)
    try:
        await asyncio.wait_for(started, 20)
        bound = str(client.boundjid)
        msg = client.Message()
        msg["id"] = "slix-stanza-1"
        msg["gcm"]["json"] = json.dumps({"to": token, "message_id": "slix-1", "data": {"via": "slixmpp"}})
        msg.send()
        result = await asyncio.wait_for(ack, 20)
        result["bound"] = bound
        return result
    finally:
        try:
            await asyncio.wait_for(client.disconnect(wait=1.0), 5)
        except Exception:
            client.abort()


def test_slixmpp_direct_tls_login_and_ack(server, device, sender, key):
    result = asyncio.run(_slixmpp_round_trip(server.ccs_port, server.ca_cert, sender, key, device["token"]))
    assert result["json"].get("message_type") == "ack", result
    assert result["json"].get("from") == device["token"], result
    assert result["bound"].startswith(f"{sender}@gcm.googleapis.com/"), result
