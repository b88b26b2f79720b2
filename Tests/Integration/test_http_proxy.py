"""--https-port and proxy mode (--proxy-port): firebase-admin 7.x with an unmodified Google-style
service-account file (token_uri https://oauth2.googleapis.com/token) and no code change, only
HTTPS_PROXY and the development CA in REQUESTS_CA_BUNDLE / SSL_CERT_FILE; raw sockets for the proxy's
refusals and for CCS through the tunnel; aiofcm on the second CCS port (--ccs-preprod-port, FCM's
pre-production 5236)."""

from __future__ import annotations

import json
import socket
import ssl

from ccs_support import http_json, new_key, new_sender_id, register_device, run_aiofcm
from ccs_support.fcm_http import google_style_credentials, run_firebase

TIMEOUT = 15.0


def proxy_exchange(port: int, request: bytes) -> bytes:
    """Sends `request` to the proxy and reads its whole answer (the proxy closes after a refusal)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        return data


def open_tunnel(port: int, target: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(1)
        assert chunk, answer
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    return s


def test_https_port_serves_the_same_routes(start_server):
    srv = start_server(extra_args=["--https-port", "0"])
    port = srv.ready["https_port"]
    assert isinstance(port, int) and port > 0 and "proxy_port" not in srv.ready, srv.ready
    context = ssl.create_default_context(cafile=srv.ca_cert)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw_socket:
        with context.wrap_socket(raw_socket, server_hostname="fcm.googleapis.com") as s:
            body = b'{"to":"not-a-token"}'
            s.sendall(b"POST /fcm/send HTTP/1.1\r\nHost: fcm.googleapis.com\r\nAuthorization: key=k\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                      % (len(body), body))
            data = b""
            while chunk := s.recv(4096):
                data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), data
    assert json.loads(payload)["results"] == [{"error": "InvalidRegistration"}], data


def test_firebase_admin_through_the_proxy_unmodified(start_server, devices, tmp_path):
    srv = start_server(extra_args=["--proxy-port", "0"])
    proxy = srv.ready["proxy_port"]
    assert "https_port" not in srv.ready, srv.ready
    sender = new_sender_id()
    creds = tmp_path / "google-style.json"
    google_style_credentials(srv, sender, creds)
    dev = devices(srv, "com.example.proxy", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)

    result = run_firebase({"credentials": str(creds), "fcm_base": None, "ops": [
        {"op": "send", "message": {"token": token, "data": {"via": "proxy"}}},
        {"op": "send", "message": {"token": "not-a-token"}},
        {"op": "send_each", "messages": [{"token": token, "data": {"each": "1"}}, {"token": "not-a-token"}]},
        {"op": "send", "message": {"token": token, "data": {"dry": "run"}}, "dry_run": True},
    ]}, workdir=tmp_path, proxy=f"http://127.0.0.1:{proxy}", ca=srv.ca_cert)
    sent, invalid, each, dry = result["results"]
    assert sent.get("name", "").startswith(f"projects/{sender}/messages/0:"), result
    assert invalid["error"] == "InvalidArgumentError", result
    assert each["success_count"] == 1 and each["failure_count"] == 1, each
    assert each["responses"][1]["error"] == "InvalidArgumentError", each
    assert dry == {"name": f"projects/{sender}/messages/fake_message_id"}, dry
    received = [dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"] for _ in range(2)]
    assert [m["data"] for m in received] == [{"via": "proxy"}, {"each": "1"}], received
    assert all(m["from"] == sender for m in received), received


def test_proxy_refuses_other_hosts_and_garbage(start_server):
    srv = start_server(extra_args=["--proxy-port", "0"])
    port = srv.ready["proxy_port"]

    answer = proxy_exchange(port, b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403 Forbidden\r\n"), answer
    assert b"not a host the emulator plays" in answer, answer
    # The right host on a port the emulator does not play.
    assert proxy_exchange(port, b"CONNECT fcm.googleapis.com:80 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403 ")
    for garbage in [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"CONNECT fcm.googleapis.com HTTP/1.1\r\n\r\n",
                    b"CONNECT fcm.googleapis.com:99999 HTTP/1.1\r\n\r\n", b"hello\r\n\r\n",
                    b"CONNECT " + b"a" * 9000 + b":443 HTTP/1.1\r\n\r\n"]:
        answer = proxy_exchange(port, garbage)
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), (garbage[:40], answer)
    assert proxy_exchange(port, b"GET http://fcm.googleapis.com/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")

    # Still serving: a tunnel to CCS reaches the XMPP pipeline over TLS, with the CCS host name checked.
    data = stream_features_through(port, "fcm-xmpp.googleapis.com:5235", srv.ca_cert)
    assert b"<mechanism>PLAIN</mechanism>" in data, data


def stream_features_through(port: int, target: str, ca_cert: str) -> bytes:
    """Opens a CCS stream through the proxy's tunnel to `target` (TLS with the CCS host name checked)
    and returns what the server sent up to its stream features."""
    s = open_tunnel(port, target)
    context = ssl.create_default_context(cafile=ca_cert)
    with context.wrap_socket(s, server_hostname="fcm-xmpp.googleapis.com") as tls:
        tls.sendall(b'<stream:stream to="gcm.googleapis.com" version="1.0" xmlns="jabber:client" '
                    b'xmlns:stream="http://etherx.jabber.org/streams">')
        data = b""
        while b"</stream:features>" not in data:
            chunk = tls.recv(4096)
            assert chunk, data
            data += chunk
        return data


def test_the_pre_production_ccs_port_is_the_same_service(start_server, tmp_path):
    srv = start_server(extra_args=["--ccs-preprod-port", "0", "--proxy-port", "0"])
    preprod = srv.ready["ccs_preprod_port"]
    assert preprod not in (0, srv.ccs_port), srv.ready
    status, info = http_json("GET", f"{srv.http_base}/emulator/v1/info")
    assert status == 200 and info["ccs_preprod_port"] == preprod, info
    # aiofcm on the second port: the same senders, devices and queues as the first.
    sender, key = new_sender_id(), new_key()
    token = register_device(srv.http_base, "com.example.preprod", [sender])["token"]
    for port, message_id in ((preprod, "pre-1"), (srv.ccs_port, "prod-1")):
        result = run_aiofcm({"host": "127.0.0.1", "port": port, "sender_id": sender, "api_key": key, "timeout": 30,
                             "messages": [{"device_token": token, "message_id": message_id, "data": {"k": "v"}}]},
                            srv.ca_cert, workdir=tmp_path)
        assert [r.get("is_successful") for r in result["responses"]] == [True], result
    status, device = http_json("GET", f"{srv.http_base}/emulator/v1/devices/{token}")
    assert [q["app_message_id"] for q in device["queue"]] == ["pre-1", "prod-1"], device
    # Proxy mode tunnels Google's pre-production port to it, and production to the CCS port.
    for target in ("fcm-xmpp.googleapis.com:5236", "fcm-xmpp.googleapis.com:5235"):
        assert b"<mechanism>PLAIN</mechanism>" in stream_features_through(srv.ready["proxy_port"], target, srv.ca_cert)


def test_no_pre_production_port_unless_asked(server):
    assert "ccs_preprod_port" not in server.ready, server.ready
    status, info = http_json("GET", f"{server.http_base}/emulator/v1/info")
    assert status == 200 and info["ccs_preprod_port"] is None, info
