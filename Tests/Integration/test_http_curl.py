"""The FCM HTTP routes with curl, as a person tries them: the plain-text legacy form and every error
status an outside request can provoke (500 needs a failing store: FCMHTTPTests injects one; 429 and
503 are never answered, docs/http-api.md), expired and forged Bearer tokens, and the token endpoint."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from ccs_support import http_json, new_key, new_sender_id, register_device
from ccs_support.fcm_http import access_token, credentials_file

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


def curl(*args: str, data: str | None = None) -> tuple[int, str, str]:
    """(status, headers text, body) of one curl request; never through a proxy."""
    cmd = ["curl", "-sS", "--noproxy", "*", "--max-time", "15", "-D", "-", *args]
    if data is not None:
        cmd += ["--data-binary", "@-"]
    proc = subprocess.run(cmd, input=(data or "").encode(), capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode("utf-8", "replace")
    head, _, body = text.partition("\r\n\r\n")
    return int(head.split(" ", 2)[1]), head, body


def google_error(body: str) -> dict:
    return json.loads(body)["error"]


def test_legacy_plain_text_form_and_errors(server):
    token = register_device(server.http_base, "com.example.curl", [new_sender_id()])["token"]
    url = f"{server.http_base}/fcm/send"
    form = ["-H", "Authorization: key=k", "-H", "Content-Type: application/x-www-form-urlencoded;charset=UTF-8"]
    status, head, body = curl(url, *form, data=f"registration_id={token}&data.greeting=hello+world&collapse_key=c")
    assert status == 200 and "text/plain" in head and body.startswith("id=0:"), (status, body)
    status, _, body = curl(url, *form, data="registration_id=unknown&data.k=v")
    assert status == 200 and body.strip() == "Error=InvalidRegistration", body
    status, _, body = curl(url, *form, data="registration_id=%zz")
    assert status == 400, body

    json_headers = ["-H", "Content-Type: application/json"]
    assert curl(url, *json_headers, data='{"to":"x"}')[0] == 401
    assert curl(url, "-H", "Authorization: key=", *json_headers, data='{"to":"x"}')[0] == 401
    status, _, body = curl(url, "-H", "Authorization: key=k", *json_headers, data="{not json")
    assert status == 400 and "JSON_PARSING_ERROR" in body, body
    status, _, body = curl(url, "-H", f"Authorization: key={new_key()}", *json_headers,
                           data='{"to":"/topics/nobody-' + new_sender_id() + '"}')
    # Permissive mode: a topic belongs to a sender, no sender has used this key, and no device holds
    # the topic.
    assert status == 401 and "no sender is known by this server key" in body, body
    # Key k sent to the sender's token above: the sender is known by it now.
    status, _, body = curl(url, "-H", "Authorization: key=k", *json_headers, data='{"to":"/topics/news"}')
    assert status == 200 and isinstance(json.loads(body)["message_id"], int), body
    status, _, _ = curl(url, "-H", "Authorization: key=k", *json_headers, data='{"to":"' + "x" * (1 << 20) + '"}')
    assert status == 413
    # The server still answers after all of that.
    assert curl(f"{server.http_base}/emulator/v1/info")[0] == 200


def test_v1_errors_and_bearer_tokens(start_server, tmp_path):
    srv = start_server(extra_args=["--clock", "virtual"])
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    token = register_device(srv.http_base, "com.example.curl", [sender])["token"]
    other = register_device(srv.http_base, "com.example.curl", [new_sender_id()])["token"]
    gone = register_device(srv.http_base, "com.example.curl", [sender])["token"]
    assert http_json("POST", f"{srv.http_base}/emulator/v1/devices/{gone}/uninstall")[0] == 200
    access = access_token(creds)
    url = f"{srv.http_base}/v1/projects/{sender}/messages:send"
    bearer = ["-H", f"Authorization: Bearer {access}", "-H", "Content-Type: application/json"]

    def send(message: dict, headers=bearer, at: str = url) -> tuple[int, str, str]:
        return curl(at, *headers, data=json.dumps({"message": message}))

    status, _, body = send({"token": token, "data": {"a": "b"}})
    assert status == 200 and json.loads(body)["name"].startswith(f"projects/{sender}/messages/0:"), body
    cases = [
        (send({"token": token, "android": {"ttl": "soon"}}), 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        (send({"token": "not-a-token"}), 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        (send({"token": other}), 403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"),
        (send({"token": gone}), 404, "NOT_FOUND", "UNREGISTERED"),
        (send({"token": token}, at=f"{srv.http_base}/v1/projects/Not_A_Project/messages:send"), 404, "NOT_FOUND", None),
        (send({"topic": "bad name"}), 400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        (send({"token": token}, headers=["-H", "Content-Type: application/json"]), 401, "UNAUTHENTICATED", None),
        (send({"token": token}, headers=["-H", f"Authorization: Bearer {access[:-3]}xyz"]), 401, "UNAUTHENTICATED", None),
        (send({"token": token}, headers=["-H", "Authorization: Bearer ya29.made-up"]), 401, "UNAUTHENTICATED", None),
    ]
    for (status, head, body), want_status, want_rpc, want_fcm in cases:
        error = google_error(body)
        assert status == want_status and error["status"] == want_rpc, (status, body)
        codes = [d.get("errorCode") for d in error.get("details", []) if "FcmError" in d["@type"]]
        assert codes == ([want_fcm] if want_fcm else []), body
        if status == 401:
            assert "www-authenticate: bearer" in head.lower(), head
    status, _, _ = curl(url, *bearer, data='{"message":{"token":"' + "x" * (1 << 20) + '"}}')
    assert status == 413

    # Expired on the engine's (virtual) clock.
    assert http_json("POST", f"{srv.http_base}/emulator/v1/clock/advance", {"seconds": 3600})[0] == 200
    status, _, body = send({"token": token})
    assert status == 401 and "invalid authentication credentials" in google_error(body)["message"], body


def test_token_endpoint_errors(server):
    url = f"{server.http_base}/token"
    form = ["-H", "Content-Type: application/x-www-form-urlencoded"]
    for data, error in [("", "invalid_request"), ("grant_type=password", "unsupported_grant_type"),
                        ("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c", "invalid_grant"),
                        ("%zz", "invalid_request")]:
        status, _, body = curl(url, *form, data=data)
        assert status == 400 and json.loads(body)["error"] == error, (data, status, body)
