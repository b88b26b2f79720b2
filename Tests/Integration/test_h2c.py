"""HTTP/2 in cleartext on the plain --http-port (docs/http-api.md, "HTTP/2 in cleartext"): prior
knowledge, as `curl --http2-prior-knowledge` and httpx with `http1=False, http2=True` (the h2
package) speak it, for a v1 send and an admin call; HTTP/1.1 on the same port still answers, and a
request with `Upgrade: h2c` (curl --http2 on http://) is answered over HTTP/1.1."""

from __future__ import annotations

import json
import socket
import subprocess

import httpx

from ccs_support import new_sender_id
from ccs_support.fcm_http import access_token, credentials_file

TIMEOUT = 15.0


def curl(*args: str) -> tuple[str, str]:
    """curl's body and `HTTP_VERSION STATUS`."""
    proc = subprocess.run(["curl", "-sS", "-w", "\n%{http_version} %{http_code}", *args],
                          capture_output=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    body, _, status = proc.stdout.decode().rpartition("\n")
    return body, status


def test_prior_knowledge_h2_for_v1_and_the_admin_api(server, devices, tmp_path):
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    bearer = access_token(creds)
    dev = devices(server, "com.example.h2c", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    send = f"{server.http_base}/v1/projects/{sender}/messages:send"

    body, status = curl("--http2-prior-knowledge", "-H", f"Authorization: Bearer {bearer}",
                        "-H", "Content-Type: application/json",
                        "--data", json.dumps({"message": {"token": token, "data": {"via": "curl-h2c"}}}), send)
    assert status == "2 200" and json.loads(body)["name"].startswith(f"projects/{sender}/messages/0:"), (status, body)
    body, status = curl("--http2-prior-knowledge", f"{server.http_base}/emulator/v1/info")
    assert status == "2 200" and json.loads(body)["http_port"] == server.http_port, (status, body)

    with httpx.Client(http1=False, http2=True, trust_env=False, timeout=TIMEOUT) as client:
        r = client.post(send, json={"message": {"token": token, "data": {"via": "httpx-h2c"}}},
                        headers={"Authorization": f"Bearer {bearer}"})
        assert r.http_version == "HTTP/2" and r.status_code == 200, (r.http_version, r.status_code, r.text)
        # Errors keep Google's shape.
        bad = client.post(send, json={"message": {"token": "not-a-token"}}, headers={"Authorization": f"Bearer {bearer}"})
        assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT", bad.text
        admin = client.get(f"{server.http_base}/emulator/v1/devices/{token}")
        assert admin.http_version == "HTTP/2" and admin.json()["token"] == token, admin.text
    received = [dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"]["data"]["via"] for _ in range(2)]
    assert sorted(received) == ["curl-h2c", "httpx-h2c"], received


def test_http1_and_the_upgrade_form_keep_working_on_the_same_port(server):
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT) as s:
        s.sendall(b"GET /emulator/v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    # curl --http2 on http:// asks for `Upgrade: h2c`; the answer comes over HTTP/1.1.
    body, status = curl("--http2", f"{server.http_base}/emulator/v1/health")
    assert status == "1.1 200", (status, body)
    # Bytes that start like the preface and then differ are HTTP/1.1 (and answered as a bad request).
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=TIMEOUT) as s:
        s.sendall(b"PRI * HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = s.recv(65536)
    # HTTP/1.1's parser refuses it (an answer or a close), never an HTTP/2 SETTINGS frame.
    assert answer == b"" or answer.startswith(b"HTTP/1.1 "), answer[:200]
    body, status = curl(f"{server.http_base}/emulator/v1/health")
    assert status == "1.1 200", (status, body)
