"""Storage faults (docs/hardening.md): a store that cannot write (the file-size limit stands in for a full
disk: writes fail with EFBIG as they would with ENOSPC) makes downstream answer SERVICE_UNAVAILABLE over
CCS and 503 UNAVAILABLE over HTTP v1, never an ACK for what was not stored and never a crash; when writes
work again, service resumes by itself. A corrupt database refuses to start with a clear message."""

from __future__ import annotations

import json
import resource
import subprocess

from ccs_support import emulator_bin, http_json, new_key, new_sender_id, register_device
from ccs_support.fcm_http import access_token, credentials_file, raw


def test_a_full_disk_answers_unavailable_and_service_resumes(start_server, xmpp, tmp_path):
    srv = start_server()
    sender = new_sender_id()
    token = register_device(srv.http_base, "com.example.disk", [sender])["token"]
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    bearer = access_token(creds)
    c = xmpp(srv)
    c.login(sender, new_key())
    ack, _ = c.downstream({"to": token, "message_id": "before", "data": {"n": "1"}})
    assert ack["message_type"] == "ack", ack
    status, _ = http_json("POST", f"{srv.http_base}/emulator/v1/store/sync")
    assert status == 200

    soft, hard = resource.prlimit(srv.pid, resource.RLIMIT_FSIZE)
    resource.prlimit(srv.pid, resource.RLIMIT_FSIZE, (1, hard))  # no file may grow: the disk is full
    try:
        nack, _ = c.downstream({"to": token, "message_id": "full", "data": {"n": "2"}})
        assert nack["message_type"] == "nack" and nack["error"] == "SERVICE_UNAVAILABLE", nack
        status, headers, body = raw("POST", f"{srv.http_base}/v1/projects/{sender}/messages:send",
                                    json.dumps({"message": {"token": token, "data": {"n": "3"}}}),
                                    {"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"})
        assert status == 503 and headers.get("retry-after") == "1", (status, body)
        assert json.loads(body)["error"]["status"] == "UNAVAILABLE", body
        assert srv.alive
    finally:
        resource.prlimit(srv.pid, resource.RLIMIT_FSIZE, (soft, hard))

    # Space is back: the same connection works again, with nothing to restart.
    ack, _ = c.downstream({"to": token, "message_id": "after", "data": {"n": "4"}})
    assert ack["message_type"] == "ack", ack
    status, dev = http_json("GET", f"{srv.http_base}/emulator/v1/devices/{token}")
    assert status == 200
    assert [m["app_message_id"] for m in dev["queue"]] == ["before", "after"], "nothing refused was stored"


def test_a_corrupt_database_refuses_to_start_with_a_clear_message(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "ccs-emulator.sqlite").write_bytes(b"SQLite format 3\x00" + b"garbage" * 1000)
    proc = subprocess.run([emulator_bin(), "serve", "--data-dir", str(data), "--ccs-port", "0", "--device-port", "0",
                           "--http-port", "0", "--apns-port", "0", "--apns-feedback-port", "0", "--apns-http2-port", "0"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 1, proc
    err = proc.stderr.decode()
    assert "ccs-emulator.sqlite is corrupt or not a ccs-emulator database" in err and "--reset-state" in err, err
