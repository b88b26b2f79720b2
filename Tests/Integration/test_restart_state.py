"""State survives a crash: SIGKILL the server (virtual clock) and restart it on the same data dir;
the admin API's views of queues (collapse replacements included), device states, trays, pending
receipts and the virtual clock are exactly what they were, and the restored state is the one the
engine acts on (Doze still holds, expiry still runs on the saved time, the receipt is sent again).
"""

from __future__ import annotations

import copy

from ccs_support import EmulatorServer, XmppConn, list_devices, new_key, new_sender_id, register_device
from ccs_support.semantics import (
    VIRTUAL, advance, app_server, assert_not_printed, barrier, clock, data_msg, device_view, go, is_msg,
    outbound, post, queue_of, queued_app_ids, quote_token, send_ack, set_state, start_device, tray,
    wait_device, wait_outbound,
)

APP = "com.example.restart"


def snapshot(base: str, tokens: list[str]) -> dict:
    """Everything the admin API shows about these devices, the outbound list and the clock.
    connection_id is left out of outbound items: connections do not survive a restart."""
    out = []
    for o in outbound(base):
        o = copy.deepcopy(o)
        o.pop("connection_id", None)
        out.append(o)
    listed = {d["token"]: d for d in list_devices(base)}
    return {
        "clock": clock(base),
        "devices": {t: device_view(base, t) for t in tokens},
        "listed": {t: listed.get(t) for t in tokens},
        "trays": {t: tray(base, t) for t in tokens},
        "outbound": sorted(out, key=lambda o: (o["sender_id"], o["message_id"])),
    }


def diff(before: dict, after: dict, path: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for k in sorted(set(before) | set(after), key=str):
            if k not in after:
                out.append(f"{path}/{k}: missing after restart (was {before[k]!r})")
            elif k not in before:
                out.append(f"{path}/{k}: new after restart ({after[k]!r})")
            else:
                out += diff(before[k], after[k], f"{path}/{k}")
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in diff(b, a, f"{path}[{i}]")]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"]


def test_state_after_sigkill_is_exactly_as_before(tmp_path, devices):
    srv = EmulatorServer(tmp_path / "data", log_dir=tmp_path, extra_args=VIRTUAL)
    c = None
    try:
        srv.start()
        base = srv.http_base
        sender, key = new_sender_id(), new_key()
        c = app_server(srv, sender, key)

        # D1: never connected; a queue with collapse replacements, a notification collapsed on the
        # package, plain messages and one that expires soon; in the background and dozing.
        d1 = register_device(base, APP, [sender])["token"]
        normal, high = {"priority": "normal"}, {"priority": "high"}
        for mid, extra in [("a1", {"collapse_key": "a", **normal}), ("b1", {"collapse_key": "b", **normal}),
                           ("p1", normal), ("a2", {"collapse_key": "a", **normal}), ("p2", normal),
                           ("n1", {"notification": {"title": "one"}, **high}),
                           ("n2", {"notification": {"title": "two"}, **high}),
                           ("e1", {"time_to_live": 100, **normal})]:
            send_ack(c, data_msg(d1, mid, **extra))
        assert queued_app_ids(base, d1) == ["b1", "p1", "a2", "p2", "n2", "e1"], queue_of(base, d1)
        set_state(base, d1, {"background": True})
        set_state(base, d1, {"idle": True})

        # D2: uninstalled (its queue dropped).
        d2 = register_device(base, APP, [sender])["token"]
        send_ack(c, data_msg(d2, "gone"))
        status, body = post(base, f"devices/{quote_token(d2)}/uninstall")
        assert status == 200, (status, body)

        # D3: a real device: a receipt it caused is in flight, unACKed, on the app server's connection;
        # a notification sits in its tray; then it goes offline, in the background.
        dev, d3 = start_device(devices, srv, APP, [sender])
        send_ack(c, data_msg(d3, "r1", delivery_receipt_requested=True))
        dev.expect(is_msg("r1"), timeout=20)
        receipt, _ = c.wait_gcm("dr2:r1", timeout=15)
        go(dev, "background")
        send_ack(c, data_msg(d3, "t1", notification={"title": "tray"}))
        dev.expect(is_msg("t1", event="notification"), timeout=20)
        wait_device(base, d3, lambda v: v["queue"] == [], "D3 queue empty")
        assert len(tray(base, d3)) == 1
        go(dev, "offline")
        wait_device(base, d3, lambda v: v["online"] is False, "D3 offline")
        dev.close()

        advance(base, 50)
        before = snapshot(base, [d1, d2, d3])
        assert before["clock"]["kind"] == "virtual"
        assert [o["message_id"] for o in before["outbound"]] == ["dr2:r1"], before["outbound"]
        assert before["devices"][d1]["state"] == {"foreground": False, "idle": True}
        assert before["devices"][d2]["status"] == "uninstalled" and before["devices"][d2]["queue"] == []
        assert before["devices"][d3]["state"] == {"foreground": False, "idle": False}

        srv.kill()
        assert not srv.alive
        c.close()
        c = None
        srv.start()
        base = srv.http_base

        after = snapshot(base, [d1, d2, d3])
        problems = diff(before, after)
        assert not problems, "state changed across SIGKILL + restart:\n" + "\n".join(problems)

        # The restored state is what the engine uses.
        # 1. The receipt goes to the sender's new connection, and leaves once ACKed.
        #    (It may arrive right after bind, so no session request that would have to come first.)
        c = XmppConn(srv.ccs_port, srv.ca_cert)
        c.login(sender, key, session=False)
        again, _ = c.wait_gcm("dr2:r1", timeout=15)
        assert again == receipt, (again, receipt)
        c.send_gcm({"to": d3, "message_id": "dr2:r1", "message_type": "ack"})
        wait_outbound(base, sender, lambda items: items == [], "receipt ACKed after the restart")

        # 2. Expiry runs on the saved clock: e1 (TTL 100 s, 50 s used before the crash) is still there
        #    after 49 s more, gone after 51 s.
        advance(base, 49)
        assert "e1" in queued_app_ids(base, d1), queue_of(base, d1)
        advance(base, 2)
        assert queued_app_ids(base, d1) == ["b1", "p1", "a2", "p2", "n2"], queue_of(base, d1)

        # 3. D1 is still dozing and in the background: only the high-priority notification comes
        #    (to the tray); the normal ones wait for {"go":"active"}; the replaced ones never come.
        dev1, _ = start_device(devices, srv, APP, [sender], token=d1)
        note = dev1.expect(lambda e: e.get("event") in ("notification", "message"), timeout=20)
        assert note["event"] == "notification" and note["message"]["data"]["n"] == "n2", note
        barrier(c, dev1, d1, "restart-barrier")
        assert_not_printed(dev1, ["a1", "b1", "p1", "a2", "p2", "n1", "e1"])
        go(dev1, "active")
        got = dev1.messages(quiet=1.0, timeout=20, until=lambda ms: len(ms) >= 4)
        assert sorted(m["data"]["n"] for m in got) == ["a2", "b1", "p1", "p2"], got
        barrier(c, dev1, d1, "restart-barrier-2")
        assert_not_printed(dev1, ["a1", "n1", "e1"])

        # 4. D2 stays uninstalled.
        payload, item = c.downstream(data_msg(d2, "after-restart"))
        assert payload.get("message_type") == "nack" and payload.get("error") == "DEVICE_UNREGISTERED", item.raw
    finally:
        if c is not None:
            c.close()
        srv.stop()


def test_virtual_clock_after_sigkill_without_any_advance(tmp_path):
    """A virtual clock that was never advanced still reads the same after a crash: it starts at the
    wall time of the first start and must not jump to the wall time of the restart."""
    srv = EmulatorServer(tmp_path / "data", log_dir=tmp_path, extra_args=VIRTUAL)
    c = None
    try:
        srv.start()
        sender, key = new_sender_id(), new_key()
        token = register_device(srv.http_base, APP, [sender])["token"]
        c = app_server(srv, sender, key)
        send_ack(c, data_msg(token, "q1", time_to_live=60))
        before = clock(srv.http_base)
        queue_before = queue_of(srv.http_base, token)
        assert before["kind"] == "virtual"
        srv.kill()
        c.close()
        c = None
        srv.start()
        after = clock(srv.http_base)
        assert after == before, f"virtual clock changed across SIGKILL: {before} -> {after}"
        assert queue_of(srv.http_base, token) == queue_before
    finally:
        if c is not None:
            c.close()
        srv.stop()
