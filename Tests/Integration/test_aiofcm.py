"""aiofcm 1.4 (over aioxmpp), unmodified except FCM_HOST/FCM_PORT, against the emulator.

aiofcm runs in a subprocess (ccs_support/aiofcm_driver.py) with SSL_CERT_FILE=<emulator CA>,
so aioxmpp's own PKIX verification (CA chain + certificate name gcm.googleapis.com, the JID
domain) runs for real against the emulator's certificate.
"""

from __future__ import annotations

from ccs_support import new_key, new_sender_id, register_device, run_aiofcm


def job(server, sender, key, messages, **kw):
    return {"host": "127.0.0.1", "port": server.ccs_port, "sender_id": sender, "api_key": key,
            "messages": messages, "timeout": 30, **kw}


def test_aiofcm_sends_20_messages_and_device_receives_them(server, devices, tmp_path):
    sender, key = new_sender_id(), new_key()
    dev = devices(server, "com.example.aiofcm", [sender])
    registered = dev.expect("registered", timeout=30)
    token = registered["token"]
    dev.expect("connected", timeout=30)

    msgs = [{"device_token": token, "data": {"seq": str(i)}, "message_id": f"m-{i}"} for i in range(20)]
    result = run_aiofcm(job(server, sender, key, msgs), server.ca_cert, workdir=tmp_path)
    responses = result["responses"]
    assert len(responses) == 20, result
    bad = [r for r in responses if not r.get("is_successful")]
    assert not bad, f"unsuccessful responses: {bad}\naiofcm stderr:\n{result['stderr'][-3000:]}"
    assert sorted(r["message_id"] for r in responses) == sorted(f"m-{i}" for i in range(20))

    got = dev.messages(quiet=3.0, timeout=40, until=lambda ms: len(ms) >= 20)
    seqs = sorted(int(m["data"]["seq"]) for m in got)
    assert seqs == list(range(20)), f"device got seqs {seqs}"
    for m in got:
        assert m["from"] == sender, m
        assert m["priority"] in ("normal", "high"), m
        assert isinstance(m.get("sent_time"), int) and isinstance(m.get("ttl"), int), m
        assert "%" in m["message_id"] and m["message_id"].startswith("0:"), m


def test_aiofcm_nack_statuses(server, tmp_path):
    sender, key = new_sender_id(), new_key()
    mine = register_device(server.http_base, "com.example.aiofcm", [sender])
    others = register_device(server.http_base, "com.example.other", [new_sender_id()])
    msgs = [
        {"device_token": "unknown-token:APA91bNope", "data": {"a": "b"}, "message_id": "unknown"},
        {"device_token": mine["token"], "data": {"a": "b"}, "message_id": "ttl", "time_to_live": -1},
        {"device_token": others["token"], "data": {"a": "b"}, "message_id": "other-sender"},
        {"device_token": mine["token"], "data": {"a": "b"}, "message_id": "fine"},
    ]
    result = run_aiofcm(job(server, sender, key, msgs, sequential=True), server.ca_cert, workdir=tmp_path)
    by_id = {r["message_id"]: r for r in result["responses"]}
    assert by_id["unknown"].get("status") == "BAD_REGISTRATION", by_id
    assert by_id["ttl"].get("status") == "INVALID_JSON", by_id
    assert (by_id["ttl"].get("description") or "").startswith("InvalidJson: "), by_id
    assert by_id["other-sender"].get("status") == "BAD_REGISTRATION", by_id
    assert by_id["fine"].get("is_successful") is True, by_id


def test_aiofcm_rejects_a_certificate_it_does_not_trust(server, tmp_path):
    """Proves the CA setup is load-bearing: with the system trust store only, aiofcm cannot connect."""
    sender, key = new_sender_id(), new_key()
    token = register_device(server.http_base, "com.example.aiofcm", [sender])["token"]
    msgs = [{"device_token": token, "data": {"a": "b"}, "message_id": "untrusted"}]
    # Any readable PEM CA other than the emulator's: the system bundle.
    result = run_aiofcm(job(server, sender, key, msgs, timeout=15), "/etc/ssl/certs/ca-certificates.crt",
                        workdir=tmp_path)
    r = result["responses"][0]
    assert not r.get("is_successful"), f"aiofcm succeeded without trusting the emulator CA: {r}"
