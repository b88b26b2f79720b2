"""Upstream messages (device → CCS → app server) over real TLS: wire shape, ACKs, redelivery,
flow control, spreading over a sender's connections, draining, TTL expiry and tolerance of
app servers that never ACK (spec §1.7, §4, §5).

Devices are `ccs-emulator device` processes (upstream through their stdin command); app
servers are slixmpp (ccs_support/upstream.py runs it on a thread of its own) or, where the
exact bytes matter, the raw TLS client. aiofcm is not used here: it drops every incoming
message without "message_type" ack/nack, so it can neither see nor ACK upstream traffic.

Synchronisation never relies on sleeping for the server: `barrier()` sends a downstream
message the server must NACK and waits for that NACK — stanzas on one connection are handled
in order, so every ACK sent before it has been processed. The only fixed waits are short
"nothing more arrives" windows (`settle`) after a state the admin API has confirmed, and one
commit window before a SIGKILL (an ACK's removal is committed asynchronously).
"""

from __future__ import annotations

import json
import signal
import time
from types import SimpleNamespace

import pytest

from ccs_support import list_connections, new_key, new_sender_id, register_device, store_sync
from ccs_support.upstream import (
    DRAINING_EXACT, UPSTREAM_HEAD, UPSTREAM_TAIL, RawAppServer, RawDevice, SlixAppServer, advance_clock,
    connection_id, drain, expect_sent, outbound_ids, send_many, send_upstream, sender_connections,
    settle, start_device, wait_until,
)
from ccs_support.xmpp import BIND_NS, SASL_NS, STREAM_NS, STREAMS_NS, XmppConn, plain_payload, q

APP = "com.example.upstream"
QUIET = 1.0   # seconds of "nothing more arrives" after a state the admin API confirmed


@pytest.fixture
def apps():
    """Factory for app-server clients (slixmpp or raw); every one is closed at teardown."""
    made = []

    def slix(srv, sender, key, **kw):
        c = SlixAppServer(srv.ccs_port, srv.ca_cert, sender, key, **kw)
        made.append(c)
        return c

    def raw(srv, sender, key, **kw):
        c = RawAppServer(srv.ccs_port, srv.ca_cert, sender, key, **kw)
        made.append(c)
        return c

    yield SimpleNamespace(slix=slix, raw=raw)
    for c in made:
        try:
            c.close()
        except Exception:
            pass


def ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def distinct(recs) -> set:
    return {r.message_id for r in recs}


def wait_outbound(srv, sender, pred, what, timeout=15.0, pump=()) -> dict:
    """Polls /emulator/v1/outbound (message_id → connection_id) for the sender until pred holds."""
    seen: dict = {}

    def check():
        seen.clear()
        seen.update(outbound_ids(srv.http_base, sender))
        return pred(seen)

    wait_until(check, timeout, lambda: f"{what() if callable(what) else what}; outbound now: {seen}", pump=pump)
    return seen


# ---- 1. wire shape ---------------------------------------------------------------------------------

def test_upstream_wire_shape_is_exact(server, devices, apps):
    sender, key = new_sender_id(), new_key()
    app = apps.raw(server, sender, key)
    dev, token = start_device(devices, server, APP, [sender])

    send_upstream(dev, "shape-ttl", {"b": "2", "a": "1"}, time_to_live=600)
    send_upstream(dev, "shape-plain", {"k": "v"})
    send_upstream(dev, "shape-chars", {"x": 'a <b> & "c" \'d\' \u00e9\u20ac'})
    expect_sent(dev, ["shape-ttl", "shape-plain", "shape-chars"])
    app.wait_upstream(3)

    by_id = {r.message_id: r for r in app.upstream}
    head = UPSTREAM_HEAD.format(sender=sender)
    for r in by_id.values():
        # Attribute order and quoting exactly so (the PHP client's regular expression), no whitespace.
        assert r.raw.startswith(head), f"upstream wrapper differs:\n got: {r.raw[:200]}\nwant: {head}"
        assert r.raw.endswith(UPSTREAM_TAIL), r.raw

    # Documented key order (docs/protocol-choices.md): category, data, message_id, from[, time_to_live].
    assert by_id["shape-ttl"].text == (
        f'{{"category":"{APP}","data":{{"a":"1","b":"2"}},"message_id":"shape-ttl",'
        f'"from":"{token}","time_to_live":600}}'), by_id["shape-ttl"].raw
    assert by_id["shape-plain"].text == (
        f'{{"category":"{APP}","data":{{"k":"v"}},"message_id":"shape-plain","from":"{token}"}}'), \
        by_id["shape-plain"].raw
    assert by_id["shape-chars"].payload == {
        "category": APP, "data": {"x": 'a <b> & "c" \'d\' \u00e9\u20ac'}, "message_id": "shape-chars",
        "from": token}, by_id["shape-chars"].raw
    assert "<b>" not in by_id["shape-chars"].raw, "'<' inside the JSON must be escaped in XML text"


@pytest.mark.parametrize("via", ["device_cli", "raw_device"])
def test_non_string_data_values_are_dropped(server, devices, apps, via):
    """Only string data values reach the app server: the CLI filters them as the client library
    does, and the server drops them too when a device sends them anyway (raw device channel)."""
    sender, key = new_sender_id(), new_key()
    app = apps.raw(server, sender, key)
    data = {"s": "kept", "n": 5, "f": 1.5, "b": True, "z": None, "o": {"x": "y"}, "l": ["a"], "e": ""}
    if via == "device_cli":
        dev, token = start_device(devices, server, APP, [sender])
        send_upstream(dev, "typed-1", data)
        expect_sent(dev, ["typed-1"])
    else:
        reg = register_device(server.http_base, APP, [sender])
        token = reg["token"]
        d = RawDevice(server, reg)
        try:
            answer = d.upstream({"to": f"{sender}@gcm.googleapis.com", "message_id": "typed-1", "data": data})
        finally:
            d.close()
        assert answer == {"message_type": "sent", "message_id": "typed-1"}, answer
    r = app.wait_upstream_id("typed-1")
    assert r.payload["data"] == {"s": "kept", "e": ""}, r.raw
    assert r.payload["from"] == token and r.payload["category"] == APP, r.raw


# ---- 2. ACKs --------------------------------------------------------------------------------------

def test_ack_stops_redelivery_and_duplicate_acks_are_harmless(server, devices, apps):
    sender, key = new_sender_id(), new_key()
    app = apps.slix(server, sender, key)
    conn = connection_id(server.http_base, app.jid)
    dev, token = start_device(devices, server, APP, [sender])

    send_many(dev, ["ack-1", "ack-2"])
    app.wait_upstream(2)
    assert {r.payload["from"] for r in app.upstream} == {token}
    wait_outbound(server, sender, lambda o: o == {"ack-1": conn, "ack-2": conn},
                  "both messages should be out on the connection, unACKed")

    app.ack(token, "ack-1")
    app.barrier()
    assert outbound_ids(server.http_base, sender) == {"ack-2": conn}, "ACK did not remove ack-1"

    # The same ACK twice more: no answer, no error, the connection stays usable.
    app.ack(token, "ack-1")
    app.ack(token, "ack-1")
    app.barrier()
    assert "ack-1" not in app.responses, f"a duplicate ACK was answered: {app.responses['ack-1']}"
    assert not app.errors and not app.stream_errors and not app.closed, app.summary()
    assert outbound_ids(server.http_base, sender) == {"ack-2": conn}

    app.ack(token, "ack-2")
    app.barrier()
    assert outbound_ids(server.http_base, sender) == {}

    send_many(dev, ["ack-3"])
    app.wait_upstream_id("ack-3")
    settle([app], QUIET)
    assert app.upstream_ids() == ["ack-1", "ack-2", "ack-3"], "an ACKed message was sent again"


MALFORMED_ACKS = {
    "no_message_id": lambda token, mid: {"to": token, "message_type": "ack"},
    "message_id_not_string": lambda token, mid: {"to": token, "message_id": 12345, "message_type": "ack"},
    "message_id_object": lambda token, mid: {"to": token, "message_id": {"id": mid}, "message_type": "ack"},
    "to_not_string": lambda token, mid: {"to": 42, "message_id": mid, "message_type": "ack"},
}


@pytest.mark.parametrize("case", sorted(MALFORMED_ACKS))
def test_malformed_ack_gets_nack_bad_ack(server, devices, apps, case):
    sender, key = new_sender_id(), new_key()
    app = apps.raw(server, sender, key)
    conn = connection_id(server.http_base, app.jid)
    dev, token = start_device(devices, server, APP, [sender])
    send_many(dev, ["bad-ack-1"])
    app.wait_upstream_id("bad-ack-1")

    app.send_json(MALFORMED_ACKS[case](token, "bad-ack-1"))
    app.barrier()
    bad = [n for n in app.nacks if n.get("error") == "BAD_ACK"]
    assert bad, (f"no NACK BAD_ACK for a malformed ACK ({case}); got nacks={app.nacks}, "
                 f"stanza errors={[e.raw for e in app.errors]}")
    assert not app.errors, f"a stanza error instead of / besides the NACK: {[e.raw for e in app.errors]}"
    assert bad[0].get("message_type") == "nack"
    if case == "message_id_not_string":
        assert bad[0].get("message_id") == "12345", bad[0]  # the value's JSON text
    elif case == "to_not_string":
        assert bad[0].get("message_id") == "bad-ack-1", bad[0]
    # Still pending on this connection, and a proper ACK still works.
    assert outbound_ids(server.http_base, sender) == {"bad-ack-1": conn}
    app.ack(token, "bad-ack-1")
    app.barrier()
    assert outbound_ids(server.http_base, sender) == {}


# ---- 3. redelivery ------------------------------------------------------------------------------

@pytest.mark.parametrize("close_how", ["stream_close", "tcp_abort"])
@pytest.mark.parametrize("target", ["other_connection", "next_connection"])
def test_unacked_redelivered_after_connection_closes(server, devices, apps, close_how, target):
    sender, key = new_sender_id(), new_key()
    a = apps.slix(server, sender, key, name="A")
    dev, token = start_device(devices, server, APP, [sender])
    send_many(dev, ["redo-1", "redo-2"])
    first = {r.message_id: r.payload for r in a.wait_upstream(2)}
    a.ack(token, "redo-2")
    a.barrier()

    b = apps.slix(server, sender, key, name="B") if target == "other_connection" else None
    if b is not None:
        connection_id(server.http_base, b.jid)  # registered before A goes away
    if close_how == "stream_close":
        a.disconnect()
    else:
        a.abort()
    if b is None:
        # Nobody to send it to: it waits, on no connection.
        wait_outbound(server, sender, lambda o: o == {"redo-1": None},
                      "redo-1 should wait for a connection after A closed")
        b = apps.slix(server, sender, key, name="C")

    again = b.wait_upstream_id("redo-1", timeout=20)
    assert again.payload == first["redo-1"], "the redelivered copy differs from the first"
    settle([b], QUIET)
    assert b.upstream_ids() == ["redo-1"], f"ACKed redo-2 came back, or redo-1 twice: {b.upstream_ids()}"
    b.ack(token, "redo-1")
    b.barrier()
    assert outbound_ids(server.http_base, sender) == {}


def test_unacked_redelivered_after_ack_timeout_wall_clock(start_server, devices, apps):
    srv = start_server(extra_args=["--ack-timeout", "2"])
    sender, key = new_sender_id(), new_key()
    app = apps.slix(srv, sender, key)
    dev, token = start_device(devices, srv, APP, [sender])
    send_many(dev, ["slow-1"])
    app.wait_upstream_id("slow-1")
    again = app.wait_upstream_id("slow-1", count=2, timeout=20)  # same connection: the only one
    assert again.payload == app.upstream[0].payload
    app.ack(token, "slow-1")
    app.barrier()
    assert outbound_ids(srv.http_base, sender) == {}
    n = len(app.upstream)
    settle([app], 3.5)  # > the ACK timeout: an ACKed message must not come back
    assert len(app.upstream) == n, f"sent again after its ACK: {app.upstream_ids()}"


def test_unacked_redelivered_after_ack_timeout_virtual_clock(start_server, devices, apps):
    srv = start_server(extra_args=["--clock", "virtual", "--ack-timeout", "30"])
    sender, key = new_sender_id(), new_key()
    app = apps.slix(srv, sender, key)
    dev, token = start_device(devices, srv, APP, [sender])
    send_many(dev, ["virt-1", "virt-2"])
    app.wait_upstream(2)
    app.ack(token, "virt-2")
    app.barrier()

    advance_clock(srv.http_base, 20)
    settle([app], QUIET)
    assert app.upstream_ids() == ["virt-1", "virt-2"], "redelivered before the ACK timeout"

    advance_clock(srv.http_base, 11)  # 31 s > 30 s
    app.wait_upstream_id("virt-1", count=2, timeout=15)
    settle([app], QUIET)
    assert sorted(app.upstream_ids()) == ["virt-1", "virt-1", "virt-2"], "the ACKed message came back too"

    app.ack(token, "virt-1")
    app.barrier()
    assert outbound_ids(srv.http_base, sender) == {}
    advance_clock(srv.http_base, 100)
    settle([app], QUIET)
    assert len(app.upstream) == 3, f"sent again after its ACK: {app.upstream_ids()}"


# ---- 4. ACKs are per connection --------------------------------------------------------------------

def test_ack_on_another_connection_leaves_message_pending(server, devices, apps):
    sender, key = new_sender_id(), new_key()
    a = apps.slix(server, sender, key, name="A")
    conn_a = connection_id(server.http_base, a.jid)
    dev, token = start_device(devices, server, APP, [sender])
    send_many(dev, ["per-conn-1"])
    a.wait_upstream_id("per-conn-1")

    b = apps.slix(server, sender, key, name="B")
    connection_id(server.http_base, b.jid)
    b.ack(token, "per-conn-1")       # B never received it
    b.barrier()
    assert outbound_ids(server.http_base, sender) == {"per-conn-1": conn_a}, \
        "an ACK on another connection removed the message"

    # It is still A's: when A goes away it comes to B, and B's ACK of its own copy counts.
    a.disconnect()
    b.wait_upstream_id("per-conn-1", timeout=20)
    b.ack(token, "per-conn-1")
    b.barrier()
    assert outbound_ids(server.http_base, sender) == {}


# ---- 5. flow control ------------------------------------------------------------------------------

def test_at_most_100_unacked_per_connection(server, devices, apps):
    sender, key = new_sender_id(), new_key()
    app = apps.slix(server, sender, key)
    conn = connection_id(server.http_base, app.jid)
    dev, token = start_device(devices, server, APP, [sender])
    all_ids = ids("win", 150)
    send_many(dev, all_ids, timeout=50)

    app.wait_upstream(100, timeout=30)
    o = wait_outbound(server, sender, lambda o: len(o) == 150, "all 150 should be stored")
    settle([app], QUIET)
    assert len(app.upstream) == 100, f"{len(app.upstream)} unACKed upstream messages on one connection"
    assert len(distinct(app.upstream)) == 100
    o = outbound_ids(server.http_base, sender)
    assert sum(1 for c in o.values() if c == conn) == 100 and sum(1 for c in o.values() if c is None) == 50, o

    app.ack_all(app.upstream[:10])
    app.wait_upstream(110, timeout=20)
    app.barrier()
    settle([app], QUIET)
    assert len(app.upstream) == 110, f"after 10 ACKs: {len(app.upstream)} arrived (want 110)"
    assert len(distinct(app.upstream)) == 110
    o = outbound_ids(server.http_base, sender)
    assert len(o) == 140 and sum(1 for c in o.values() if c == conn) == 100, o


def test_max_unacked_option(start_server, devices, apps):
    srv = start_server(extra_args=["--max-unacked", "7"])
    sender, key = new_sender_id(), new_key()
    app = apps.slix(srv, sender, key)
    dev, token = start_device(devices, srv, APP, [sender])
    send_many(dev, ids("small", 20))
    app.wait_upstream(7)
    wait_outbound(srv, sender, lambda o: len(o) == 20, "all 20 should be stored")
    settle([app], QUIET)
    assert len(app.upstream) == 7, f"--max-unacked 7: {len(app.upstream)} unACKed arrived"
    app.ack_all(app.upstream[:3])
    app.wait_upstream(10)
    app.barrier()
    settle([app], QUIET)
    assert len(app.upstream) == 10 and len(distinct(app.upstream)) == 10, app.upstream_ids()


def test_receipts_share_the_upstream_window(start_server, devices, apps):
    """Window 10 = unACKed upstream messages + delivery receipts together. Receipts may be ACKed
    with or without their "dr2:" prefix."""
    srv = start_server(extra_args=["--max-unacked", "10"])
    sender, key = new_sender_id(), new_key()
    app = apps.slix(srv, sender, key)
    conn = connection_id(srv.http_base, app.jid)
    dev, token = start_device(devices, srv, APP, [sender])
    send_many(dev, ids("mix", 6))
    app.wait_upstream(6)

    for i in range(8):
        app.send_json({"to": token, "message_id": f"rcpt-{i}", "data": {"i": str(i)},
                       "delivery_receipt_requested": True})
    for i in range(8):
        assert app.response(f"rcpt-{i}").get("message_type") == "ack"
    got = dev.messages(quiet=QUIET, timeout=20, until=lambda ms: len(ms) >= 8)
    assert sorted(m["data"]["i"] for m in got) == [str(i) for i in range(8)], got
    # The device ACKed all 8: 8 receipts exist, but only 4 fit next to the 6 upstream messages.
    wait_outbound(srv, sender, lambda o: len(o) == 14, "6 upstream + 8 receipts should be outbound", pump=[app])
    app.wait(lambda: len(app.receipts) >= 4, 15, "4 receipts")
    settle([app], QUIET)
    assert len(app.receipts) == 4 and len(app.upstream) == 6, \
        f"window 10 with 6 upstream unACKed: {len(app.receipts)} receipts arrived"
    o = outbound_ids(srv.http_base, sender)
    assert sum(1 for c in o.values() if c == conn) == 10, o
    r0 = app.receipts[0].payload
    assert r0["message_id"].startswith("dr2:rcpt-") and r0["from"] == "gcm.googleapis.com", r0
    assert r0["data"]["message_status"] == "MESSAGE_SENT_TO_DEVICE" and r0["data"]["device_registration_id"] == token, r0

    app.ack_all(app.upstream)
    app.wait(lambda: len(app.receipts) >= 8, 15, "the other 4 receipts after ACKing the upstream")
    assert sorted(r.message_id for r in app.receipts) == sorted(f"dr2:rcpt-{i}" for i in range(8))
    for n, r in enumerate(app.receipts):
        mid = r.message_id if n % 2 == 0 else r.message_id[len("dr2:"):]
        app.send_json({"to": "gcm.googleapis.com", "message_id": mid, "message_type": "ack"})
    app.barrier()
    assert outbound_ids(srv.http_base, sender) == {}, "receipt ACKs (with and without dr2:) not all taken"


def test_upstream_acks_do_not_count_against_downstream_window(start_server, devices, apps):
    """With 100 upstream unACKed on the connection, and while it sends 100 ACKs, the app server's
    downstream messages are still ACKed. The server runs with --max-pending 3 --over-limit nack,
    so anything counted against the downstream window would show as NACK SERVICE_UNAVAILABLE."""
    srv = start_server(extra_args=["--max-pending", "3", "--over-limit", "nack"])
    sender, key = new_sender_id(), new_key()
    app = apps.raw(srv, sender, key)
    dev, token = start_device(devices, srv, APP, [sender])
    send_many(dev, ids("fc", 120), timeout=50)
    app.wait_upstream(100, timeout=30)
    wait_outbound(srv, sender, lambda o: len(o) == 120, "all 120 should be stored")

    # 100 unACKed upstream: downstream still goes through (one at a time, within --max-pending).
    for i in range(5):
        resp = app.downstream(token, f"down-a-{i}")
        assert resp.get("message_type") == "ack", f"downstream with 100 upstream unACKed: {resp}"

    # 100 ACKs and then 3 downstream messages in one write.
    batch = "".join(
        f'<message id=""><gcm xmlns="google:mobile:data">'
        f'{json.dumps({"to": token, "message_id": r.message_id, "message_type": "ack"})}</gcm></message>'
        for r in app.upstream[:100])
    batch += "".join(
        f'<message id=""><gcm xmlns="google:mobile:data">'
        f'{json.dumps({"to": token, "message_id": f"down-b-{i}", "data": {"i": str(i)}})}</gcm></message>'
        for i in range(3))
    app.conn.send(batch)
    for i in range(3):
        resp = app.response(f"down-b-{i}")
        assert resp.get("message_type") == "ack", f"downstream after 100 upstream ACKs: {resp}"
    app.wait_upstream(120, timeout=20)  # the ACKs freed the upstream window
    assert len(distinct(app.upstream)) == 120

    # The limit is live (so the checks above could fail): 20 downstream in one write overflow it.
    over = "".join(
        f'<message id=""><gcm xmlns="google:mobile:data">'
        f'{json.dumps({"to": token, "message_id": f"down-c-{i}", "data": {"i": str(i)}})}</gcm></message>'
        for i in range(20))
    app.conn.send(over)
    answers = [app.response(f"down-c-{i}") for i in range(20)]
    assert any(a.get("error") == "SERVICE_UNAVAILABLE" for a in answers), \
        f"--max-pending 3 --over-limit nack never NACKed 20 simultaneous messages: {answers}"


# ---- 6. spreading over a sender's connections ---------------------------------------------------

def test_spread_evenly_over_three_connections(server, devices, apps):
    sender, key = new_sender_id(), new_key()
    conns = [apps.slix(server, sender, key, name=n) for n in "ABC"]
    for c in conns:
        connection_id(server.http_base, c.jid)
    dev, token = start_device(devices, server, APP, [sender])
    send_many(dev, ids("fair", 60))
    wait_until(lambda: sum(len(c.upstream) for c in conns) >= 60, 30,
               lambda: f"counts {[len(c.upstream) for c in conns]}", pump=conns)
    settle(conns, QUIET)
    counts = [len(c.upstream) for c in conns]
    assert counts == [20, 20, 20], f"60 unACKed messages over 3 connections: {counts}"
    got = [mid for c in conns for mid in c.upstream_ids()]
    assert sorted(got) == sorted(ids("fair", 60)), "messages lost or duplicated"


def test_silent_connection_does_not_starve_the_others(start_server, devices, apps):
    """Window 10. The silent connection first fills its window alone; then two connections that
    ACK everything join, and all further traffic flows through them."""
    srv = start_server(extra_args=["--max-unacked", "10"])
    sender, key = new_sender_id(), new_key()
    silent = apps.slix(srv, sender, key, name="silent")
    conn_silent = connection_id(srv.http_base, silent.jid)
    dev, token = start_device(devices, srv, APP, [sender])
    send_many(dev, ids("stuck", 12))
    silent.wait_upstream(10)
    wait_outbound(srv, sender, lambda o: len(o) == 12, "all 12 should be stored")
    settle([silent], QUIET)
    assert len(silent.upstream) == 10, f"window 10, got {len(silent.upstream)}"

    b = apps.slix(srv, sender, key, name="B", auto_ack=True)
    c = apps.slix(srv, sender, key, name="C", auto_ack=True)
    conn_b, conn_c = (connection_id(srv.http_base, x.jid) for x in (b, c))
    flowing = ids("flow", 60)
    send_many(dev, flowing)
    everyone = [silent, b, c]
    want = (set(ids("stuck", 12)) - distinct(silent.upstream)) | set(flowing)  # the 2 queued + 60 new
    wait_until(lambda: distinct(b.upstream) | distinct(c.upstream) >= want, 30,
               lambda: f"silent={len(silent.upstream)} B={len(b.upstream)} C={len(c.upstream)}", pump=everyone)
    o = wait_outbound(srv, sender, lambda o: set(o) == distinct(silent.upstream),
                      lambda: f"only the silent connection's 10 should be left (silent={conn_silent} "
                              f"B={conn_b} C={conn_c}; B nacks={b.nacks} C nacks={c.nacks})", pump=everyone)
    settle(everyone, QUIET)
    assert len(silent.upstream) == 10, f"silent connection got {len(silent.upstream)} (window 10)"
    assert set(o.values()) == {conn_silent}, o
    acked = distinct(b.upstream) | distinct(c.upstream)
    assert acked == want and not acked & distinct(silent.upstream), "lost, or sent to two connections"
    assert b.upstream and c.upstream, f"one ACKing connection got nothing: B={len(b.upstream)} C={len(c.upstream)}"


# ---- 7. draining ----------------------------------------------------------------------------------

def test_drain_connection(start_server, devices, apps):
    srv = start_server(extra_args=["--drain-grace", "3"])
    sender, key = new_sender_id(), new_key()
    a = apps.raw(srv, sender, key, name="A")
    conn_a = connection_id(srv.http_base, a.jid)
    dev, token = start_device(devices, srv, APP, [sender])
    send_many(dev, ["dr-1", "dr-2"])
    a.wait_upstream(2)
    b = apps.slix(srv, sender, key, name="B")
    conn_b = connection_id(srv.http_base, b.jid)

    drain(srv.http_base, conn_a)
    a.wait(lambda: bool(a.controls), 10, "waiting for CONNECTION_DRAINING")
    assert a.controls[0].raw == DRAINING_EXACT, a.controls[0].raw
    assert [r.raw for r in a.received][-1] == DRAINING_EXACT

    # Downstream on the draining connection: NACK CONNECTION_DRAINING.
    resp = a.downstream(token, "late-down")
    assert resp.get("message_type") == "nack" and resp.get("error") == "CONNECTION_DRAINING", resp

    # New upstream goes to B only.
    send_many(dev, ["dr-3"])
    b.wait_upstream_id("dr-3")

    # ACKs on the draining connection still count.
    a.ack(token, "dr-1")
    a.barrier()
    assert outbound_ids(srv.http_base, sender) == {"dr-2": conn_a, "dr-3": conn_b}

    # The emulator closes A after the grace period; its unACKed dr-2 moves to B.
    a.wait_closed(20)
    b.wait_upstream_id("dr-2", timeout=20)
    assert a.upstream_ids() == ["dr-1", "dr-2"], f"A got upstream while draining: {a.upstream_ids()}"
    assert sorted(b.upstream_ids()) == ["dr-2", "dr-3"], b.upstream_ids()
    assert [c["id"] for c in sender_connections(srv.http_base, sender)] == [conn_b]
    b.ack(token, "dr-2")
    b.ack(token, "dr-3")
    b.barrier()
    assert outbound_ids(srv.http_base, sender) == {}


def test_sigterm_drains_every_connection_before_exit(start_server, apps):
    srv = start_server()
    clients = [apps.raw(srv, new_sender_id(), new_key(), name=f"raw{i}") for i in range(2)]
    s, k = new_sender_id(), new_key()
    clients.append(apps.raw(srv, s, k, name="raw-same-sender-1"))
    clients.append(apps.raw(srv, s, k, name="raw-same-sender-2"))
    for c in clients:
        c.barrier()
    srv.proc.send_signal(signal.SIGTERM)
    for c in clients:
        c.wait_closed(15)   # the client closes its socket once the server ended the stream
    try:
        rc = srv.proc.wait(15)
    finally:
        srv.stop()
    for c in clients:
        assert c.controls, f"{c.name}: no CONNECTION_DRAINING before the server exited; " \
                           f"received: {c.conn.received[-500:]!r}"
        assert c.controls[0].raw == DRAINING_EXACT, c.controls[0].raw
    assert rc == 0, f"exit status after SIGTERM: {rc}\n{srv.stderr_tail()}"


# ---- 8. TTL expiry --------------------------------------------------------------------------------

@pytest.mark.parametrize("app_server", ["none", "silent"])
def test_upstream_ttl_expiry(start_server, devices, apps, app_server):
    # A long ACK timeout: advancing past the TTL must not also redeliver to the silent connection.
    srv = start_server(extra_args=["--clock", "virtual", "--ack-timeout", "3600"])
    sender, key = new_sender_id(), new_key()
    silent = apps.slix(srv, sender, key, name="silent") if app_server == "silent" else None
    dev, token = start_device(devices, srv, APP, [sender])
    send_upstream(dev, "ttl-60", {"a": "b"}, time_to_live=60)
    send_upstream(dev, "ttl-long", {"a": "b"})  # default TTL (4 weeks)
    expect_sent(dev, ["ttl-60", "ttl-long"])
    wait_outbound(srv, sender, lambda o: set(o) == {"ttl-60", "ttl-long"}, "both should be stored")
    if silent:
        silent.wait_upstream(2)

    advance_clock(srv.http_base, 30)
    early = dev.drain(QUIET, predicate=lambda e: e.get("event") == "send_error")
    assert not early, f"send_error before the TTL ran out: {early}"
    assert set(outbound_ids(srv.http_base, sender)) == {"ttl-60", "ttl-long"}

    advance_clock(srv.http_base, 31)  # 61 s > 60 s
    ev = dev.expect(lambda e: e.get("event") == "send_error" and e.get("message_id") == "ttl-60", 20)
    assert ev.get("error") == "TTL_EXCEEDED", ev
    assert set(outbound_ids(srv.http_base, sender)) == {"ttl-long"}
    assert not dev.drain(0.3, predicate=lambda e: e.get("event") == "send_error"), "more than one send_error"

    # An app server connecting now gets only what is still alive.
    late = apps.slix(srv, sender, key, name="late")
    watch = [late] + ([silent] if silent else [])
    if silent:
        silent.disconnect()  # hands back what it holds: only ttl-long
    late.wait_upstream_id("ttl-long", timeout=20)
    settle(watch, QUIET)
    assert late.upstream_ids() == ["ttl-long"], late.upstream_ids()
    if silent:
        assert silent.upstream_ids() in (["ttl-60", "ttl-long"], ["ttl-long", "ttl-60"]), silent.upstream_ids()


def test_upstream_ttl_zero_is_delivered_or_reported(start_server, devices, apps):
    """time_to_live 0 with an app server connected: it either reaches the app server now, or the
    device gets send_error TTL_EXCEEDED — it is never dropped without a word, and what is gone
    from /emulator/v1/outbound stays gone after a restart."""
    srv = start_server()
    sender, key = new_sender_id(), new_key()
    app = apps.raw(srv, sender, key)
    dev, token = start_device(devices, srv, APP, [sender])
    send_upstream(dev, "ttl-zero", {"a": "b"}, time_to_live=0)
    expect_sent(dev, ["ttl-zero"])
    errors: list = []

    def outcome() -> bool:
        errors.extend(dev.drain(0.05, predicate=lambda e: e.get("event") == "send_error"))
        return bool(app.upstream) or bool(errors)

    # The wall-clock tick runs every second: a few seconds bound the wait.
    wait_until(outcome, 6, lambda: (f"upstream with time_to_live 0 neither reached the app server nor "
                                    f"produced a send_error; outbound now: {outbound_ids(srv.http_base, sender)}"),
               pump=[app])
    if app.upstream:
        assert app.upstream_ids() == ["ttl-zero"] and app.upstream[0].payload.get("time_to_live") == 0
        app.ack(token, "ttl-zero")
        app.barrier()
    else:
        assert errors[0] == {"event": "send_error", "message_id": "ttl-zero", "error": "TTL_EXCEEDED"}, errors
    assert outbound_ids(srv.http_base, sender) == {}
    store_sync(srv.http_base)  # the removal is on disk (ACKs and expiry are committed asynchronously)
    app.close()
    srv.kill()
    srv.start()
    assert outbound_ids(srv.http_base, sender) == {}, "the message came back after a restart"


# ---- 9. tolerance --------------------------------------------------------------------------------

def test_never_acking_app_server_does_not_block_other_senders(server, devices, apps):
    s1, k1 = new_sender_id(), new_key()
    s2, k2 = new_sender_id(), new_key()
    silent = apps.slix(server, s1, k1, name="silent")
    other = apps.slix(server, s2, k2, name="other")
    dev1, tok1 = start_device(devices, server, APP, [s1])
    dev2, tok2 = start_device(devices, server, APP, [s2])

    send_many(dev1, ids("hog", 130), timeout=50)
    silent.wait_upstream(100, timeout=30)

    send_many(dev2, ["fine-1", "fine-2", "fine-3"])
    other.wait_upstream(3)
    assert sorted(other.upstream_ids()) == ["fine-1", "fine-2", "fine-3"]
    other.ack_all(other.upstream)
    resp = other.downstream(tok2, "down-other")
    assert resp.get("message_type") == "ack", resp
    m = dev2.expect(lambda e: e.get("event") == "message" and e["message"]["data"].get("m") == "down-other", 20)
    assert m["message"]["from"] == s2
    # The silent sender's own downstream still works, and it never got past its window.
    resp = silent.downstream(tok1, "down-silent")
    assert resp.get("message_type") == "ack", resp
    settle([silent, other], 0.5)
    assert len(silent.upstream) == 100, len(silent.upstream)
    assert outbound_ids(server.http_base, s2) == {}


def _login_until_bound(srv, sender, key) -> XmppConn:
    c = XmppConn(srv.ccs_port, srv.ca_cert)
    c.open_stream()
    res = c.auth_plain(plain_payload("", f"{sender}@gcm.googleapis.com", key))
    assert res.tag == q(SASL_NS, "success"), res.raw
    c.open_stream()
    c.send(f'<iq type="set" id="bind_1"><bind xmlns="{BIND_NS}"><resource>extra</resource></bind></iq>')
    return c


def test_max_connections_per_sender(start_server, apps):
    srv = start_server(extra_args=["--max-connections", "2"])
    sender, key = new_sender_id(), new_key()
    a = apps.raw(srv, sender, key, name="A")
    b = apps.raw(srv, sender, key, name="B")
    for x in (a, b):
        connection_id(srv.http_base, x.jid)

    c = _login_until_bound(srv, sender, key)
    try:
        seen = c.wait_closed(15)
        error = [i for i in c.items if i.kind == "element" and i.tag == q(STREAM_NS, "error")]
        if not error:  # wait_closed does not cut items: look at the raw text
            assert "<stream:error>" in seen and f'<resource-constraint xmlns="{STREAMS_NS}"/>' in seen, \
                f"third connection of a sender with --max-connections 2: {seen[-800:]!r}"
        else:
            assert error[0].elem.find(q(STREAMS_NS, "resource-constraint")) is not None, error[0].raw
    finally:
        c.close()
    assert len(sender_connections(srv.http_base, sender)) == 2, list_connections(srv.http_base)

    # The two bound ones are unaffected; a slot freed by a close can be used again.
    a.barrier()
    b.barrier()
    other = apps.raw(srv, new_sender_id(), new_key(), name="other-sender")  # the limit is per sender
    other.barrier()
    b.close()
    wait_until(lambda: len(sender_connections(srv.http_base, sender)) == 1, 10, "B still listed after close")
    d = apps.raw(srv, sender, key, name="D")
    d.barrier()
    assert not d.stream_errors and not d.closed


# ---- device CLI offline cache -------------------------------------------------------------------

def test_offline_device_caches_20_upstream_then_sends(server, devices, apps):
    sender, key = new_sender_id(), new_key()
    app = apps.slix(server, sender, key)
    dev, token = start_device(devices, server, APP, [sender])
    dev.send({"go": "offline"})
    dev.expect("offline", timeout=20)
    for mid in ids("cached", 21):
        send_upstream(dev, mid)
    err = dev.expect(lambda e: e.get("event") == "send_error", 10)
    assert err == {"event": "send_error", "message_id": "cached-20", "error": "TOO_MANY_PENDING_MESSAGES"}, err
    settle([app], 0.5)
    assert not app.upstream, "upstream arrived while the device was offline"

    dev.send({"go": "online"})
    dev.expect("connected", timeout=20)
    expect_sent(dev, ids("cached", 20))
    app.wait_upstream(20)
    settle([app], QUIET)
    assert sorted(app.upstream_ids()) == sorted(ids("cached", 20)), app.upstream_ids()
