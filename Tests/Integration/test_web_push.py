"""Web Push delivery (`serve --web-push on`, docs/platforms.md): a web device whose subscription names a
push service of its own gets each message as RFC 8030 requests to its endpoint — here a push service
played by this test on loopback, which reads them as a browser would: decrypted with http_ece (RFC
8291, aes128gcm, PyPI) and the VAPID token (RFC 8292) checked with cryptography. The push service's
answers drive the device: 201 confirms, 500 is retried with backoff, 410 uninstalls the app."""

from __future__ import annotations

import base64
import json
import os
import queue
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from ccs_support import http_json, new_key, new_sender_id
from ccs_support.fcm_http import raw
from ccs_support.semantics import quote_token
from ccs_support.upstream import wait_until


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PushService:
    """Records every request; answers 201 unless `answers` holds statuses to give first. With
    `tls`, (certfile, keyfile): https."""

    def __init__(self, tls: tuple[str, str] | None = None):
        self.requests: queue.Queue = queue.Queue()
        self.answers: list[int] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = service.answers.pop(0) if service.answers else 201
                service.requests.put({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": body, "status": status})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next(self, timeout: float = 20.0) -> dict:
        return self.requests.get(timeout=timeout)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Browser:
    """A subscription's keys, and reading what the push service got as the browser would."""

    def __init__(self, endpoint: str):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        public = self.key.public_key().public_bytes(serialization.Encoding.X962,
                                                    serialization.PublicFormat.UncompressedPoint)
        self.subscription = {"endpoint": endpoint, "keys": {"p256dh": b64url(public), "auth": b64url(self.auth)}}

    def read(self, request: dict) -> dict:
        assert request["headers"]["content-encoding"] == "aes128gcm", request["headers"]
        plain = http_ece.decrypt(request["body"], private_key=self.key, auth_secret=self.auth, version="aes128gcm")
        return json.loads(plain)


def register_web(srv, sender: str, subscription: dict) -> tuple[int, dict]:
    """A web app's registration with its browser's push subscription (the admin API's answer)."""
    return http_json("POST", f"{srv.http_base}/emulator/v1/devices",
                     {"app": "https://app.example", "senders": [sender], "platform": "web", "subscription": subscription})


def legacy_send(srv, key: str, body: dict) -> dict:
    status, _, text = raw("POST", f"{srv.http_base}/fcm/send", json.dumps(body),
                          {"Authorization": f"key={key}", "Content-Type": "application/json"})
    assert status == 200, text
    return json.loads(text)


def check_vapid(request: dict, endpoint_origin: str, vapid_key: str) -> None:
    scheme, _, rest = request["headers"]["authorization"].partition(" ")
    assert scheme == "vapid", request["headers"]
    params = dict(p.strip().split("=", 1) for p in rest.split(","))
    assert params["k"] == vapid_key, params
    header, claims, signature = params["t"].split(".")
    assert json.loads(unb64url(header)) == {"typ": "JWT", "alg": "ES256"}
    assert json.loads(unb64url(claims))["aud"] == endpoint_origin
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(params["k"]))
    rs = unb64url(signature)
    der = encode_dss_signature(int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big"))
    public.verify(der, f"{header}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))  # raises if forged


def test_messages_go_to_the_push_service_encrypted_signed_and_its_answers_count(start_server):
    push = PushService()
    try:
        srv = start_server(extra_args=["--web-push", "on"])
        status, info = http_json("GET", f"{srv.http_base}/emulator/v1/info")
        vapid_key = info["web_push"]["vapid_public_key"]
        sender, key = new_sender_id(), new_key()
        origin = f"http://127.0.0.1:{push.port}"
        browser = Browser(f"{origin}/push/device-1")
        status, device = register_web(srv, sender, browser.subscription)
        assert status == 201, device
        token = device["token"]

        def legacy(body: dict) -> dict:
            return legacy_send(srv, key, body)

        # 201: delivered; the headers say the message's TTL, urgency and collapse key.
        answer = legacy({"to": token, "data": {"k": "v"}, "notification": {"title": "Hi"}, "priority": "high",
                         "collapse_key": "scores", "time_to_live": 600})
        assert answer["success"] == 1, answer
        first = push.next()
        assert first["path"] == "/push/device-1", first
        assert first["headers"]["urgency"] == "high" and first["headers"]["topic"] == "scores", first["headers"]
        assert 590 <= int(first["headers"]["ttl"]) <= 600, first["headers"]
        check_vapid(first, origin, vapid_key)
        message = browser.read(first)
        assert message["data"] == {"k": "v"} and message["notification"]["title"] == "Hi", message
        assert message["from"] == sender and message["message_id"] == answer["results"][0]["message_id"], message
        wait_until(lambda: http_json("GET", f"{srv.http_base}/emulator/v1/devices/{quote_token(token)}")[1]["queue"] == [],
                   20, "the message confirmed by the push service is still queued")

        # 500: the device goes offline, the message waits, and a later attempt delivers it.
        push.answers = [500]
        legacy({"to": token, "data": {"n": "2"}})
        refused = push.next()
        assert refused["status"] == 500
        retried = push.next(timeout=30)
        assert retried["status"] == 201 and browser.read(retried)["data"] == {"n": "2"}, retried
        assert browser.read(refused)["data"] == {"n": "2"}

        # 410: the subscription is gone, so is the app; the next send is NotRegistered.
        push.answers = [410]
        legacy({"to": token, "data": {"n": "3"}})
        assert push.next()["status"] == 410
        wait_until(lambda: http_json("GET", f"{srv.http_base}/emulator/v1/devices/{quote_token(token)}")[1]["status"]
                   == "uninstalled", 20, "a 410 from the push service did not uninstall the app")
        assert legacy({"to": token, "data": {"n": "4"}})["results"] == [{"error": "NotRegistered"}]
        assert push.requests.empty()
    finally:
        push.close()


def self_signed(directory) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that no system trusts: the push service's own."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test push service")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "push.pem", directory / "push.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_an_https_push_service_with_its_own_certificate(start_server, tmp_path):
    cert, key_file = self_signed(tmp_path)
    push = PushService(tls=(cert, key_file))
    try:
        srv = start_server(extra_args=["--web-push", "on", "--web-push-ca", cert])
        sender = new_sender_id()
        browser = Browser(f"https://127.0.0.1:{push.port}/push/tls")
        status, device = register_web(srv, sender, browser.subscription)
        assert status == 201, device
        assert legacy_send(srv, new_key(), {"to": device["token"], "data": {"over": "tls"}})["success"] == 1
        request = push.next()
        assert request["status"] == 201 and browser.read(request)["data"] == {"over": "tls"}, request
    finally:
        push.close()


def test_off_by_default_and_fcm_endpoints_stay_on_the_device_channel(server, start_server):
    status, info = http_json("GET", f"{server.http_base}/emulator/v1/info")
    assert status == 200 and info["web_push"] is None, info
    # With Web Push on, a subscription on FCM's own push service (Chrome's) is the emulator's: its
    # messages wait for the device channel, as without --web-push.
    srv = start_server(extra_args=["--web-push", "on"])
    sender = new_sender_id()
    browser = Browser("https://fcm.googleapis.com/fcm/send/abc")
    status, device = register_web(srv, sender, browser.subscription)
    assert status == 201, device
    assert legacy_send(srv, new_key(), {"to": device["token"], "data": {"a": "b"}})["success"] == 1
    status, record = http_json("GET", f"{srv.http_base}/emulator/v1/devices/{quote_token(device['token'])}")
    assert [m["app_message_id"] for m in record["queue"]] != [] and record["online"] is False, record
    # A plain-http endpoint is accepted only on loopback (a push service of one's own on this machine).
    elsewhere = Browser("http://push.example/abc").subscription
    status, body = register_web(srv, sender, elsewhere)
    assert status == 400 and "subscription.endpoint" in json.dumps(body), (status, body)
