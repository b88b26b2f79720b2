"""HTTP v1 and OAuth2 with firebase-admin 7.x from PyPI, unmodified except for the base-URL override
its own source offers (`messaging._MessagingService.FCM_URL`), using the service-account file that
`ccs-emulator credentials` writes (its token_uri points at the emulator); plus raw requests for
expired and forged Bearer tokens and Google's error shape."""

from __future__ import annotations

import json

from ccs_support import get_device, http_json, new_sender_id, register_device
from ccs_support.fcm_http import access_token, credentials_file, raw, run_firebase


def firebase(server, creds, ops, tmp_path) -> list:
    result = run_firebase({"credentials": str(creds), "fcm_base": server.http_base, "ops": ops}, workdir=tmp_path)
    return result["results"]


def test_send_reaches_the_device(server, devices, tmp_path):
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    file = credentials_file(server, sender, creds)
    assert file["token_uri"] == server.http_base + "/token" and file["type"] == "service_account", file
    dev = devices(server, "com.example.v1", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)

    [answer] = firebase(server, creds, [{"op": "send", "message": {
        "token": token, "data": {"hello": "v1"},
        "android": {"ttl": 3600, "priority": "high", "collapse_key": "c1"}}}], tmp_path)
    assert answer.get("name", "").startswith(f"projects/{sender}/messages/0:"), answer
    event = dev.expect(lambda e: e.get("event") == "message", timeout=20)
    assert event["message"]["data"] == {"hello": "v1"}, event
    assert event["message"]["from"] == sender and event["message"]["priority"] == "high", event
    assert answer["name"].endswith("/" + event["message"]["message_id"]), (answer, event)


def test_send_each_unregistered_and_dry_run(server, tmp_path):
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    kept = register_device(server.http_base, "com.example.v1", [sender])["token"]
    gone = register_device(server.http_base, "com.example.v1", [sender])["token"]
    status, _ = http_json("POST", f"{server.http_base}/emulator/v1/devices/{gone}/uninstall")
    assert status == 200

    each, single, dry = firebase(server, creds, [
        {"op": "send_each", "messages": [{"token": kept, "data": {"n": "1"}}, {"token": gone, "data": {"n": "2"}},
                                         {"token": kept, "notification": {"title": "Hi", "body": "there"}}]},
        {"op": "send", "message": {"token": gone, "data": {"a": "b"}}},
        {"op": "send", "message": {"token": kept, "data": {"dry": "run"}}, "dry_run": True},
    ], tmp_path)
    assert each["success_count"] == 2 and each["failure_count"] == 1, each
    assert each["responses"][0]["name"].startswith(f"projects/{sender}/messages/0:"), each
    assert each["responses"][1]["error"] == "UnregisteredError", each
    assert each["responses"][2]["name"].startswith(f"projects/{sender}/messages/0:"), each
    assert single["error"] == "UnregisteredError", single
    assert dry == {"name": f"projects/{sender}/messages/fake_message_id"}, dry

    # The two real sends wait in the queue; the dry run does not. send_each sends its messages on
    # several threads at once, so their order in the queue is not fixed.
    _, device = get_device(server.http_base, kept)
    payloads = [q["payload"] for q in device["queue"]]
    assert len(payloads) == 2, device
    assert [p["data"] for p in payloads if "data" in p] == [{"n": "1"}], device
    assert [p["notification"] for p in payloads if "notification" in p] == [{"title": "Hi", "body": "there"}], device


def test_sender_mismatch_and_invalid_token(server, tmp_path):
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    other = register_device(server.http_base, "com.example.v1", [new_sender_id()])["token"]
    mismatch, invalid = firebase(server, creds, [
        {"op": "send", "message": {"token": other}},
        {"op": "send", "message": {"token": "not-a-token"}},
    ], tmp_path)
    assert mismatch["error"] == "SenderIdMismatchError", mismatch
    assert invalid["error"] == "InvalidArgumentError" and "registration token" in invalid["message"], invalid


def test_credentials_from_the_running_server(server, tmp_path):
    sender = new_sender_id()
    status, file = http_json("POST", f"{server.http_base}/emulator/v1/credentials", {"project_id": sender})
    assert status == 200 and file["project_id"] == sender, file
    assert file["token_uri"] == server.http_base + "/token", file
    creds = tmp_path / "from-server.json"
    creds.write_text(json.dumps(file))
    token = register_device(server.http_base, "com.example.v1", [sender])["token"]
    [answer] = firebase(server, creds, [{"op": "send", "message": {"token": token, "data": {"a": "b"}}}], tmp_path)
    assert answer.get("name", "").startswith(f"projects/{sender}/messages/"), answer


def test_missing_expired_and_forged_bearer_tokens(start_server, tmp_path):
    srv = start_server(extra_args=["--clock", "virtual"])
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    token = register_device(srv.http_base, "com.example.v1", [sender])["token"]
    url = f"{srv.http_base}/v1/projects/{sender}/messages:send"
    body = json.dumps({"message": {"token": token, "data": {"a": "b"}}})

    status, headers, text = raw("POST", url, body, {"Content-Type": "application/json"})
    error = json.loads(text)["error"]
    assert status == 401 and error["status"] == "UNAUTHENTICATED" and error["code"] == 401, text
    assert headers["www-authenticate"].startswith("Bearer"), headers

    access = access_token(creds)
    bearer = {"Content-Type": "application/json", "Authorization": f"Bearer {access}"}
    status, _, text = raw("POST", url, body, bearer)
    assert status == 200 and json.loads(text)["name"].startswith(f"projects/{sender}/messages/0:"), text

    forged = access[:-2] + ("AA" if not access.endswith("AA") else "BB")
    status, _, text = raw("POST", url, body, {"Content-Type": "application/json", "Authorization": f"Bearer {forged}"})
    assert status == 401 and json.loads(text)["error"]["status"] == "UNAUTHENTICATED", text

    # Access tokens live 3599 s on the engine's clock, the virtual one included.
    status, _ = http_json("POST", f"{srv.http_base}/emulator/v1/clock/advance", {"seconds": 3600})
    assert status == 200
    status, _, text = raw("POST", url, body, bearer)
    assert status == 401 and "invalid authentication credentials" in json.loads(text)["error"]["message"], text


def test_invalid_argument_names_the_field(server, tmp_path):
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    token = register_device(server.http_base, "com.example.v1", [sender])["token"]
    bearer = {"Content-Type": "application/json", "Authorization": f"Bearer {access_token(creds)}"}
    url = f"{server.http_base}/v1/projects/{sender}/messages:send"
    status, _, text = raw("POST", url, json.dumps({"message": {"token": token, "android": {"ttl": "soon"}}}), bearer)
    error = json.loads(text)["error"]
    assert status == 400 and error["status"] == "INVALID_ARGUMENT", text
    assert "message.android.ttl" in error["message"], text
    fcm = [d for d in error["details"] if d["@type"] == "type.googleapis.com/google.firebase.fcm.v1.FcmError"]
    assert fcm == [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "INVALID_ARGUMENT"}], error


def test_strict_mode_verifies_the_assertion_signature(start_server, tmp_path):
    sender = new_sender_id()
    config = tmp_path / "senders.json"
    config.write_text(json.dumps({"senders": [{"sender_id": sender, "server_key": "k"}]}))
    srv = start_server(auth="strict", config=config)
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    token = register_device(srv.http_base, "com.example.v1", [sender])["token"]
    [ok] = firebase(srv, creds, [{"op": "send", "message": {"token": token}}], tmp_path)
    assert ok.get("name", "").startswith(f"projects/{sender}/messages/"), ok

    # The same file with another private key: a key this emulator never issued.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    forged = json.loads(creds.read_text())
    forged["private_key"] = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    forged_path = tmp_path / "forged.json"
    forged_path.write_text(json.dumps(forged))
    [refused] = firebase(srv, forged_path, [{"op": "send", "message": {"token": token}}], tmp_path)
    assert "error" in refused and "Invalid JWT Signature" in refused["message"], refused


def test_named_project_maps_to_its_sender(start_server, devices, tmp_path):
    """`project_id` on a sender in the config file: projects/NAME/messages:send sends as that sender."""
    sender = new_sender_id()
    config = tmp_path / "senders.json"
    config.write_text(json.dumps({"senders": [{"sender_id": sender, "server_key": "k", "project_id": "demo-project"}]}))
    srv = start_server(auth="strict", config=config)
    creds = tmp_path / "sa.json"
    credentials_file(srv, "demo-project", creds)
    dev = devices(srv, "com.example.named", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    [answer] = firebase(srv, creds, [{"op": "send", "message": {"token": token, "data": {"p": "named"}}}], tmp_path)
    assert answer.get("name", "").startswith("projects/demo-project/messages/0:"), answer
    event = dev.expect(lambda e: e.get("event") == "message", timeout=20)
    assert event["message"]["from"] == sender and event["message"]["data"] == {"p": "named"}, event

    # A name the config file does not list is refused in strict mode.
    other = tmp_path / "other.json"
    credentials_file(srv, "other-project", other)
    [refused] = firebase(srv, other, [{"op": "send", "message": {"token": token}}], tmp_path)
    assert refused["error"] == "PermissionDeniedError", refused


def test_bad_project_id_in_the_config_file_stops_the_server(tmp_path):
    from ccs_support.server import EmulatorServer
    import pytest

    config = tmp_path / "senders.json"
    config.write_text(json.dumps({"senders": [{"sender_id": "42", "server_key": "k", "project_id": "Bad_Name"}]}))
    srv = EmulatorServer(tmp_path / "data", config=config)
    with pytest.raises(RuntimeError) as failure:
        srv.start()
    assert 'senders[0] (sender 42): "project_id" "Bad_Name" is invalid' in str(failure.value), failure.value
