"""serve --collapsible-throttle (docs/semantics.md, "Collapsible-message throttling"): FCM's burst of 20
collapsible messages per device, then one every 3 minutes; past it messages are held back (ACKed, not
refused), the newest per collapse key goes when the bucket allows. An app server over raw CCS, the
device CLI, the virtual clock advanced through the admin API: no test waits on time."""

from __future__ import annotations

import subprocess
import urllib.parse

from ccs_support import http_json, new_key, new_sender_id
from ccs_support.server import emulator_bin
from ccs_support.semantics import (
    VIRTUAL, advance, app_server, data_msg, is_msg, printed_tags, queue_of, send_ack, send_many_acked, start_device,
    wait_device,
)

APP = "com.example.throttle"


def journal_kinds(base: str, client_id: str) -> list[str]:
    status, body = http_json("GET", f"{base}/emulator/v1/messages/{urllib.parse.quote(client_id, safe='')}")
    assert status == 200, (status, body)
    return [e["kind"] for e in body["events"]]


def test_twenty_at_once_then_the_newest_per_key_after_three_minutes(start_server, devices):
    srv = start_server(extra_args=["--collapsible-throttle", "fcm", *VIRTUAL])
    status, info = http_json("GET", f"{srv.http_base}/emulator/v1/info")
    assert status == 200 and info["collapsible_throttle"] == "20,1/3min", info
    sender, key = new_sender_id(), new_key()
    dev, token = start_device(devices, srv, APP, [sender])
    c = app_server(srv, sender, key)
    try:
        # The burst: 20 collapsible messages (4 keys) are delivered at once.
        send_many_acked(c, [data_msg(token, f"b{i}", collapse_key=f"k{i % 4}") for i in range(20)])
        for i in range(20):
            dev.expect(is_msg(f"b{i}"), timeout=20)
        # Past it: ACKed (not refused), held back; the newer message with the key replaces the older.
        send_ack(c, data_msg(token, "late-1", collapse_key="score"))
        send_ack(c, data_msg(token, "late-2", collapse_key="score"))
        # A non-collapsible message is not throttled and does not wait behind the held one.
        send_ack(c, data_msg(token, "plain"))
        dev.expect(is_msg("plain"), timeout=20)
        view = wait_device(srv.http_base, token,
                           lambda v: [m["app_message_id"] for m in v["queue"]] == ["late-2"], "only late-2 waits")
        assert view["queue"][0]["throttled"] is True, view["queue"]
        assert "late-1" not in printed_tags(dev) and "late-2" not in printed_tags(dev), printed_tags(dev)
        assert "throttled" in journal_kinds(srv.http_base, "late-2")
        assert journal_kinds(srv.http_base, "late-1")[-1] == "collapsed", journal_kinds(srv.http_base, "late-1")

        # 3 minutes less a second: still held (the barrier proves nothing else came first).
        advance(srv.http_base, 179)
        send_ack(c, data_msg(token, "barrier"))
        dev.expect(is_msg("barrier"), timeout=20)
        assert "late-2" not in printed_tags(dev), printed_tags(dev)
        # The refill: the newest message of the key is delivered.
        advance(srv.http_base, 1)
        dev.expect(is_msg("late-2"), timeout=20)
        assert "late-1" not in printed_tags(dev), printed_tags(dev)
        kinds = journal_kinds(srv.http_base, "late-2")
        assert kinds.index("throttled") < kinds.index("handed_over"), kinds
        wait_device(srv.http_base, token, lambda v: not any(m.get("throttled") for m in v["queue"]), "nothing held")
    finally:
        c.close()


def test_the_option_is_range_checked(tmp_path):
    for bad in ["20", "20,2/3min", "0,1/min", "1001,1/min", "20,1/2d", "20/3min"]:
        r = subprocess.run([emulator_bin(), "serve", "--collapsible-throttle", bad, "--data-dir", str(tmp_path / "d")],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "--collapsible-throttle" in r.stderr, (bad, r.returncode, r.stderr)
