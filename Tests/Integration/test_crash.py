"""Durability: an ACK is a promise. SIGKILL the server while downstream messages are in flight,
restart it on the same data dir, and every message it ACKed must still reach its device.

The messages are spread over several devices so no device's queue goes past 100 stored
messages (FCM drops a device's whole queue past that; the emulator may emulate it).
"""

from __future__ import annotations

import json
import time

import pytest

from ccs_support import EmulatorServer, XmppConn, get_device, new_key, new_sender_id, register_device
from ccs_support.xmpp import ServerClosed, gcm_stanza

N_MESSAGES = 500
WINDOW = 100          # at most this many downstream messages without ACK/NACK (CCS flow control)
N_DEVICES = 6         # 500 / 6 → at most 84 queued per device
APP = "com.example.crash"


def pump_until_kill(srv: EmulatorServer, c: XmppConn, tokens: list[str], kill_after: int):
    """Sends up to N_MESSAGES keeping ≤ WINDOW unanswered; SIGKILLs the server once kill_after
    ACKs were read, with the window refilled so messages are in flight at that moment."""
    acked: dict[str, int] = {}
    nacked: dict[str, dict] = {}
    inflight: dict[str, int] = {}
    sent = 0

    def refill():
        nonlocal sent
        batch = []
        while sent < N_MESSAGES and len(inflight) < WINDOW:
            mid = f"crash-{sent}"
            batch.append(gcm_stanza({"to": tokens[sent % len(tokens)], "message_id": mid,
                                     "data": {"seq": str(sent)}}, stanza_id=mid))
            inflight[mid] = sent
            sent += 1
        if batch:
            c.send("".join(batch))

    def take(item):
        payload = item.gcm()
        assert payload is not None, f"unexpected stanza: {item!r}"
        mid = payload.get("message_id")
        assert mid in inflight, f"response for unknown/duplicate message_id: {item.raw}"
        seq = inflight.pop(mid)
        if payload.get("message_type") == "ack":
            acked[mid] = seq
        else:
            nacked[mid] = payload

    refill()
    deadline = time.monotonic() + 30
    while len(acked) < kill_after:
        assert time.monotonic() < deadline, f"only {len(acked)} ACKs after 30 s (nacks: {len(nacked)})"
        assert sent < N_MESSAGES or inflight, f"all answered before {kill_after} ACKs: {len(acked)} acked, nacks {list(nacked.values())[:3]}"
        take(c.next_element(timeout=15))
        refill()
    in_flight_at_kill = len(inflight)
    srv.kill()
    # ACKs the server had already written are promises too: read what is left, if anything.
    try:
        while inflight:
            item = c.next_item(timeout=2)
            if item.kind == "element" and item.gcm() is not None:
                take(item)
    except (ServerClosed, AssertionError):
        pass
    return acked, nacked, sent, in_flight_at_kill


@pytest.mark.parametrize("kill_after", [200, 50, 300])
def test_sigkill_loses_no_acked_message(tmp_path, devices, kill_after):
    srv = EmulatorServer(tmp_path / "data", log_dir=tmp_path)
    try:
        srv.start()
        sender, key = new_sender_id(), new_key()
        tokens = [register_device(srv.http_base, APP, [sender])["token"] for _ in range(N_DEVICES)]
        c = XmppConn(srv.ccs_port, srv.ca_cert)
        try:
            c.login(sender, key)
            acked, nacked, sent, in_flight_at_kill = pump_until_kill(srv, c, tokens, kill_after)
        finally:
            c.close()
        assert in_flight_at_kill > 0, "nothing was in flight at the kill"
        assert not srv.alive

        srv.start()  # same data dir, new ports
        devs = [devices(srv, APP, [sender], token=t) for t in tokens]
        for d in devs:
            d.expect("connected", timeout=30)

        delivered: dict[str, list[int]] = {t: [] for t in tokens}
        deadline = time.monotonic() + 40
        last_new = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last_new < 3.0:
            for t, d in zip(tokens, devs):
                got = d.drain(0.05)
                if got:
                    last_new = time.monotonic()
                    delivered[t] += [int(e["message"]["data"]["seq"]) for e in got]

        all_delivered = [s for seqs in delivered.values() for s in seqs]
        acked_seqs = set(acked.values())
        lost = sorted(acked_seqs - set(all_delivered))
        dupes = len(all_delivered) - len(set(all_delivered))
        print(f"\ncrash@{kill_after}: sent={sent} acked={len(acked)} nacked={len(nacked)} "
              f"in_flight_at_kill={in_flight_at_kill} delivered_after_restart={len(all_delivered)} "
              f"(unique {len(set(all_delivered))}, duplicates {dupes}) lost={len(lost)}")
        assert not lost, f"{len(lost)} ACKed messages lost after SIGKILL: seqs {lost[:50]}"
        # Integrity: nothing delivered that was not sent, nor to the wrong device.
        for i, t in enumerate(tokens):
            wrong = [s for s in delivered[t] if s >= sent or s % N_DEVICES != i]
            assert not wrong, f"device {i} got seqs it was never sent: {wrong[:20]}"
    finally:
        srv.stop()


def test_sigterm_exits_zero_and_keeps_data(tmp_path):
    """SIGTERM drains and exits 0; what was ACKed is there after a restart."""
    srv = EmulatorServer(tmp_path / "data", log_dir=tmp_path)
    try:
        srv.start()
        sender, key = new_sender_id(), new_key()
        token = register_device(srv.http_base, APP, [sender])["token"]
        c = XmppConn(srv.ccs_port, srv.ca_cert)
        c.login(sender, key)
        payload, item = c.downstream({"to": token, "message_id": "keep-1", "data": {"seq": "1"}})
        assert payload.get("message_type") == "ack", item.raw
        rc = srv.stop(timeout=15)  # with the app-server connection still open
        c.close()
        assert rc == 0, f"exit status after SIGTERM: {rc}\n{srv.stderr_tail()}"

        srv.start()
        status, body = get_device(srv.http_base, token)
        assert status == 200, body
        assert len(body["queue"]) == 1, body
        assert '{"seq":"1"}' in json.dumps(body["queue"][0], separators=(",", ":")), body
    finally:
        srv.stop()
