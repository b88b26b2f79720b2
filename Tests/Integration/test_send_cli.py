"""`ccs-emulator send`: one downstream message over CCS, as an app server sends it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ccs_support import get_device, http_json, new_key, new_sender_id, register_device
from ccs_support.cli import busy_port, json_lines, refused_port, run_cli


def send(srv, *args: str, ca: str | None = None, cwd=None):
    return run_cli("send", "--server", f"127.0.0.1:{srv.ccs_port}", "--ca", ca or srv.ca_cert, *args, cwd=cwd)


def test_ack_for_a_registered_device(server):
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.app", [sender])["token"]
    proc = send(server, "--to", token, "--sender", sender, "--message-id", "send-ack-1",
                "--data", "hello=world", "--data", "eq=a=b", "--priority", "high", "--ttl", "600",
                "--collapse-key", "ck", "--notification", "title=Hi, there,body=x")
    assert proc.returncode == 0, proc
    assert json_lines(proc.stdout) == [{"from": token, "message_id": "send-ack-1", "message_type": "ack"}], proc.stdout

    # The device is offline: the message waits in its queue, as sent.
    status, device = get_device(server.http_base, token)
    assert status == 200, device
    [entry] = device["queue"]
    assert entry["app_message_id"] == "send-ack-1" and entry["sender_id"] == sender, entry
    assert entry["priority"] == "high" and entry["time_to_live"] == 600 and entry["collapse_key"] == "ck", entry
    payload = entry["payload"]
    assert payload["data"] == {"hello": "world", "eq": "a=b"}, payload
    assert payload["notification"] == {"title": "Hi, there", "body": "x"}, payload


def test_default_message_id_is_random(server):
    token = register_device(server.http_base, "com.example.app", ["123456789"])["token"]
    ids = set()
    for _ in range(2):
        proc = send(server, "--to", token)
        assert proc.returncode == 0, proc
        [ack] = json_lines(proc.stdout)
        assert ack["message_type"] == "ack" and ack["message_id"].startswith("send-"), ack
        ids.add(ack["message_id"])
    assert len(ids) == 2


def test_nack_for_an_unknown_token_exits_1(server):
    proc = send(server, "--to", "not-a-registered-token", "--message-id", "send-nack-1")
    assert proc.returncode == 1, proc
    [nack] = json_lines(proc.stdout)
    assert nack["message_type"] == "nack" and nack["message_id"] == "send-nack-1", nack
    assert nack["error"] == "BAD_REGISTRATION", nack


def test_wait_receipt_with_an_online_device(server, devices):
    sender = new_sender_id()
    dev = devices(server, "com.example.receipt", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)

    proc = send(server, "--to", token, "--sender", sender, "--key", new_key(), "--message-id", "send-dr-1",
                "--data", "n=1", "--wait-receipt")
    assert proc.returncode == 0, proc
    ack, receipt = json_lines(proc.stdout)
    assert ack == {"from": token, "message_id": "send-dr-1", "message_type": "ack"}, ack
    assert receipt["message_type"] == "receipt" and receipt["message_id"] == "dr2:send-dr-1", receipt
    assert receipt["data"]["original_message_id"] == "send-dr-1", receipt
    assert receipt["data"]["device_registration_id"] == token, receipt

    message = dev.expect("message", timeout=20)["message"]
    assert message["data"] == {"n": "1"} and message["from"] == sender, message

    # send ACKed the receipt before closing: nothing waits for another connection of the sender.
    status, body = http_json("GET", f"{server.http_base}/emulator/v1/outbound")
    assert status == 200, body
    assert [o for o in body["outbound"] if o["sender_id"] == sender] == [], body
    assert dev.close() == 0


def test_the_default_ca_is_the_data_dirs(server, tmp_path):
    # Run from a directory whose .ccs-emulator/tls/ca.pem is this server's CA: no --ca needed.
    (tmp_path / ".ccs-emulator" / "tls").mkdir(parents=True)
    (tmp_path / ".ccs-emulator" / "tls" / "ca.pem").write_bytes(Path(server.ca_cert).read_bytes())
    token = register_device(server.http_base, "com.example.app", ["123456789"])["token"]
    proc = run_cli("send", "--server", f"127.0.0.1:{server.ccs_port}", "--to", token, cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert json_lines(proc.stdout)[0]["message_type"] == "ack", proc.stdout


def test_missing_ca_file(server, tmp_path):
    proc = run_cli("send", "--server", f"127.0.0.1:{server.ccs_port}", "--to", "x", cwd=tmp_path)
    assert proc.returncode == 2, proc
    [line] = json_lines(proc.stdout)
    assert line["error"].startswith("cannot read the CA certificate .ccs-emulator/tls/ca.pem"), line


def test_ca_file_without_a_certificate(tmp_path):
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    with refused_port() as port:
        proc = run_cli("send", "--server", f"127.0.0.1:{port}", "--to", "x", "--ca", str(empty))
    assert proc.returncode == 2, proc
    # Found before connecting.
    assert json_lines(proc.stdout) == [{"error": "the CA file holds no PEM certificate"}], proc.stdout


def test_nothing_listens(server):
    with refused_port() as port:
        proc = run_cli("send", "--server", f"127.0.0.1:{port}", "--to", "x", "--ca", server.ca_cert)
    assert proc.returncode == 2, proc
    [line] = json_lines(proc.stdout)
    assert line["error"] == (f"cannot connect to 127.0.0.1:{port}: connection refused: nothing listens there; "
                             "is the emulator running? --server is its CCS port, the ready line's ccs_port"), line


def test_not_the_ccs_port(server):
    proc = run_cli("send", "--server", f"127.0.0.1:{server.http_port}", "--to", "x", "--ca", server.ca_cert)
    assert proc.returncode == 2, proc
    [line] = json_lines(proc.stdout)
    assert line["error"] == ("TLS handshake failed: WRONG_VERSION_NUMBER (the other side does not speak TLS on "
                             f"this port); is --server 127.0.0.1:{server.http_port} the emulator's CCS port, "
                             f"and --ca {server.ca_cert} that emulator's CA?"), line


def test_silent_port_times_out(server):
    with busy_port() as port:  # accepts (in the kernel) and never answers
        proc = run_cli("send", "--server", f"127.0.0.1:{port}", "--to", "x", "--ca", server.ca_cert,
                       "--timeout", "1")
    assert proc.returncode == 2, proc
    [line] = json_lines(proc.stdout)
    assert line["error"].startswith("no CCS session within 1 s"), line


def test_wrong_key_in_strict_mode(start_server, tmp_path):
    cfg = tmp_path / "senders.json"
    cfg.write_text(json.dumps({"senders": [{"sender_id": "4242", "server_key": "right"}]}))
    srv = start_server(auth="strict", config=cfg)
    proc = send(srv, "--to", "x", "--sender", "4242", "--key", "wrong")
    assert proc.returncode == 2, proc
    [line] = json_lines(proc.stdout)
    assert line["error"].startswith("authentication as sender 4242 failed: not-authorized"), line


def test_help_shows_the_defaults():
    proc = run_cli("send", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.decode().split())  # the help wraps lines
    for default in ("(default: 127.0.0.1:5235)", "(default: .ccs-emulator/tls/ca.pem)",
                    "(default: 123456789)", "(default: any-key)", "(default: 10.0)"):
        assert default in text, (default, text)


def test_another_ca(server, tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "other-ca.pem"), "-days", "1",
                    "-subj", "/CN=other"], check=True, capture_output=True, timeout=60)
    proc = run_cli("send", "--server", f"127.0.0.1:{server.ccs_port}", "--to", "x", "--ca", str(tmp_path / "other-ca.pem"))
    assert proc.returncode == 2, proc
    [line] = json_lines(proc.stdout)
    assert line["error"].startswith("TLS handshake failed: CERTIFICATE_VERIFY_FAILED (the server's certificate is "
                                    "not from the trusted CA)"), line


def test_wait_receipt_gives_up_after_the_timeout(server):
    # The device is registered but never connects: the ACK comes, the receipt cannot.
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.app", [sender])["token"]
    proc = send(server, "--to", token, "--sender", sender, "--message-id", "send-dr-late", "--wait-receipt",
                "--timeout", "1")
    assert proc.returncode == 2, proc
    ack, error = json_lines(proc.stdout)
    assert ack["message_type"] == "ack" and ack["message_id"] == "send-dr-late", ack
    assert error["error"].startswith("no delivery receipt for send-dr-late within 1 s"), error


def test_the_same_message_over_each_api(server, tmp_path):
    """`send --api ccs|legacy|v1`: one message, three APIs, the same stored message."""
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.apis", [sender])["token"]
    creds = tmp_path / "sa.json"
    made = run_cli("credentials", "--project", sender, "--data-dir", str(server.data_dir),
                   "--emulator", server.http_base, "--out", str(creds))
    assert made.returncode == 0, made
    fields = ["--to", token, "--data", "k=v", "--priority", "high", "--ttl", "600", "--collapse-key", "ck",
              "--notification", "title=Hi,body=there"]

    ccs = send(server, *fields, "--sender", sender)
    assert ccs.returncode == 0 and json_lines(ccs.stdout)[0]["message_type"] == "ack", ccs
    legacy = run_cli("send", "--api", "legacy", "--emulator", server.http_base, "--key", "k", *fields)
    assert legacy.returncode == 0, legacy
    [answer] = json_lines(legacy.stdout)
    assert answer["success"] == 1 and answer["failure"] == 0 and answer["results"][0]["message_id"].startswith("0:"), answer
    v1 = run_cli("send", "--api", "v1", "--emulator", server.http_base, "--credentials", str(creds), *fields)
    assert v1.returncode == 0, v1
    [answer] = json_lines(v1.stdout)
    assert answer["name"].startswith(f"projects/{sender}/messages/0:"), answer

    # Collapsed onto one queue entry (same collapse key), stored as each API delivers it.
    status, device = get_device(server.http_base, token)
    assert status == 200, device
    [entry] = device["queue"]
    assert entry["sender_id"] == sender and entry["priority"] == "high" and entry["time_to_live"] == 600, entry
    assert entry["payload"]["data"] == {"k": "v"}, entry
    assert entry["payload"]["notification"] == {"title": "Hi", "body": "there"}, entry

    # Refusals exit 1 with the API's own answer.
    bad = run_cli("send", "--api", "legacy", "--emulator", server.http_base, "--to", "not-a-token")
    assert bad.returncode == 1 and json_lines(bad.stdout)[0]["results"] == [{"error": "InvalidRegistration"}], bad
    bad = run_cli("send", "--api", "v1", "--emulator", server.http_base, "--credentials", str(creds), "--to", "nope")
    assert bad.returncode == 1 and json_lines(bad.stdout)[0]["error"]["status"] == "INVALID_ARGUMENT", bad
    usage = run_cli("send", "--api", "v1", "--to", token)
    assert usage.returncode != 0 and b"--credentials" in usage.stderr, usage
