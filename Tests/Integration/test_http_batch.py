"""POST /batch: googleapiclient's BatchHttpRequest (what older firebase-admin send_all used), unmodified,
against the emulator's HTTP port; answers in request order, one per part, matched by Content-ID."""

from __future__ import annotations

import json

from ccs_support import get_device, http_json, new_sender_id, register_device
from ccs_support.fcm_http import access_token, credentials_file, raw, run_driver


def test_batch_answers_each_part_in_order(server, tmp_path):
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    kept = register_device(server.http_base, "com.example.batch", [sender])["token"]
    gone = register_device(server.http_base, "com.example.batch", [sender])["token"]
    status, _ = http_json("POST", f"{server.http_base}/emulator/v1/devices/{gone}/uninstall")
    assert status == 200

    result = run_driver("batch_driver.py", {
        "credentials": str(creds), "base": server.http_base, "project": sender,
        "messages": [{"token": kept, "data": {"n": "1"}}, {"token": gone, "data": {"n": "2"}},
                     {"token": kept, "data": {"n": "3"}}, {"token": kept, "android": {"ttl": "soon"}}],
    }, workdir=tmp_path)
    by_id = {r["id"]: r for r in result["responses"]}
    assert set(by_id) == {"m0", "m1", "m2", "m3"}, result
    assert by_id["m0"]["name"].startswith(f"projects/{sender}/messages/0:"), result
    assert by_id["m1"]["status"] == 404, result
    assert by_id["m1"]["error"]["details"][0]["errorCode"] == "UNREGISTERED", result
    assert by_id["m2"]["name"].startswith(f"projects/{sender}/messages/0:"), result
    assert by_id["m3"]["status"] == 400 and "message.android.ttl" in by_id["m3"]["error"]["message"], result

    # Parts are sent in order: the device's queue holds n=1 before n=3.
    _, device = get_device(server.http_base, kept)
    assert [q["payload"]["data"]["n"] for q in device["queue"]] == ["1", "3"], device


def test_batch_refuses_what_is_not_a_batch(server, tmp_path):
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    bearer = f"Bearer {access_token(creds)}"
    url = f"{server.http_base}/batch"

    status, _, text = raw("POST", url, "{}", {"Content-Type": "application/json", "Authorization": bearer})
    assert status == 400 and json.loads(text)["error"]["status"] == "INVALID_ARGUMENT", text

    # A part that is not messages:send gets its own 404; the batch itself is 200.
    body = ("--b1\r\nContent-Type: application/http\r\nContent-ID: <x>\r\n\r\n"
            f"GET /v1/projects/{sender}/messages HTTP/1.1\r\nAuthorization: {bearer}\r\n\r\n\r\n--b1--\r\n")
    status, headers, text = raw("POST", url, body, {"Content-Type": "multipart/mixed; boundary=b1"})
    assert status == 200 and headers["content-type"].startswith("multipart/mixed; boundary="), (status, text)
    assert "Content-ID: <response-x>" in text and "HTTP/1.1 404 Not Found" in text, text

    # No credentials in the part nor on the batch: that part is 401.
    body = ("--b1\r\nContent-Type: application/http\r\n\r\n"
            f"POST /v1/projects/{sender}/messages:send HTTP/1.1\r\nContent-Type: application/json\r\n\r\n"
            '{"message":{"token":"x"}}\r\n--b1--\r\n')
    status, _, text = raw("POST", url, body, {"Content-Type": "multipart/mixed; boundary=b1"})
    assert status == 200 and "HTTP/1.1 401 Unauthorized" in text and "UNAUTHENTICATED" in text, text

    # Garbage with a multipart Content-Type: 400, and the server still answers.
    status, _, text = raw("POST", url, "\x00\x01 not multipart", {"Content-Type": "multipart/mixed; boundary=b1"})
    assert status == 400, text
    status, _ = http_json("GET", f"{server.http_base}/emulator/v1/info")
    assert status == 200
