"""Store-and-forward semantics, end to end: device states, TTL, collapse keys, the 100-message
limit, priority and Doze, multiple senders, uninstall, delivery receipts, dry_run, what the app
sees (tray / tap), and the virtual clock.

The app server is a raw TLS XMPP connection on the CCS port; the device is the `ccs-emulator
device` CLI on the device channel; the admin API is only used to look (queue, tray, outbound,
state) and to set what the issue says it sets. Every test gets its own server with the virtual
clock (start-up takes ~0.1 s), so clock advances never leak between tests.

"Never delivered" is shown with a barrier message sent after the forbidden one (see
ccs_support/semantics.py), not with a sleep.
"""

from __future__ import annotations

import re

import pytest

from ccs_support import list_connections, new_key, new_sender_id, register_device
from ccs_support.semantics import (
    VIRTUAL, advance, app_server, gcm_ids, assert_not_printed, barrier, clock, data_msg, device_view, go, is_msg,
    outbound, post, quote_token, queue_of, queued_app_ids, send_ack, send_many_acked,
    send_nack, set_state, start_device, tray, wait_device, wait_outbound,
)

APP = "com.example.semantics"


@pytest.fixture
def vsrv(start_server):
    """A server of this test alone, on the virtual clock."""
    return start_server(extra_args=VIRTUAL)


@pytest.fixture
def app(vsrv, xmpp):
    """(sender, key, logged-in app-server connection) for a fresh sender."""
    sender, key = new_sender_id(), new_key()
    c = xmpp(vsrv)
    c.login(sender, key)
    return sender, key, c


def offline(dev, base, token):
    """{"go":"offline"} and wait until the server has noticed (so nothing races the disconnect)."""
    go(dev, "offline")
    wait_device(base, token, lambda v: v["online"] is False, "device offline")


def online(dev, base, token):
    go(dev, "online")
    wait_device(base, token, lambda v: v["online"] is True, "device online")


def tag_of(e):
    return ((e.get("message") or {}).get("data") or {}).get("n")


def state_of(base, token):
    return device_view(base, token)["state"]


# ---- 1. device states -----------------------------------------------------------------------------

def test_device_states_from_cli_are_persisted(vsrv, devices):
    base = vsrv.http_base
    sender = new_sender_id()
    dev, token = start_device(devices, vsrv, APP, [sender])
    v = wait_device(base, token, lambda v: v["online"] is True, "device online")
    assert v["status"] == "active" and v["state"] == {"foreground": True, "idle": False}, v

    for cmd, expected in [("background", {"foreground": False, "idle": False}),
                          ("idle", {"foreground": False, "idle": True}),
                          ("foreground", {"foreground": True, "idle": True}),
                          ("active", {"foreground": True, "idle": False}),
                          ("background", {"foreground": False, "idle": False})]:
        ev = go(dev, cmd)
        assert ev["state"] == expected, (cmd, ev)
        assert state_of(base, token) == expected, f'after {{"go":"{cmd}"}}: {device_view(base, token)}'

    offline(dev, base, token)
    online(dev, base, token)
    assert state_of(base, token) == {"foreground": False, "idle": False}, "going offline/online changed the state"

    ev = go(dev, "uninstall")
    assert ev.get("token") == token, ev
    v = wait_device(base, token, lambda v: v["online"] is False, "uninstalled device offline")
    assert v["status"] == "uninstalled", v

    new_token = go(dev, "reinstall")["token"]
    assert new_token != token
    nv = wait_device(base, new_token, lambda v: v["online"] is True, "reinstalled device online")
    assert nv["status"] == "active" and nv["app"] == APP and nv["senders"] == [sender], nv
    assert device_view(base, token)["status"] == "uninstalled", "reinstall revived the old token"
    assert dev.close() == 0


def test_device_states_from_admin_api_are_persisted(vsrv, devices):
    base = vsrv.http_base
    sender = new_sender_id()
    dev, token = start_device(devices, vsrv, APP, [sender], platform="ios")
    wait_device(base, token, lambda v: v["online"] is True, "device online")

    for body, expected in [({"foreground": False}, {"foreground": False, "idle": False}),
                           ({"idle": True}, {"foreground": False, "idle": True}),
                           ({"foreground": True}, {"foreground": True, "idle": True}),
                           ({"background": True}, {"foreground": False, "idle": True}),
                           ({"active": True}, {"foreground": False, "idle": False}),
                           ({"idle": True, "foreground": True}, {"foreground": True, "idle": True}),
                           ({"idle": False}, {"foreground": True, "idle": False})]:
        resp = set_state(base, token, body)
        assert resp == expected, (body, resp)
        assert state_of(base, token) == expected, (body, device_view(base, token))

    status, resp = post(base, f"devices/{quote_token(token)}/disconnect")
    assert status == 200 and resp.get("was_online") is True, (status, resp)
    dev.expect("disconnected", timeout=15)
    wait_device(base, token, lambda v: v["online"] is False, "device offline after /disconnect")
    assert state_of(base, token) == {"foreground": True, "idle": False}

    status, resp = post(base, f"devices/{quote_token(token)}/uninstall")
    assert status == 200, (status, resp)
    v = device_view(base, token)
    assert v["status"] == "uninstalled", v

    status, re_body = post(base, f"devices/{quote_token(token)}/reinstall")
    assert status == 201, (status, re_body)
    new_token = re_body["token"]
    assert new_token != token
    nv = device_view(base, new_token)
    assert nv["status"] == "active" and nv["app"] == APP and nv["senders"] == [sender], nv
    assert nv["platform"] == "ios", nv
    assert device_view(base, token)["status"] == "uninstalled"


def test_cli_goes_online_again_after_admin_disconnect(vsrv, devices):
    """After POST /devices/{token}/disconnect the device is offline; {"go":"online"} brings it back."""
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [new_sender_id()])
    wait_device(base, token, lambda v: v["online"] is True, "device online")
    status, resp = post(base, f"devices/{quote_token(token)}/disconnect")
    assert status == 200 and resp.get("was_online") is True, (status, resp)
    dev.expect("disconnected", timeout=15)
    wait_device(base, token, lambda v: v["online"] is False, "device offline after /disconnect")
    dev.send({"go": "online"})
    dev.expect("connected", timeout=10)
    wait_device(base, token, lambda v: v["online"] is True, "device online again")


# ---- 2. TTL ---------------------------------------------------------------------------------------

def test_time_to_live_range(vsrv, app):
    sender, _, c = app
    token = register_device(vsrv.http_base, APP, [sender])["token"]
    send_ack(c, data_msg(token, "ttl-max", time_to_live=2419200))
    send_ack(c, data_msg(token, "ttl-zero", time_to_live=0))
    for bad in (2419201, -1):
        nack = send_nack(c, data_msg(token, f"ttl-{bad}", time_to_live=bad))
        assert nack.get("error") == "INVALID_JSON" and "INVALID_TTL" in nack.get("error_description", ""), nack
    q = queue_of(vsrv.http_base, token)
    assert [m["app_message_id"] for m in q] == ["ttl-max"], q
    assert q[0]["time_to_live"] == 2419200 and q[0]["expires_at"] - q[0]["enqueued_at"] == 2419200 * 1000, q[0]


def test_ttl_zero_to_offline_device_is_acked_never_stored_never_delivered(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    offline(dev, base, token)

    send_ack(c, data_msg(token, "now-or-never", time_to_live=0))
    assert queue_of(base, token) == [], "a TTL 0 message for an offline device was stored"
    # An ordinary message right after is stored: the device is really offline.
    send_ack(c, data_msg(token, "stored"))
    assert queued_app_ids(base, token) == ["stored"]

    online(dev, base, token)
    dev.expect(is_msg("stored"), timeout=20)
    barrier(c, dev, token, "ttl0-barrier")
    assert_not_printed(dev, ["now-or-never"])
    wait_device(base, token, lambda v: v["queue"] == [], "queue empty")


def test_ttl_zero_to_online_device_is_delivered(vsrv, app, devices):
    sender, _, c = app
    dev, token = start_device(devices, vsrv, APP, [sender])
    barrier(c, dev, token, "warm-up")  # the server has handed this connection its backlog
    send_ack(c, data_msg(token, "ttl0-online", time_to_live=0))
    m = dev.expect(is_msg("ttl0-online"), timeout=20)["message"]
    assert m["ttl"] == 0, m


def test_expired_message_leaves_queue_and_is_never_delivered(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    offline(dev, base, token)
    send_ack(c, data_msg(token, "short", time_to_live=60))
    send_ack(c, data_msg(token, "long", time_to_live=3600))
    assert queued_app_ids(base, token) == ["short", "long"]

    advance(base, 59)
    assert queued_app_ids(base, token) == ["short", "long"], "expired before its time to live ran out"
    advance(base, 2)
    assert queued_app_ids(base, token) == ["long"], "the expired message is still queued"

    online(dev, base, token)
    dev.expect(is_msg("long"), timeout=20)
    barrier(c, dev, token, "expiry-barrier")
    assert_not_printed(dev, ["short"])


def test_message_expiring_while_dozing_is_never_delivered(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    go(dev, "idle")
    send_ack(c, data_msg(token, "doze-short", priority="normal", time_to_live=30))
    send_ack(c, data_msg(token, "doze-long", priority="normal", time_to_live=3600))
    barrier(c, dev, token, "doze-barrier-1")
    assert_not_printed(dev, ["doze-short", "doze-long"])
    advance(base, 31)
    assert queued_app_ids(base, token) == ["doze-long"]
    go(dev, "active")
    dev.expect(is_msg("doze-long"), timeout=20)
    barrier(c, dev, token, "doze-barrier-2")
    assert_not_printed(dev, ["doze-short"])


# ---- 3. collapse keys -----------------------------------------------------------------------------

def test_collapse_key_replaces_queued_message(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    offline(dev, base, token)
    send_ack(c, data_msg(token, "a1", collapse_key="a"))
    send_ack(c, data_msg(token, "b1", collapse_key="b"))
    send_ack(c, data_msg(token, "a2", collapse_key="a"))
    assert queued_app_ids(base, token) == ["b1", "a2"], queue_of(base, token)

    online(dev, base, token)
    got = {m["data"]["n"]: m for m in dev.messages(quiet=1.0, timeout=20, until=lambda ms: len(ms) >= 2)}
    assert set(got) == {"b1", "a2"}, got
    assert got["a2"]["collapse_key"] == "a", got["a2"]
    barrier(c, dev, token, "ck-barrier")
    assert_not_printed(dev, ["a1"])


def test_at_most_four_collapse_keys_per_device(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    offline(dev, base, token)
    for i in range(1, 6):
        send_ack(c, data_msg(token, f"k{i}", collapse_key=f"key{i}"))
    assert queued_app_ids(base, token) == ["k2", "k3", "k4", "k5"], queue_of(base, token)

    online(dev, base, token)
    got = dev.messages(quiet=1.0, timeout=20, until=lambda ms: len(ms) >= 4)
    assert sorted(m["data"]["n"] for m in got) == ["k2", "k3", "k4", "k5"], got
    barrier(c, dev, token, "ck4-barrier")
    assert_not_printed(dev, ["k1"])


def test_notification_without_collapse_key_collapses_on_app_package(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    offline(dev, base, token)
    send_ack(c, data_msg(token, "n1", notification={"title": "one"}))
    send_ack(c, data_msg(token, "d1"))
    send_ack(c, data_msg(token, "n2", notification={"title": "two"}))
    send_ack(c, data_msg(token, "d2"))
    q = queue_of(base, token)
    assert [m["app_message_id"] for m in q] == ["d1", "n2", "d2"], q
    assert q[1].get("collapse_key") == APP, q[1]
    assert "collapse_key" not in q[0] and "collapse_key" not in q[2], q

    online(dev, base, token)
    got = dev.messages(quiet=1.0, timeout=20, until=lambda ms: len(ms) >= 3)
    assert sorted(m["data"]["n"] for m in got) == ["d1", "d2", "n2"], got
    barrier(c, dev, token, "pkg-barrier")
    assert_not_printed(dev, ["n1"])


# ---- 4. the 100-message limit ---------------------------------------------------------------------

def test_101st_non_collapsible_message_discards_all(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    offline(dev, base, token)
    ids = [f"bulk-{i}" for i in range(101)]
    send_many_acked(c, [data_msg(token, mid) for mid in ids[:100]])
    assert queued_app_ids(base, token) == ids[:100], "100 non-collapsible messages must all be stored"

    send_ack(c, data_msg(token, ids[100]))
    q = queue_of(base, token)
    assert [m for m in q if m.get("kind") == "message"] == [], \
        f"{sum(m.get('kind') == 'message' for m in q)} messages still queued after the 101st"
    assert [m.get("kind") for m in q] == ["deleted_messages"], q

    online(dev, base, token)
    ev = dev.expect("deleted_messages", timeout=20)
    assert ev["message"].get("message_type") == "deleted_messages", ev
    barrier(c, dev, token, "overflow-barrier")
    assert_not_printed(dev, ids)
    assert [e for e in dev.events if e.get("event") == "deleted_messages"] == [ev], "more than one notice"


# ---- 5. priority and Doze -------------------------------------------------------------------------

@pytest.mark.parametrize("via", ["cli", "admin"])
def test_doze_holds_normal_and_delay_while_idle(vsrv, app, devices, via):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    if via == "cli":
        go(dev, "idle")
    else:
        set_state(base, token, {"idle": True})

    send_ack(c, data_msg(token, "normal-1", priority="normal"))
    send_ack(c, data_msg(token, "dwi-1", priority="high", delay_while_idle=True))
    send_ack(c, data_msg(token, "high-1", priority="high"))
    m = dev.expect(is_msg("high-1"), timeout=20)["message"]
    assert m["priority"] == "high", m
    assert_not_printed(dev, ["normal-1", "dwi-1"])
    assert sorted(queued_app_ids(base, token)) == ["dwi-1", "normal-1"], queue_of(base, token)

    if via == "cli":
        go(dev, "active")
    else:
        set_state(base, token, {"active": True})
    got = dev.messages(quiet=1.0, timeout=20, until=lambda ms: len(ms) >= 2)
    assert sorted(m["data"]["n"] for m in got) == ["dwi-1", "normal-1"], got
    wait_device(base, token, lambda v: v["queue"] == [], "queue empty once the held messages are ACKed")


# ---- 6. multiple senders --------------------------------------------------------------------------

def test_device_with_two_senders(vsrv, devices, xmpp):
    base = vsrv.http_base
    a, b, cc = new_sender_id(), new_sender_id(), new_sender_id()
    ca, cb, cx = xmpp(vsrv), xmpp(vsrv), xmpp(vsrv)
    ca.login(a, new_key())
    cb.login(b, new_key())
    cx.login(cc, new_key())
    dev, token = start_device(devices, vsrv, APP, [a, b])
    assert device_view(base, token)["senders"] == [a, b]

    # B's traffic: a downstream message with a receipt, and an upstream message to B.
    send_ack(cb, data_msg(token, "from-b", delivery_receipt_requested=True))
    assert dev.expect(is_msg("from-b"), timeout=20)["message"]["from"] == b
    receipt, _ = cb.wait_gcm("dr2:from-b", timeout=15)
    assert receipt["message_type"] == "receipt", receipt
    dev.send({"upstream": {"to": f"{b}@gcm.googleapis.com", "message_id": "up-to-b", "data": {"k": "v"}}})
    assert dev.expect(lambda e: e.get("message_id") == "up-to-b", timeout=15)["event"] == "sent"
    up, _ = cb.wait_gcm("up-to-b", timeout=15)
    assert up.get("from") == token and up.get("category") == APP, up

    # C is not a sender of this registration.
    nack = send_nack(cx, data_msg(token, "from-c"))
    assert nack.get("error") == "BAD_REGISTRATION", nack
    assert "MismatchSenderId" in nack.get("error_description", ""), nack

    # A's own traffic, sent after all of B's was dispatched: A sees only that.
    send_ack(ca, data_msg(token, "from-a", delivery_receipt_requested=True))
    assert dev.expect(is_msg("from-a"), timeout=20)["message"]["from"] == a
    ca.wait_gcm("dr2:from-a", timeout=15)
    dev.send({"upstream": {"to": f"{a}@gcm.googleapis.com", "message_id": "up-to-a", "data": {"k": "v"}}})
    ca.wait_gcm("up-to-a", timeout=15)
    seen = gcm_ids(ca)
    assert seen == ["from-a", "dr2:from-a", "up-to-a"], f"A's connection got: {[i.raw for i in ca.items]}"
    assert b not in ca.received and "from-b" not in ca.received and "up-to-b" not in ca.received

    barrier(ca, dev, token, "c-barrier")
    assert_not_printed(dev, ["from-c"])
    assert {o["message_id"] for o in outbound(base, a)} == {"dr2:from-a", "up-to-a"}, outbound(base)
    assert {o["message_id"] for o in outbound(base, b)} == {"dr2:from-b", "up-to-b"}, outbound(base)


# ---- 7. uninstall and reinstall -------------------------------------------------------------------

@pytest.mark.parametrize("via", ["cli", "admin"])
def test_uninstall_then_reinstall(vsrv, app, devices, via):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    offline(dev, base, token)
    send_ack(c, data_msg(token, "before-uninstall"))
    assert queued_app_ids(base, token) == ["before-uninstall"]

    if via == "cli":
        go(dev, "uninstall")
    else:
        status, body = post(base, f"devices/{quote_token(token)}/uninstall")
        assert status == 200, (status, body)
    v = device_view(base, token)
    assert v["status"] == "uninstalled" and v["queue"] == [], v

    nack = send_nack(c, data_msg(token, "after-uninstall"))
    assert nack.get("error") == "DEVICE_UNREGISTERED", nack

    if via == "cli":
        new_token = go(dev, "reinstall")["token"]
        new_dev = dev
    else:
        status, body = post(base, f"devices/{quote_token(token)}/reinstall")
        assert status == 201, (status, body)
        new_token = body["token"]
        new_dev, _ = start_device(devices, vsrv, APP, [sender], token=new_token)
    assert new_token != token

    nack = send_nack(c, data_msg(token, "old-token-again"))
    assert nack.get("error") == "DEVICE_UNREGISTERED", nack
    send_ack(c, data_msg(new_token, "new-token"))
    new_dev.expect(is_msg("new-token"), timeout=20)
    assert_not_printed(new_dev, ["before-uninstall", "after-uninstall", "old-token-again"])
    assert device_view(base, token)["status"] == "uninstalled"


# ---- 8. delivery receipts -------------------------------------------------------------------------

RECEIPT_KEYS = ["category", "data", "message_id", "message_type", "from"]
RECEIPT_DATA_KEYS = ["message_status", "original_message_id", "device_registration_id", "message_sent_timestamp"]


def my_connection_id(base, sender):
    mine = [x["id"] for x in list_connections(base) if x.get("sender_id") == sender]
    assert len(mine) == 1, list_connections(base)
    return mine[0]


@pytest.mark.parametrize("ack_id", ["with-dr2-prefix", "without-prefix"])
def test_delivery_receipt_shape_and_pending_until_acked(vsrv, app, devices, ack_id):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    send_ack(c, data_msg(token, "r1", delivery_receipt_requested=True))
    printed = dev.expect(is_msg("r1"), timeout=20)["message"]

    payload, item = c.wait_gcm("dr2:r1", timeout=15)
    bare = c.jid.split("/", 1)[0]
    assert bare == f"{sender}@gcm.googleapis.com", c.jid
    assert item.raw.startswith(f'<message to="{bare}" from="devices@gcm.googleapis.com" type="normal">'
                               f'<gcm xmlns="google:mobile:data">'), item.raw
    assert list(payload) == RECEIPT_KEYS, f"receipt keys/order: {list(payload)}"
    assert payload["category"] == APP and payload["message_id"] == "dr2:r1", payload
    assert payload["message_type"] == "receipt" and payload["from"] == "gcm.googleapis.com", payload
    data = payload["data"]
    assert list(data) == RECEIPT_DATA_KEYS, f"receipt data keys/order: {list(data)}"
    assert data["message_status"] == "MESSAGE_SENT_TO_DEVICE", data
    assert data["original_message_id"] == "r1" and data["device_registration_id"] == token, data
    assert re.fullmatch(r"\d+", str(data["message_sent_timestamp"])), data
    assert int(data["message_sent_timestamp"]) == printed["sent_time"], (data, printed)

    conn_id = my_connection_id(base, sender)
    pend = outbound(base, sender)
    assert [(o["kind"], o["message_id"], o["token"], o.get("connection_id")) for o in pend] == \
        [("receipt", "dr2:r1", token, conn_id)], pend

    # An ACK for another id and other traffic do not clear it (the connection handles stanzas in
    # order, so once r-other is ACKed the wrong ACK has been processed).
    c.send_gcm({"to": token, "message_id": "dr2:nope", "message_type": "ack"})
    send_ack(c, data_msg(token, "r-other"))
    dev.expect(is_msg("r-other"), timeout=20)
    assert [o["message_id"] for o in outbound(base, sender)] == ["dr2:r1"]

    mid = "dr2:r1" if ack_id == "with-dr2-prefix" else "r1"
    c.send_gcm({"to": token, "message_id": mid, "message_type": "ack"})
    wait_outbound(base, sender, lambda items: items == [], f"receipt ACKed as {mid!r} leaves the outbound list")

    # ACKed means done: a new connection of the sender is not sent it again.
    c2 = app_server(vsrv, sender, new_key(), resource="second")
    try:
        c.close()
        send_ack(c2, data_msg(token, "r2", delivery_receipt_requested=True))
        dev.expect(is_msg("r2"), timeout=20)
        p2, _ = c2.wait_gcm("dr2:r2", timeout=15)
        seen = gcm_ids(c2)
        assert seen == ["r2", "dr2:r2"], f"second connection got {[i.raw for i in c2.items]}"
    finally:
        c2.close()


def test_unacked_receipt_redelivered_to_other_connection_of_sender(vsrv, app, devices):
    sender, key, c1 = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    send_ack(c1, data_msg(token, "rr1", delivery_receipt_requested=True))
    dev.expect(is_msg("rr1"), timeout=20)
    first, first_item = c1.wait_gcm("dr2:rr1", timeout=15)
    c1_id = my_connection_id(base, sender)
    assert [(o["message_id"], o.get("connection_id")) for o in outbound(base, sender)] == [("dr2:rr1", c1_id)]

    c2 = app_server(vsrv, sender, key, resource="other")
    try:
        c1.close()  # without ACKing the receipt
        again, again_item = c2.wait_gcm("dr2:rr1", timeout=15, skip_other=False)
        assert again == first, (again, first)
        assert again_item.raw.startswith('<message to="') and 'type="normal"' in again_item.raw, again_item.raw
        c2_ids = [x["id"] for x in list_connections(base) if x.get("sender_id") == sender]
        assert len(c2_ids) == 1 and c2_ids[0] != c1_id
        assert [(o["message_id"], o.get("connection_id")) for o in outbound(base, sender)] == \
            [("dr2:rr1", c2_ids[0])]
        c2.send_gcm({"to": token, "message_id": "dr2:rr1", "message_type": "ack"})
        wait_outbound(base, sender, lambda items: items == [], "redelivered receipt ACKed")
    finally:
        c2.close()


# ---- 9. dry_run -----------------------------------------------------------------------------------

def test_dry_run_acked_not_stored_not_delivered(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    barrier(c, dev, token, "dry-warm-up")
    send_ack(c, data_msg(token, "dry-online", dry_run=True, priority="high"))
    barrier(c, dev, token, "dry-barrier-1")
    assert_not_printed(dev, ["dry-online"])

    offline(dev, base, token)
    send_ack(c, data_msg(token, "dry-offline", dry_run=True))
    send_ack(c, data_msg(token, "dry-offline-receipt", dry_run=True, delivery_receipt_requested=True))
    assert queue_of(base, token) == [], "a dry_run message was stored"
    online(dev, base, token)
    barrier(c, dev, token, "dry-barrier-2")
    assert_not_printed(dev, ["dry-offline", "dry-offline-receipt"])
    assert not any("dry-" in o["message_id"] for o in outbound(base, sender)), outbound(base, sender)


# ---- 10. what the app sees ------------------------------------------------------------------------

def test_background_notification_goes_to_tray_and_tap_opens_it(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    go(dev, "background")

    send_ack(c, data_msg(token, "note-bg", notification={"title": "Hello", "body": "bg"}))
    shown = dev.expect(lambda e: e.get("event") in ("notification", "message"), timeout=20)
    assert shown["event"] == "notification", f"background notification printed as {shown!r}"
    note = shown["message"]
    assert note["data"] == {"n": "note-bg"} and note["notification"] == {"title": "Hello", "body": "bg"}, note

    send_ack(c, data_msg(token, "data-bg"))
    ev = dev.expect(lambda e: tag_of(e) == "data-bg", timeout=20)
    assert ev["event"] == "message" and "opened_from" not in ev, f"data message in the background: {ev!r}"

    # The tray entry is written when the device ACKs: wait for the ACKs to land.
    wait_device(base, token, lambda v: v["queue"] == [], "queue empty")
    entries = tray(base, token)
    assert [t["message_id"] for t in entries] == [note["message_id"]], entries
    assert entries[0]["message"]["data"] == {"n": "note-bg"}, entries

    dev.send({"tap": note["message_id"]})
    opened = dev.expect(lambda e: e.get("event") in ("message", "error"), timeout=20)
    assert opened["event"] == "message" and opened.get("opened_from") == "tray", opened
    assert opened["message"]["data"] == {"n": "note-bg"}, opened
    assert opened["message"]["message_id"] == note["message_id"], opened
    assert tray(base, token) == [], "a tapped notification stays in the tray"


def test_foreground_notification_and_data_messages_print_as_message(vsrv, app, devices):
    sender, _, c = app
    base = vsrv.http_base
    dev, token = start_device(devices, vsrv, APP, [sender])
    go(dev, "background")
    go(dev, "foreground")
    send_ack(c, data_msg(token, "note-fg", notification={"title": "fg"}))
    ev = dev.expect(lambda e: tag_of(e) == "note-fg", timeout=20)
    assert ev["event"] == "message" and "opened_from" not in ev, f"foreground notification: {ev!r}"
    assert ev["message"]["notification"] == {"title": "fg"}, ev
    send_ack(c, data_msg(token, "data-fg"))
    assert dev.expect(lambda e: tag_of(e) == "data-fg", timeout=20)["event"] == "message"
    wait_device(base, token, lambda v: v["queue"] == [], "queue empty")
    assert tray(base, token) == [], "a foreground notification went to the tray"

    # Background set through the admin API has the same effect as {"go":"background"}.
    set_state(base, token, {"background": True})
    send_ack(c, data_msg(token, "note-admin-bg", notification={"title": "x"}))
    ev = dev.expect(lambda e: tag_of(e) == "note-admin-bg", timeout=20)
    assert ev["event"] == "notification", ev
    send_ack(c, data_msg(token, "data-admin-bg"))
    assert dev.expect(lambda e: tag_of(e) == "data-admin-bg", timeout=20)["event"] == "message"
    wait_device(base, token, lambda v: v["queue"] == [], "queue empty")
    assert [t["message"]["data"]["n"] for t in tray(base, token)] == ["note-admin-bg"]


# ---- 11. virtual clock ----------------------------------------------------------------------------

def test_virtual_clock_get_and_advance(vsrv):
    base = vsrv.http_base
    c0 = clock(base)
    assert c0["kind"] == "virtual" and isinstance(c0["now_ms"], int), c0
    assert clock(base)["now_ms"] == c0["now_ms"], "the virtual clock moved by itself"
    c1 = advance(base, 10)
    assert c1["now_ms"] == c0["now_ms"] + 10_000, (c0, c1)
    assert clock(base)["now_ms"] == c1["now_ms"]
    c2 = advance(base, 86400 * 28)
    assert c2["now_ms"] == c1["now_ms"] + 86400 * 28 * 1000, (c1, c2)
    assert clock(base) == c2


def test_clock_advance_on_wall_clock_is_409(start_server):
    srv = start_server()
    c = clock(srv.http_base)
    assert c["kind"] == "wall", c
    status, body = post(srv.http_base, "clock/advance", {"seconds": 10})
    assert status == 409, (status, body)
    assert clock(srv.http_base)["kind"] == "wall"


# ---- 12. idle connections ------------------------------------------------------------------------

def test_connections_that_idle_past_the_parser_release_keep_working(vsrv, app, devices):
    """An idle connection frees its XML parser after 1 s and makes a new one on its next bytes
    (docs/architecture.md); both endpoints must not notice, even with a stanza split across the gap."""
    import time

    from ccs_support.xmpp import gcm_stanza

    sender, _, c = app
    dev, token = start_device(devices, vsrv, APP, [sender])
    barrier(c, dev, token, "idle-warm-up")
    time.sleep(2.5)
    barrier(c, dev, token, "idle-after-gap")

    c.send(" ")  # a whitespace keep-alive, then silence
    time.sleep(2.5)
    stanza = gcm_stanza(data_msg(token, "idle-split", priority="high"))
    half = len(stanza) // 2
    c.send(stanza[:half])
    time.sleep(2.5)
    c.send(stanza[half:])
    ack, _ = c.wait_gcm("idle-split", timeout=15)
    assert ack["message_type"] == "ack", ack
    dev.expect(is_msg("idle-split"), timeout=20)
    import json
    import urllib.request
    with urllib.request.urlopen(vsrv.http_base + "/emulator/v1/info") as r:
        info = json.load(r)
    # Both connections went quiet three times: the parsers were really released in between.
    assert info["connections"]["idle_parsers_released"] >= 4, info
