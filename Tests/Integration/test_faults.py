"""Fault injection (docs/conformance.md, "Faults"): every kind of fault, set through the admin API and
observed through a real client — raw CCS over TLS, the device CLI, the HTTP APIs (raw requests and
firebase-admin), and a raw APNs provider — plus the rules' durability and the fault log."""

from __future__ import annotations

import json

from ccs_support import http_json, new_key, new_sender_id, register_device
from ccs_support.fcm_http import raw
from ccs_support.xmpp import ServerClosed


def add_fault(server, **rule) -> dict:
    status, body = http_json("POST", f"{server.http_base}/emulator/v1/faults", rule)
    assert status == 201, (status, body)
    return body


def clear_faults(server) -> None:
    status, _ = http_json("DELETE", f"{server.http_base}/emulator/v1/faults")
    assert status == 200


def fault_log(server, rule: str) -> list[dict]:
    status, body = http_json("GET", f"{server.http_base}/emulator/v1/faults/log?rule={rule}")
    assert status == 200, body
    return body["faults"]


def app_server(xmpp, sender: str):
    c = xmpp()
    c.login(sender, new_key())
    return c


def msg(token: str, mid: str, **extra) -> dict:
    return {"to": token, "message_id": mid, "data": {"n": mid}, **extra}


def test_nack_with_any_code_scoped_by_message_id(server, xmpp):
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.faults", [sender])["token"]
    rule = add_fault(server, action="nack", code="SERVICE_UNAVAILABLE", sender=sender, message_id="retry-*", times=1)
    assert rule["point"] == "ccs_downstream" and rule["fired"] == 0, rule
    c = app_server(xmpp, sender)
    nack, _ = c.downstream(msg(token, "retry-1"))
    assert nack["message_type"] == "nack" and nack["error"] == "SERVICE_UNAVAILABLE", nack
    assert nack["from"] == token, nack
    again, _ = c.downstream(msg(token, "retry-1"))
    assert again["message_type"] == "ack", "times: 1, so the retry goes through"
    other, _ = c.downstream(msg(token, "plain-1"))
    assert other["message_type"] == "ack", other
    [entry] = fault_log(server, rule["id"])
    assert entry["message_id"] == "retry-1" and entry["sender"] == sender and entry["action"] == "nack", entry
    assert entry["origin"].startswith("ccs:"), entry
    for code in ("INTERNAL_SERVER_ERROR", "DEVICE_MESSAGE_RATE_EXCEEDED", "TOPICS_MESSAGE_RATE_EXCEEDED", "CONNECTION_DRAINING"):
        add_fault(server, id=f"n-{code}", action="nack", code=code, sender=sender, message_id=code, times=1)
        nack, _ = c.downstream(msg(token, code))
        assert nack["error"] == code and nack["message_type"] == "nack", nack
    clear_faults(server)


def test_drop_ack_and_delay_ack(server, xmpp):
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.faults", [sender])["token"]
    add_fault(server, id="drop", action="drop_ack", sender=sender, message_id="lost", times=1)
    add_fault(server, id="late", action="delay_ack", delay_ms=1500, sender=sender, message_id="late", times=1)
    c = app_server(xmpp, sender)
    c.send_gcm(msg(token, "lost"))
    c.send_gcm(msg(token, "late"))
    c.send_gcm(msg(token, "next"))
    # The ACK of "next" overtakes the delayed one; the dropped one never comes.
    first, _ = c.wait_gcm()
    assert first["message_id"] == "next", first
    second, _ = c.wait_gcm(timeout=20)
    assert second["message_id"] == "late" and second["message_type"] == "ack", second
    # The dropped message was still accepted: it waits in the device's queue.
    status, dev = http_json("GET", f"{server.http_base}/emulator/v1/devices/{token}")
    assert status == 200
    assert {m["app_message_id"] for m in dev["queue"]} >= {"lost", "late", "next"}, dev["queue"]
    assert len(fault_log(server, "drop")) == 1 and len(fault_log(server, "late")) == 1
    clear_faults(server)


def test_close_the_connection_after_n_stanzas(server, xmpp):
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.faults", [sender])["token"]
    add_fault(server, id="cut", action="close_connection", sender=sender, after=2, times=1)
    c = app_server(xmpp, sender)
    for mid in ("a", "b"):
        ack, _ = c.downstream(msg(token, mid))
        assert ack["message_type"] == "ack", ack
    c.send_gcm(msg(token, "c"))
    closed = c.wait_closed(timeout=10)
    assert "</stream:stream>" in closed, closed
    # The next connection works: the rule fired its one time.
    c2 = app_server(xmpp, sender)
    ack, _ = c2.downstream(msg(token, "c"))
    assert ack["message_type"] == "ack", ack
    clear_faults(server)


def test_drain_after_a_message(server, xmpp):
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.faults", [sender])["token"]
    add_fault(server, id="drain", action="drain", sender=sender, after=1, times=1)
    c = app_server(xmpp, sender)
    ack, _ = c.downstream(msg(token, "one"))
    assert ack["message_type"] == "ack"
    ack, _ = c.downstream(msg(token, "two"))
    assert ack["message_type"] == "ack", "the triggering message is answered as usual"
    control, item = c.wait_gcm()
    assert control == {"message_type": "control", "control_type": "CONNECTION_DRAINING"}, control
    assert item.raw.startswith('<message><data:gcm xmlns:data="google:mobile:data">'), item.raw
    nack, _ = c.downstream(msg(token, "three"))
    assert nack["error"] == "CONNECTION_DRAINING", nack
    clear_faults(server)


def test_http_errors_with_retry_after_on_both_apis(server):
    sender = new_sender_id()
    key = new_key()
    token = register_device(server.http_base, "com.example.faults", [sender])["token"]
    # The sender logs its key in over the legacy API's permissive mode by using it.
    add_fault(server, id="h503", action="http_error", status=503, retry_after=7, token=token, times=1)
    status, headers, body = raw("POST", f"{server.http_base}/fcm/send",
                                json.dumps({"to": token, "data": {"a": "b"}}),
                                {"Authorization": f"key={key}", "Content-Type": "application/json"})
    assert status == 503 and headers.get("retry-after") == "7", (status, headers, body)
    status, _, body = raw("POST", f"{server.http_base}/fcm/send", json.dumps({"to": token, "data": {"a": "b"}}),
                          {"Authorization": f"key={key}", "Content-Type": "application/json"})
    assert status == 200 and json.loads(body)["success"] == 1, body
    [entry] = fault_log(server, "h503")
    assert entry["origin"] == "http:legacy" and entry["token"] == token, entry
    clear_faults(server)


def test_http_v1_error_in_googles_shape_and_firebase_admin_honours_retry_after(server, tmp_path):
    from ccs_support.fcm_http import credentials_file, run_firebase

    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    token = register_device(server.http_base, "com.example.faults", [sender])["token"]
    other = register_device(server.http_base, "com.example.faults", [sender])["token"]
    add_fault(server, id="v429", action="http_error", status=429, token=other, times=1)
    add_fault(server, id="v500", action="http_error", status=500, sender=sender, token="never-matches")
    result = run_firebase({"credentials": str(creds), "fcm_base": server.http_base, "ops": [
        {"op": "send", "message": {"token": other, "data": {"x": "1"}}}]}, workdir=tmp_path)
    [first] = result["results"]
    # A 429 without Retry-After is not retried by firebase-admin: the error reaches the caller.
    assert first.get("error") == "QuotaExceededError", first
    add_fault(server, id="v503", action="http_error", status=503, retry_after=1, token=token, times=1)
    result = run_firebase({"credentials": str(creds), "fcm_base": server.http_base, "ops": [
        {"op": "send", "message": {"token": token, "data": {"x": "2"}}}]}, workdir=tmp_path)
    [second] = result["results"]
    # firebase-admin retries a 503 after its Retry-After; the retry goes through.
    assert second.get("name", "").startswith(f"projects/{sender}/messages/"), second
    assert len(fault_log(server, "v503")) == 1
    status, audit = http_json("GET", f"{server.http_base}/emulator/v1/audit?sender={sender}")
    assert status == 200
    [mine] = audit["senders"]
    assert mine["rules"]["retry-backoff"]["kept"] >= 1 and mine["rules"]["retry-backoff"]["broken"] == 0, mine
    assert len(fault_log(server, "v500")) == 0, "scoped to a token it never saw"
    clear_faults(server)


def test_device_ack_lost_then_redelivered_and_uninstall_mid_run(server, xmpp, devices):
    sender = new_sender_id()
    dev = devices(server, "com.example.faults", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    add_fault(server, id="lose", action="lose_device_ack", token=token, times=1)
    c = app_server(xmpp, sender)
    ack, _ = c.downstream(msg(token, "m1"))
    assert ack["message_type"] == "ack", ack
    first = dev.expect(lambda e: e.get("event") == "message", timeout=20)
    assert first["message"]["data"] == {"n": "m1"}
    [entry] = fault_log(server, "lose")
    assert entry["token"] == token and entry["origin"] == f"device:{token}", entry
    dev.send({"go": "offline"})
    dev.expect("offline", timeout=20)
    dev.send({"go": "online"})
    again = dev.expect(lambda e: e.get("event") == "message", timeout=20)
    assert again["message"]["message_id"] == first["message"]["message_id"], "handed over again: its ACK was lost"

    add_fault(server, id="gone", action="uninstall", token=token, times=1)
    ack, _ = c.downstream(msg(token, "last"))
    assert ack["message_type"] == "ack", "the message that triggers the uninstall is accepted"
    dev.expect(lambda e: e.get("event") in ("uninstalled", "disconnected"), timeout=20)
    # Poll a fact: the device's status flips once the uninstall has committed.
    for _ in range(100):
        nack, _ = c.downstream(msg(token, "after"))
        if nack["message_type"] == "nack":
            break
    assert nack["error"] == "DEVICE_UNREGISTERED", nack
    clear_faults(server)


def test_delayed_device_ack_delays_the_receipt(server, xmpp, devices):
    sender = new_sender_id()
    dev = devices(server, "com.example.faults", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    add_fault(server, id="slow", action="delay_device_ack", delay_ms=1000, token=token, times=1)
    c = app_server(xmpp, sender)
    ack, _ = c.downstream(msg(token, "r1", delivery_receipt_requested=True))
    assert ack["message_type"] == "ack"
    dev.expect(lambda e: e.get("event") == "message", timeout=20)
    receipt, _ = c.wait_gcm(timeout=20)
    assert receipt["message_type"] == "receipt" and receipt["message_id"] == "dr2:r1", receipt
    [entry] = fault_log(server, "slow")
    assert entry["action"] == "delay_device_ack"
    clear_faults(server)


def test_bad_rules_are_refused_and_rules_survive_a_restart(start_server):
    srv = start_server()
    for bad, field in [({"action": "nack"}, "code"), ({"action": "nack", "code": "BOGUS"}, "code"),
                       ({"action": "delay_ack", "delay_ms": 10**9}, "delay_ms"), ({"action": "teleport"}, "action"),
                       ({"action": "drop_ack", "probability": 2}, "probability"), ({"action": "drop_ack", "x": 1}, "x")]:
        status, body = http_json("POST", f"{srv.http_base}/emulator/v1/faults", bad)
        assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT", (bad, body)
        assert field in body["error"]["message"], (bad, body)
    add_fault(srv, id="keep", action="nack", code="INTERNAL_SERVER_ERROR", probability=0.25, seed=99, sender="123")
    generated = add_fault(srv, action="apns_error", apns_status=8)["id"]
    status, body = http_json("DELETE", f"{srv.http_base}/emulator/v1/faults/nope")
    assert status == 404, body
    srv.stop()
    srv.start()
    status, body = http_json("GET", f"{srv.http_base}/emulator/v1/faults")
    assert status == 200
    rules = {r["id"]: r for r in body["rules"]}
    assert rules["keep"]["probability"] == 0.25 and rules["keep"]["seed"] == 99 and rules["keep"]["code"] == "INTERNAL_SERVER_ERROR", rules
    assert rules[generated]["action"] == "apns_error" and rules[generated]["apns_status"] == 8, rules
    status, body = http_json("DELETE", f"{srv.http_base}/emulator/v1/faults/keep")
    assert status == 200 and body == {"id": "keep", "removed": True}, body


def test_apns_error_status_then_close(server, tmp_path):
    from ccs_support.apns import connect, frame, issue_cert, payload, read_until_closed, register_ios

    app = "com.example.faults.apns"
    cert = issue_cert(server.data_dir, app, tmp_path / "cert")
    device = register_ios(server.http_base, app)
    add_fault(server, id="a7", action="apns_error", apns_status=7, token=device["apns_token"], times=1)
    with connect(int(server.ready["apns_port"]), cert["combined"]) as sock:
        sock.sendall(frame(bytes.fromhex(device["apns_token"]), payload("x"), 77))
        answer = read_until_closed(sock)
    assert answer == bytes([8, 7]) + (77).to_bytes(4, "big"), answer
    [entry] = fault_log(server, "a7")
    assert entry["message_id"] == "77" and entry["sender"] == app, entry
    clear_faults(server)
