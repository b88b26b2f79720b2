"""HTTP/2 on the TLS listener (--https-port, and proxy mode's tunnels, which reach it): ALPN `h2` as
fcm.googleapis.com answers it, HTTP/1.1 for a client that does not offer it. Clients, unmodified:
httpx with HTTP/2 (the h2 package, as firebase-admin's async API uses it), firebase-admin 7.x's
send_each_async / send_each_for_multicast(_async) with the base-URL override its source offers, and
curl --http2."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess

import httpx

from ccs_support import new_sender_id
from ccs_support.fcm_http import access_token, credentials_file, run_firebase

TIMEOUT = 15.0


def tls_context(ca: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca)


def v1_body(token: str, n: int) -> dict:
    return {"message": {"token": token, "data": {"n": str(n)}}}


def test_h2_on_the_https_port_and_through_the_proxy(start_server, devices, tmp_path):
    srv = start_server(extra_args=["--https-port", "0", "--proxy-port", "0"])
    https, proxy = srv.ready["https_port"], srv.ready["proxy_port"]
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    auth = {"Authorization": f"Bearer {access_token(creds)}"}
    dev = devices(srv, "com.example.h2", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)

    path = f"/v1/projects/{sender}/messages:send"
    with httpx.Client(http2=True, verify=tls_context(srv.ca_cert), trust_env=False, timeout=TIMEOUT) as direct:
        r = direct.post(f"https://localhost:{https}{path}", json=v1_body(token, 1), headers=auth)
        assert r.http_version == "HTTP/2" and r.status_code == 200, (r.http_version, r.status_code, r.text)
        assert r.json()["name"].startswith(f"projects/{sender}/messages/0:"), r.text
        # Errors keep Google's shape over HTTP/2.
        bad = direct.post(f"https://localhost:{https}{path}", json=v1_body("not-a-token", 0), headers=auth)
        assert bad.http_version == "HTTP/2" and bad.status_code == 400, (bad.status_code, bad.text)
        assert bad.json()["error"]["status"] == "INVALID_ARGUMENT", bad.text
    with httpx.Client(http2=True, verify=tls_context(srv.ca_cert), proxy=f"http://127.0.0.1:{proxy}",
                      trust_env=False, timeout=TIMEOUT) as tunnelled:
        r = tunnelled.post(f"https://fcm.googleapis.com{path}", json=v1_body(token, 2), headers=auth)
        assert r.http_version == "HTTP/2" and r.status_code == 200, (r.http_version, r.status_code, r.text)

    # Many streams at once on one connection, as an HTTP/2 client sends a batch.
    async def concurrent() -> list[httpx.Response]:
        async with httpx.AsyncClient(http2=True, verify=tls_context(srv.ca_cert), trust_env=False,
                                     timeout=TIMEOUT, limits=httpx.Limits(max_connections=1)) as client:
            return await asyncio.gather(*[
                client.post(f"https://localhost:{https}{path}", json=v1_body(token, n), headers=auth)
                for n in range(3, 23)])
    answers = asyncio.run(concurrent())
    assert all(a.http_version == "HTTP/2" and a.status_code == 200 for a in answers), \
        [(a.http_version, a.status_code, a.text) for a in answers]
    assert len({a.json()["name"] for a in answers}) == 20

    received = [dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"] for _ in range(22)]
    assert sorted(int(m["data"]["n"]) for m in received) == list(range(1, 23)), received


def test_a_client_without_h2_still_gets_http_1_1(start_server):
    srv = start_server(extra_args=["--https-port", "0"])
    with httpx.Client(http2=False, verify=tls_context(srv.ca_cert), trust_env=False, timeout=TIMEOUT) as client:
        r = client.get(f"https://localhost:{srv.ready['https_port']}/emulator/v1/health")
    assert r.http_version == "HTTP/1.1" and r.json() == {"status": "ok"}, (r.http_version, r.text)


def test_firebase_admin_async_and_multicast_over_h2(start_server, devices, tmp_path):
    srv = start_server(extra_args=["--https-port", "0"])
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    dev = devices(srv, "com.example.h2", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)

    # firebase-admin's async sends go through its httpx client with HTTP/2 on; its sync ones through
    # requests (HTTP/1.1). The base URL is the TLS port here, so the first negotiate h2.
    result = run_firebase({"credentials": str(creds), "fcm_base": f"https://localhost:{srv.ready['https_port']}",
                           "ops": [
        {"op": "send_each_async", "messages": [{"token": token, "data": {"via": "async"}}, {"token": "not-a-token"}]},
        {"op": "send_multicast_async", "tokens": [token, "not-a-token"], "message": {"data": {"via": "multicast-async"}}},
        {"op": "send_multicast", "tokens": [token], "message": {"data": {"via": "multicast"}}},
        {"op": "send_each_async", "messages": [{"token": token, "data": {"via": "dry"}}], "dry_run": True},
    ]}, workdir=tmp_path, ca=srv.ca_cert)
    each, multicast_async, multicast, dry = result["results"]
    for batch in (each, multicast_async):
        assert batch["success_count"] == 1 and batch["failure_count"] == 1, batch
        assert batch["responses"][0]["name"].startswith(f"projects/{sender}/messages/0:"), batch
        assert batch["responses"][1]["error"] == "InvalidArgumentError", batch
    assert multicast["success_count"] == 1, multicast
    assert dry["responses"] == [{"name": f"projects/{sender}/messages/fake_message_id"}], dry
    received = [dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"] for _ in range(3)]
    assert sorted(m["data"]["via"] for m in received) == ["async", "multicast", "multicast-async"], received


def test_curl_http2_legacy_plain_text_form(start_server):
    srv = start_server(extra_args=["--https-port", "0"])
    proc = subprocess.run(
        ["curl", "-sS", "--http2", "--cacert", srv.ca_cert, "-w", "\n%{http_version} %{http_code}",
         "-H", "Authorization: key=some-server-key", "--data", "registration_id=not-a-token&data.k=v",
         f"https://localhost:{srv.ready['https_port']}/fcm/send"],
        capture_output=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    body, _, status = proc.stdout.decode().rpartition("\n")
    assert status == "2 200", (status, body)
    assert body.strip() == "Error=InvalidRegistration", body
    # The JSON form on the same connection type.
    proc = subprocess.run(
        ["curl", "-sS", "--http2", "--cacert", srv.ca_cert, "-H", "Authorization: key=some-server-key",
         "-H", "Content-Type: application/json", "--data", '{"registration_ids":["a","b"]}',
         f"https://localhost:{srv.ready['https_port']}/fcm/send"], capture_output=True, timeout=TIMEOUT)
    answer = json.loads(proc.stdout)
    assert answer["failure"] == 2 and answer["results"] == [{"error": "InvalidRegistration"}] * 2, answer
