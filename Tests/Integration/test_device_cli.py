"""The simulated device CLI and the admin HTTP API, end to end with a raw app-server connection."""

from __future__ import annotations

import re
import time

from ccs_support import get_device, http_json, list_connections, list_devices, new_key, new_sender_id
from ccs_support.xmpp import GCM_NS

TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]+:APA91b[A-Za-z0-9_-]+$")
DRAINING_EXACT = ('<message><data:gcm xmlns:data="google:mobile:data">'
                  '{"message_type":"control","control_type":"CONNECTION_DRAINING"}</data:gcm></message>')


def send_and_ack(c, token, mid, **fields):
    body = {"to": token, "message_id": mid, "data": {"n": mid}}
    body.update(fields)
    payload, item = c.downstream(body)
    assert payload.get("message_type") == "ack", item.raw
    return payload


def test_registered_event_and_message_shape(server, devices, xmpp):
    sender, key = new_sender_id(), new_key()
    dev = devices(server, "com.example.shape", [sender], platform="android")
    reg = dev.expect("registered", timeout=30)
    assert TOKEN_RE.match(reg["token"]), reg
    dev.expect("connected", timeout=30)

    c = xmpp()
    c.login(sender, key)
    send_and_ack(c, reg["token"], "shape-1", priority="high", time_to_live=600, collapse_key="ck",
                 notification={"title": "Hi", "body": "there"})
    send_and_ack(c, reg["token"], "shape-2")
    m1 = dev.expect(lambda e: e.get("event") == "message" and e["message"]["data"].get("n") == "shape-1", 20)["message"]
    m2 = dev.expect(lambda e: e.get("event") == "message" and e["message"]["data"].get("n") == "shape-2", 20)["message"]

    assert m1["from"] == sender, m1
    assert re.match(r"^0:.+%.+$", m1["message_id"]), m1
    assert m1["priority"] == "high" and m1["ttl"] == 600, m1
    assert m1["collapse_key"] == "ck" and m1["notification"] == {"title": "Hi", "body": "there"}, m1
    now_ms = time.time() * 1000
    assert abs(m1["sent_time"] - now_ms) < 10 * 60 * 1000, m1  # a ms epoch, not seconds
    assert m2["priority"] == "normal" and m2["ttl"] == 2419200, m2
    assert "collapse_key" not in m2 and "notification" not in m2, m2
    assert m1["message_id"] != m2["message_id"]

    assert dev.close() == 0


def test_offline_queue_then_online(server, devices, xmpp):
    sender, key = new_sender_id(), new_key()
    dev = devices(server, "com.example.offline", [sender], platform="ios")
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)

    dev.send({"go": "offline"})
    dev.expect("offline", timeout=20)

    c = xmpp()
    c.login(sender, key)
    for i in range(3):
        send_and_ack(c, token, f"off-{i}")

    # The admin API shows the device offline with its queue.
    status, body = get_device(server.http_base, token)
    assert status == 200, body
    assert body["token"] == token and body.get("online") is False, body
    assert len(body["queue"]) == 3, body
    listed = [d for d in list_devices(server.http_base) if d["token"] == token]
    assert len(listed) == 1, listed
    d = listed[0]
    assert d["app"] == "com.example.offline" and d["senders"] == [sender] and d["platform"] == "ios", d
    assert d["online"] is False and d["queued"] == 3, d
    assert d.get("device_id"), d

    assert not dev.drain(1.0), "device got messages while offline"
    dev.send({"go": "online"})
    dev.expect("connected", timeout=20)
    got = dev.messages(quiet=2.0, timeout=20, until=lambda ms: len(ms) >= 3)
    assert sorted(m["data"]["n"] for m in got) == ["off-0", "off-1", "off-2"], got

    # Delivered and ACKed by the device: the queue empties.
    deadline = time.monotonic() + 10
    while True:
        status, body = get_device(server.http_base, token)
        if status == 200 and body.get("online") is True and not body.get("queue"):
            break
        assert time.monotonic() < deadline, f"queue not emptied after delivery: {body}"
        time.sleep(0.2)

    assert dev.close() == 0


def test_end_of_stdin_exits_zero(server, devices):
    dev = devices(server, "com.example.eof", [new_sender_id()])
    dev.expect("registered", timeout=30)
    dev.expect("connected", timeout=30)
    assert dev.close(timeout=15) == 0


def test_device_with_token_reuses_registration(server, devices, xmpp):
    sender, key = new_sender_id(), new_key()
    first = devices(server, "com.example.reuse", [sender])
    token = first.expect("registered", timeout=30)["token"]
    first.expect("connected", timeout=30)
    assert first.close() == 0

    c = xmpp()
    c.login(sender, key)
    send_and_ack(c, token, "while-away")

    again = devices(server, "com.example.reuse", [sender], token=token)
    again.expect("connected", timeout=30)
    m = again.expect("message", timeout=20)["message"]
    assert m["data"]["n"] == "while-away", m
    assert not any(e.get("event") == "registered" for e in again.events), again.events
    assert again.close() == 0


def test_unknown_device_404(server):
    status, _ = get_device(server.http_base, "nope:APA91bnope")
    assert status == 404


def test_info_endpoint(server):
    status, body = http_json("GET", f"{server.http_base}/emulator/v1/info")
    assert status == 200, body
    for k in ("ccs_port", "device_port", "http_port", "ca_cert"):
        assert body[k] == server.ready[k], (k, body, server.ready)


def test_connections_and_drain(server, xmpp, device, sender, key):
    c = xmpp()
    c.login(sender, key)
    mine = [x for x in list_connections(server.http_base) if x.get("sender_id") == sender]
    assert len(mine) == 1, list_connections(server.http_base)
    conn = mine[0]
    assert conn["pending"] == 0 and conn["draining"] is False, conn

    # Another connection of the same sender is not affected by the drain.
    other = xmpp()
    other.login(sender, key)

    status, body = http_json("POST", f"{server.http_base}/emulator/v1/connections/{conn['id']}/drain")
    assert status == 202, body
    control = c.next_element(timeout=10)
    assert control.raw == DRAINING_EXACT, control.raw

    mine = [x for x in list_connections(server.http_base) if x["id"] == conn["id"]]
    assert mine and mine[0]["draining"] is True, mine

    payload, item = c.downstream({"to": device["token"], "message_id": "late-1", "data": {"a": "b"}})
    assert payload.get("message_type") == "nack" and payload.get("error") == "CONNECTION_DRAINING", item.raw
    assert item.raw.startswith(f'<message><gcm xmlns="{GCM_NS}">'), item.raw

    ok, _ = other.downstream({"to": device["token"], "message_id": "other-1", "data": {"a": "b"}})
    assert ok.get("message_type") == "ack"

    c.wait_closed(45)  # the server closes the drained connection after its grace period
    assert other.is_open(0.2)
    ok, _ = other.downstream({"to": device["token"], "message_id": "other-2", "data": {"a": "b"}})
    assert ok.get("message_type") == "ack"


def test_a_device_can_turn_platform_views_off_and_on(server, xmpp, device, sender, key):
    """Views come with every message by default; {"message_type":"views","enabled":false} stops them
    on that connection, true brings them back, and a malformed one is a stanza error."""
    from ccs_support.xmpp import XmppConn, plain_payload, SASL_NS, q
    d = XmppConn(server.ready["device_port"], server.ready["ca_cert"])
    try:
        d.open_stream("devices.ccs-emulator")
        assert d.auth_plain(plain_payload("", device["device_id"], device["device_secret"])).tag == q(SASL_NS, "success")
        d.open_stream("devices.ccs-emulator")
        assert d.bind().elem.get("type") == "result"
        app = xmpp()
        app.login(sender, key)

        def deliver(message_id: str) -> str:
            ok, _ = app.downstream({"to": device["token"], "message_id": message_id, "data": {"n": message_id}})
            assert ok.get("message_type") == "ack", ok
            item = d.next_element(timeout=15)
            assert f'"data":{{"n":"{message_id}"}}' in item.raw, item.raw
            d.send_gcm({"message_type": "ack", "message_id": item.elem.get("id")})
            return item.raw

        def views(enabled: bool) -> None:
            d.send_gcm({"message_type": "views", "enabled": enabled})
            # Stanzas are handled in order: once the ping after it is answered, the choice holds.
            d.send('<iq type="get" id="after-views"><ping xmlns="urn:xmpp:ping"/></iq>')
            assert d.next_element(timeout=15).elem.get("id") == "after-views"

        assert '<view xmlns="urn:ccs-emulator:device">' in deliver("v-1")
        views(False)
        assert "<view" not in deliver("v-2")
        views(True)
        assert '<view xmlns="urn:ccs-emulator:device">' in deliver("v-3")
        d.send_gcm({"message_type": "views", "enabled": "no"}, stanza_id="bad-views")
        error = d.next_element(timeout=15)
        assert error.elem.get("type") == "error" and error.elem.get("id") == "bad-views", error.raw
        assert 'views without a boolean "enabled"' in error.raw, error.raw
    finally:
        d.close()
