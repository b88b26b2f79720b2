"""Durability of upstream messages: SIGKILL the server while upstream messages are in flight,
restart it on the same data dir, and a new app-server connection must receive every message
that had not been ACKed — and none that had. (The same with a graceful SIGTERM stop, and with
messages that were stored while no app server was connected.)

What counts as committed: a device's `sent` event is given only after the message is stored,
so every upstream message here survives the kill. An app server's ACK gets no answer, so the
test cannot see when its removal was committed: it waits for a barrier (a downstream message
the server NACKs, proving the ACKs before it were handled) and then for POST /emulator/v1/store/sync,
which returns once everything handled is on disk. An ACK that arrived in the last moments before a
crash may legitimately be lost (the message then comes again — at-least-once); the sync keeps this
test clear of that case.
"""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest

from ccs_support import new_key, new_sender_id, store_sync
from ccs_support.upstream import (
    RawAppServer, outbound_ids, send_many, settle, start_device, wait_until,
)

APP = "com.example.upcrash"


@pytest.fixture
def raw_apps():
    made = []

    def raw(srv, sender, key, **kw):
        c = RawAppServer(srv.ccs_port, srv.ca_cert, sender, key, **kw)
        made.append(c)
        return c

    yield SimpleNamespace(raw=raw)
    for c in made:
        try:
            c.close()
        except Exception:
            pass


def receive_all_after_restart(srv, sender, key, raw_apps, expected: set[str]) -> RawAppServer:
    """Connects a new app server that ACKs everything as it arrives, until `expected` all came."""
    app = raw_apps.raw(srv, sender, key, name="after-restart", auto_ack=True)
    wait_until(lambda: set(app.upstream_ids()) >= expected, 30,
               lambda: f"after restart got {len(set(app.upstream_ids()))} of {len(expected)}: "
                       f"missing {sorted(expected - set(app.upstream_ids()))[:10]}", pump=[app])
    app.barrier()
    settle([app], 1.0)
    return app


def stop_server(srv, how: str, app: RawAppServer) -> None:
    if how == "sigkill":
        srv.kill()
    else:
        # A graceful stop drains the connection first; the client closes once the server ended
        # the stream (else the server waits for its TLS close_notify).
        srv.proc.send_signal(signal.SIGTERM)
        app.wait_closed(15)
        assert app.controls, "no CONNECTION_DRAINING before the graceful stop"
        assert srv.proc.wait(15) == 0, srv.stderr_tail()
    assert not srv.alive


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_restart_with_upstream_in_flight(start_server, devices, raw_apps, how):
    args = ["--max-unacked", "20"]
    srv = start_server(extra_args=args)
    sender, key = new_sender_id(), new_key()
    app = raw_apps.raw(srv, sender, key, name="before-crash")
    dev, token = start_device(devices, srv, APP, [sender])
    all_ids = [f"crash-up-{i}" for i in range(40)]
    send_many(dev, all_ids)  # every `sent` = stored

    # 20 arrive (the window); ACK every other one; 10 more arrive in the freed window.
    first = app.wait_upstream(20)
    acked = {r.message_id for r in first[::2]}
    app.ack_all(r for r in first if r.message_id in acked)
    app.wait_upstream(30)
    app.barrier()                     # every ACK above has been handled
    store_sync(srv.http_base)         # …and, once this returns, committed
    in_flight = set(app.upstream_ids()) - acked
    expected = set(all_ids) - acked
    assert len(acked) == 10 and len(in_flight) == 20 and len(expected) == 30
    before = outbound_ids(srv.http_base, sender)
    assert set(before) == expected, f"outbound before the kill: {sorted(before)}"

    stop_server(srv, how, app)
    srv.start()  # same data dir, same options, new ports

    stored = outbound_ids(srv.http_base, sender)
    assert set(stored) == expected, (f"after restart, outbound lost {sorted(expected - set(stored))[:10]} "
                                     f"and kept ACKed {sorted(set(stored) & acked)[:10]}")
    got = receive_all_after_restart(srv, sender, key, raw_apps, expected).upstream_ids()
    assert not set(got) & acked, f"ACKed messages delivered again after the crash: {sorted(set(got) & acked)}"
    assert set(got) == expected, f"unexpected ids: {sorted(set(got) - expected)}"
    assert len(got) == len(set(got)), f"delivered twice to one ACKing connection: {got}"
    assert outbound_ids(srv.http_base, sender) == {}


def test_sigkill_with_upstream_waiting_for_any_connection(start_server, devices, raw_apps):
    srv = start_server()
    sender, key = new_sender_id(), new_key()
    dev, token = start_device(devices, srv, APP, [sender])
    all_ids = [f"crash-wait-{i}" for i in range(15)]
    send_many(dev, all_ids)
    srv.kill()
    srv.start()
    stored = outbound_ids(srv.http_base, sender)
    assert set(stored) == set(all_ids) and all(c is None for c in stored.values()), stored
    app = receive_all_after_restart(srv, sender, key, raw_apps, set(all_ids))
    assert sorted(app.upstream_ids()) == sorted(all_ids), app.upstream_ids()
    for r in app.upstream:
        assert r.payload["from"] == token and r.payload["category"] == APP, r.raw
        assert r.payload["data"] == {"n": r.message_id}, r.raw
    assert outbound_ids(srv.http_base, sender) == {}
