"""Isolation between senders (docs/hardening.md, "Isolation"): in strict mode, where every caller is
known by its key, sender B can never send to, subscribe, group, read or ACK what belongs to sender A,
over CCS, legacy HTTP, v1, Instance ID or device groups. And the admin API: open only on loopback
unless --admin-token is set, which it then requires."""

from __future__ import annotations

import json
import subprocess

from ccs_support import emulator_bin, http_json, new_sender_id, register_device
from ccs_support.fcm_http import credentials_file, access_token, raw
from ccs_support.upstream import send_upstream, start_device, expect_sent


def strict_pair(start_server, tmp_path):
    a, b = new_sender_id(), new_sender_id()
    config = tmp_path / "senders.json"
    config.write_text(json.dumps({"senders": [{"sender_id": a, "server_key": "key-a"},
                                              {"sender_id": b, "server_key": "key-b"}]}))
    return start_server(auth="strict", config=config), a, b


def test_sender_b_cannot_reach_sender_a(start_server, tmp_path, xmpp, devices):
    srv, a, b = strict_pair(start_server, tmp_path)
    token = register_device(srv.http_base, "com.example.iso", [a])["token"]

    # CCS.
    cb = xmpp(srv)
    cb.login(b, "key-b")
    nack, _ = cb.downstream({"to": token, "message_id": "x1", "data": {"k": "v"}})
    assert nack["message_type"] == "nack" and nack["error"] == "BAD_REGISTRATION", nack
    # Legacy HTTP.
    status, _, body = raw("POST", f"{srv.http_base}/fcm/send", json.dumps({"to": token, "data": {"k": "v"}}),
                          {"Authorization": "key=key-b", "Content-Type": "application/json"})
    assert status == 200 and json.loads(body)["results"] == [{"error": "MismatchSenderId"}], body
    # HTTP v1, with B's own service account.
    creds = tmp_path / "b.json"
    credentials_file(srv, b, creds)
    status, _, body = raw("POST", f"{srv.http_base}/v1/projects/{b}/messages:send",
                          json.dumps({"message": {"token": token, "data": {"k": "v"}}}),
                          {"Authorization": f"Bearer {access_token(creds)}", "Content-Type": "application/json"})
    assert status == 403 and json.loads(body)["error"]["details"][0]["errorCode"] == "SENDER_ID_MISMATCH", body
    # Instance ID: B cannot subscribe A's token to a topic.
    status, _, body = raw("POST", f"{srv.http_base}/iid/v1/{token}/rel/topics/news", "",
                          {"Authorization": "key=key-b"})
    assert status == 403, (status, body)
    # Device groups: A's token cannot join B's group.
    status, _, body = raw("POST", f"{srv.http_base}/fcm/notification",
                          json.dumps({"operation": "create", "notification_key_name": "g", "registration_ids": [token]}),
                          {"Authorization": "key=key-b", "project_id": b, "Content-Type": "application/json"})
    assert status == 400 and json.loads(body) == {"error": "no valid registration ids"}, body
    # Topics are per sender: A's subscriber to "news" gets nothing from B's "news".
    status, _ = http_json("POST", f"{srv.http_base}/emulator/v1/devices/{token}/topics/news")
    assert status == 200
    ack, _ = cb.downstream({"to": "/topics/news", "message_id": "t1", "data": {"k": "v"}})
    assert ack["message_type"] == "ack", ack
    status, dev = http_json("GET", f"{srv.http_base}/emulator/v1/devices/{token}")
    assert dev["queue"] == [], "a topic send of sender B reached sender A's subscriber"
    # Nothing B tried was stored for A's device.
    assert dev["queued"] == 0

    # ACKs: B's connection cannot ACK an upstream message delivered to A's connection.
    ca = xmpp(srv)
    ca.login(a, "key-a")
    device, dtoken = start_device(devices, srv, "com.example.iso", [a])
    send_upstream(device, "up-1")
    expect_sent(device, ["up-1"])
    upstream, _ = ca.wait_gcm("up-1", timeout=20)
    assert upstream["from"] == dtoken
    cb.send_gcm({"to": dtoken, "message_id": "up-1", "message_type": "ack"})
    ack, _ = cb.downstream({"to": token, "message_id": "x2", "data": {}})  # a fact that B's ACK was read
    status, outbound = http_json("GET", f"{srv.http_base}/emulator/v1/outbound")
    assert any(o["message_id"] == "up-1" for o in outbound["outbound"]), "B's ACK removed A's upstream message"
    ca.send_gcm({"to": dtoken, "message_id": "up-1", "message_type": "ack"})


def test_admin_token_is_required_when_set(start_server, devices):
    token = "test-admin-token-0123456789"
    srv = start_server(extra_args=["--admin-token", token])
    status, body = http_json("GET", f"{srv.http_base}/emulator/v1/devices")
    assert status == 401 and body["error"]["status"] == "UNAUTHENTICATED", body
    status, _, _ = raw("GET", f"{srv.http_base}/emulator/v1/devices", headers={"Authorization": "Bearer wrong-token-0123456789"})
    assert status == 401
    status, _, _ = raw("GET", f"{srv.http_base}/emulator/v1/devices", headers={"Authorization": f"Bearer {token}"})
    assert status == 200
    for public in ("health", "ca.pem"):
        status, _, _ = raw("GET", f"{srv.http_base}/emulator/v1/{public}")
        assert status == 200, public
    status, _, _ = raw("POST", f"{srv.http_base}/emulator/v1/credentials", '{"project_id":"123"}')
    assert status == 401, "service-account files are admin too"
    # The CLI tools send CCS_ADMIN_TOKEN.
    import os
    old = os.environ.get("CCS_ADMIN_TOKEN")
    os.environ["CCS_ADMIN_TOKEN"] = token
    try:
        dev = devices(srv, "com.example.iso", ["123"])
        dev.expect("registered", timeout=30)
        dev.expect("connected", timeout=30)
    finally:
        if old is None:
            del os.environ["CCS_ADMIN_TOKEN"]
        else:
            os.environ["CCS_ADMIN_TOKEN"] = old


def test_a_wide_bind_without_an_admin_token_is_refused(tmp_path):
    # Refused before anything is bound: this test opens no socket beyond loopback.
    proc = subprocess.run([emulator_bin(), "serve", "--data-dir", str(tmp_path / "d"), "--bind", "0.0.0.0",
                           "--ccs-port", "0", "--device-port", "0", "--http-port", "0", "--apns-port", "0",
                           "--apns-feedback-port", "0", "--apns-http2-port", "0"], capture_output=True, timeout=60)
    assert proc.returncode == 1
    assert "--admin-token" in proc.stderr.decode(), proc.stderr.decode()
