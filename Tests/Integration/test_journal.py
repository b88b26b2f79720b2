"""The message journal (docs/admin-api.md#message-journal): every event kind, recorded from a real
client's traffic (raw CCS over TLS, the device CLI, the legacy HTTP API, the topic API), queried
through GET /emulator/v1/messages and /messages/{id}, followed live through Server-Sent Events, with
its filters, its bounded retention and `--journal off`."""

from __future__ import annotations

import socket
import urllib.parse

import requests

from ccs_support import http_json, new_key, new_sender_id, register_device
from ccs_support.semantics import (
    VIRTUAL, advance, app_server, data_msg, go, is_msg, send_ack, send_many_acked, send_nack, start_device,
    wait_device,
)

APP = "com.example.journal"


def journal_message(base: str, mid: str) -> dict:
    status, body = http_json("GET", f"{base}/emulator/v1/messages/{urllib.parse.quote(mid, safe='')}")
    assert status == 200, (status, body)
    return body


def kinds(base: str, mid: str) -> list[str]:
    return [e["kind"] for e in journal_message(base, mid)["events"]]


def messages(base: str, **query) -> list[dict]:
    status, body = http_json("GET", f"{base}/emulator/v1/messages?{urllib.parse.urlencode(query)}")
    assert status == 200, (status, body)
    return body["messages"]


def wait_kinds(base: str, mid: str, wanted: set[str], timeout: float = 20.0) -> list[str]:
    """The message's event kinds once they include `wanted` (events recorded after an answer, such as
    a device's ACK, land when the device's ACK is processed: poll that fact, bounded). A message known
    by a client's id (an APNs identifier) is found only once its answer is recorded, which for a live
    delivery follows the device's ACK: until then the journal answers 404, and the poll goes on."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        status, body = http_json("GET", f"{base}/emulator/v1/messages/{urllib.parse.quote(mid, safe='')}")
        if status == 404 and time.monotonic() <= deadline:
            time.sleep(0.05)
            continue
        assert status == 200, (status, body)
        got = [e["kind"] for e in body["events"]]
        if wanted <= set(got) or time.monotonic() > deadline:
            assert wanted <= set(got), (wanted, got)
            return got
        time.sleep(0.05)


def test_life_of_delivered_message_with_receipt_tray_and_tap(start_server, xmpp, devices):
    srv = start_server(extra_args=VIRTUAL)
    base = srv.http_base
    sender, key = new_sender_id(), new_key()
    c = app_server(srv, sender, key)
    dev, token = start_device(devices, srv, APP, [sender])

    send_ack(c, data_msg(token, "r1", delivery_receipt_requested=True))
    dev.expect(is_msg("r1"), timeout=20)
    c.wait_gcm("dr2:r1", timeout=15)
    got = wait_kinds(base, "r1", {"handed_over", "device_acked", "accepted", "receipt_sent"})
    body = journal_message(base, "r1")
    assert body["message_id"].startswith("0:"), body
    accepted = next(e for e in body["events"] if e["kind"] == "accepted")
    assert accepted["api"] == "ccs" and accepted["client_message_id"] == "r1" and accepted["token"] == token, accepted
    assert accepted["sender"] == sender and accepted["connection"], accepted
    assert got.index("handed_over") < got.index("device_acked") < got.index("receipt_sent"), got
    c.send_gcm({"to": token, "message_id": "dr2:r1", "message_type": "ack"})
    wait_kinds(base, "r1", {"receipt_acked"})
    assert journal_message(base, "r1")["status"] == "receipt_acked"

    go(dev, "background")
    send_ack(c, data_msg(token, "note", notification={"title": "Hi", "body": "there"}))
    shown = dev.expect(lambda e: e.get("event") == "notification", timeout=20)
    wait_kinds(base, "note", {"shown_in_tray"})
    dev.send({"tap": shown["message"]["message_id"]})
    dev.expect(lambda e: e.get("event") == "message" and e.get("opened_from") == "tray", timeout=20)
    assert wait_kinds(base, "note", {"tapped"})[-1] == "tapped"


def test_a_message_its_device_acked_is_listed_as_device_acked(start_server, xmpp, devices):
    """A live delivery the device confirms before its write is answered from the confirmation, so the
    answer to the app server (`accepted`) is recorded after `device_acked`: the list and the message
    show the furthest state it reached, not its latest event (issue 39, item 13)."""
    srv = start_server(extra_args=VIRTUAL)
    base = srv.http_base
    sender, key = new_sender_id(), new_key()
    c = app_server(srv, sender, key)
    dev, token = start_device(devices, srv, APP, [sender])
    send_ack(c, data_msg(token, "d1"))
    dev.expect(is_msg("d1"), timeout=20)
    wait_kinds(base, "d1", {"handed_over", "device_acked", "accepted"})
    [listed] = [m for m in messages(base, sender=sender) if m.get("client_message_id") == "d1"]
    assert listed["status"] == "device_acked", listed
    assert journal_message(base, "d1")["status"] == "device_acked"
    assert [m["client_message_id"] for m in messages(base, sender=sender, status="device_acked")] == ["d1"]


def test_collapsed_expired_discarded_stored_refused_not_stored(start_server, xmpp, devices):
    srv = start_server(extra_args=VIRTUAL)
    base = srv.http_base
    sender, key = new_sender_id(), new_key()
    c = app_server(srv, sender, key)
    token = register_device(base, APP, [sender])["token"]  # never connects: everything is stored

    send_ack(c, data_msg(token, "c1", collapse_key="score"))
    send_ack(c, data_msg(token, "c2", collapse_key="score"))
    assert kinds(base, "c1") == ["stored", "accepted", "collapsed"]
    assert kinds(base, "c2") == ["stored", "accepted"]

    send_ack(c, data_msg(token, "short", time_to_live=10))
    advance(base, 11)
    wait_kinds(base, "short", {"expired"})

    send_many_acked(c, [data_msg(token, f"n{i}") for i in range(101)])
    assert kinds(base, "n0")[-1] == "discarded"
    # The 101st goes with the others; a transaction's removals are journaled after its answers.
    assert kinds(base, "n100") == ["accepted", "discarded"]

    nack = send_nack(c, data_msg("not-a-token", "bad"))
    assert nack["error"] == "BAD_REGISTRATION"
    refused = journal_message(base, "bad")["events"]
    assert [(e["kind"], e["detail"]) for e in refused] == [("refused", "NACK BAD_REGISTRATION")], refused
    assert refused[0]["message_id"].startswith("local:"), refused

    send_ack(c, data_msg(token, "dry", dry_run=True))
    assert [(e["kind"], e["detail"]) for e in journal_message(base, "dry")["events"]] == [("not_stored", "dry run")]

    # Filters.
    listed = messages(base, sender=sender, status="refused")
    assert [m["client_message_id"] for m in listed] == ["bad"], listed
    assert {m["status"] for m in messages(base, token=token, limit=1000)} >= {"collapsed", "expired", "discarded", "accepted"}
    assert len(messages(base, token=token, limit=3)) == 3
    assert messages(base, sender=new_sender_id()) == []
    for bad in ("status=nope", "limit=0", "limit=1001", "since=-1", "since=x"):
        status, body = http_json("GET", f"{base}/emulator/v1/messages?{bad}")
        assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT", (bad, status, body)
    status, _ = http_json("GET", f"{base}/emulator/v1/messages/no-such-message")
    assert status == 404


def test_topic_fan_out_legacy_http_and_faults(server, xmpp, devices):
    base = server.http_base
    sender, key = new_sender_id(), new_key()
    c = app_server(server, sender, key)
    tokens = [register_device(base, APP, [sender])["token"] for _ in range(3)]
    r = requests.post(f"{base}/iid/v1:batchAdd", json={"to": "/topics/news", "registration_tokens": tokens},
                      headers={"Authorization": f"key={key}"}, timeout=30)
    assert r.status_code == 200, r.text
    ack = send_ack(c, {"to": "/topics/news", "message_id": "t1", "data": {"x": "1"}})
    assert ack["message_type"] == "ack"
    body = journal_message(base, "t1")
    assert [e["kind"] for e in body["events"]] == ["fanned_out", "accepted"], body
    assert body["events"][0]["detail"] == "3 devices" and body["events"][0]["topic"] == "/topics/news", body
    assert [m["client_message_id"] for m in messages(base, topic="news")] == ["t1"]

    r = requests.post(f"{base}/fcm/send", json={"to": tokens[0], "data": {"y": "2"}},
                      headers={"Authorization": f"key={key}"}, timeout=30)
    mid = r.json()["results"][0]["message_id"]
    events = journal_message(base, mid)["events"]
    assert [e["kind"] for e in events] == ["stored", "accepted"] and events[1]["api"] == "legacy", events
    bogus = f"no-such-token-{sender}"
    r = requests.post(f"{base}/fcm/send", json={"to": bogus, "data": {"y": "2"}},
                      headers={"Authorization": f"key={key}"}, timeout=30)
    assert r.json()["results"] == [{"error": "InvalidRegistration"}]
    # An unknown token names no sender: the journal finds it by token.
    [refused] = messages(base, token=bogus, status="refused")
    assert refused["api"] == "legacy" and refused["tokens"] == [bogus], refused
    assert journal_message(base, refused["message_id"])["events"][0]["detail"] == "Error=InvalidRegistration"

    status, _ = http_json("POST", f"{base}/emulator/v1/faults",
                          {"action": "nack", "code": "SERVICE_UNAVAILABLE", "sender": sender, "message_id": "f1", "times": 1})
    assert status == 201
    assert send_nack(c, data_msg(tokens[0], "f1"))["error"] == "SERVICE_UNAVAILABLE"
    got = [(e["kind"], e.get("detail", "")) for e in journal_message(base, "f1")["events"]]
    assert got[0][0] == "fault_applied" and got[1] == ("refused", "NACK SERVICE_UNAVAILABLE"), got
    http_json("DELETE", f"{base}/emulator/v1/faults")


def test_events_stream_follows_the_journal(server, xmpp):
    base = server.http_base
    sender, key = new_sender_id(), new_key()
    c = app_server(server, sender, key)
    token = register_device(base, APP, [sender])["token"]
    with requests.get(f"{base}/emulator/v1/events?sender={sender}", stream=True, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream", r.headers
        lines = r.iter_lines(decode_unicode=True)
        assert next(lines).startswith(": following"), "the stream says it follows before any event"
        send_ack(c, data_msg(token, "live"))
        seen = []
        block: dict[str, str] = {}
        for line in lines:
            if line == "":
                if block:
                    seen.append(block)
                    if block.get("event") == "accepted":
                        break
                block = {}
                continue
            field, _, value = line.partition(": ")
            block[field] = value
        assert [b["event"] for b in seen] == ["stored", "accepted"], seen
        import json
        data = json.loads(seen[-1]["data"])
        assert data["client_message_id"] == "live" and data["sender"] == sender and int(seen[-1]["id"]) == data["seq"]


def test_retention_by_count_and_journal_off(start_server, xmpp):
    srv = start_server(extra_args=["--journal-retention", "5"])
    base = srv.http_base
    sender, key = new_sender_id(), new_key()
    c = app_server(srv, sender, key)
    token = register_device(base, APP, [sender])["token"]
    send_many_acked(c, [data_msg(token, f"m{i}") for i in range(10)])
    import time
    deadline = time.monotonic() + 20
    while len(messages(base, sender=sender)) > 3 and time.monotonic() < deadline:
        time.sleep(0.1)  # the writer prunes once a second: wait for that fact, bounded
    kept = messages(base, sender=sender)
    # 5 events kept: the newest messages (2 events each) remain.
    assert 2 <= len(kept) <= 3 and kept[0]["client_message_id"] == "m9", kept

    off = start_server(extra_args=["--journal", "off"])
    status, body = http_json("GET", f"{off.http_base}/emulator/v1/messages")
    assert status == 404 and "journal is off" in body["error"]["message"], body


def test_bad_retention_is_refused(tmp_path):
    from ccs_support.cli import serve_must_fail
    for bad in ("0", "abc", "5,6", "10x", "1h,2h"):
        code, err = serve_must_fail(tmp_path / "data", "--journal-retention", bad)
        assert code != 0 and "--journal-retention" in err, (bad, code, err)


def test_an_unreadable_journal_is_set_aside_and_a_new_one_started(start_server, tmp_path):
    base = tmp_path / "garbled"
    (base / "data").mkdir(parents=True)
    (base / "data" / "journal.sqlite").write_bytes(b"this is not a database " * 200)
    srv = start_server(base=base)
    status, body = http_json("GET", f"{srv.http_base}/emulator/v1/messages")
    assert status == 200 and body == {"messages": []}, body
    kept = [p.name for p in (base / "data").iterdir() if p.name.startswith("journal.sqlite.unreadable-")]
    assert kept, list((base / "data").iterdir())
    assert "could not be opened" in srv.stderr_path.read_text()


def test_http_v1_and_apns_entry_points(server, devices, tmp_path):
    """The two entry points the other tests do not use: HTTP v1 (with OAuth2) and the APNs gateway."""
    import json as _json
    from ccs_support.apns import connect, frame, issue_cert, payload
    from ccs_support.fcm_http import access_token, credentials_file, raw

    base = server.http_base
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    token = register_device(base, APP, [sender])["token"]
    bearer = {"Content-Type": "application/json", "Authorization": f"Bearer {access_token(creds)}"}
    url = f"{base}/v1/projects/{sender}/messages:send"
    status, _, text = raw("POST", url, _json.dumps({"message": {"token": token, "data": {"a": "b"}}}), bearer)
    assert status == 200, text
    mid = _json.loads(text)["name"].rsplit("/", 1)[1]
    events = journal_message(base, mid)["events"]
    assert [(e["kind"], e.get("api")) for e in events] == [("stored", None), ("accepted", "v1")], events
    status, _, text = raw("POST", url, _json.dumps({"message": {"token": f"gone-{sender}", "data": {"a": "b"}}}), bearer)
    assert status in (400, 404), text
    [refused] = messages(base, token=f"gone-{sender}")
    detail = journal_message(base, refused["message_id"])["events"][0]["detail"]
    assert refused["api"] == "v1" and detail.startswith(f"HTTP {status} "), (refused, detail)

    bundle = "com.example.journal.ios"
    cert = issue_cert(server.data_dir, bundle, tmp_path / "apns")
    dev = devices(server, bundle, [], platform="ios", apns=True)
    apns_token = dev.expect("registered")["apns_token"]
    dev.expect("connected")
    with connect(int(server.ready["apns_port"]), cert["combined"]) as sock:
        sock.sendall(frame(bytes.fromhex(apns_token), payload("Hi"), 77, 4_000_000_000))
        dev.expect("apns")
    got = wait_kinds(base, "77", {"accepted", "handed_over", "device_acked"})
    accepted = next(e for e in journal_message(base, "77")["events"] if e["kind"] == "accepted")
    assert accepted["api"] == "apns" and accepted["client_message_id"] == "77" and accepted["sender"] == bundle, got
