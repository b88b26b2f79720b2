"""The protections docs/hardening.md's threat model states, tried the way an attacker would: the admin
token under every spelling of a path, web pages (cross-site requests, DNS rebinding), a wide bind,
long responses and the request deadline, a graceful stop with an event stream open, the data
directory's file modes, and what the development CA may vouch for."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from ccs_support import new_key, new_sender_id, register_device
from ccs_support.admin_api import http_json
from ccs_support.cli import serve_must_fail
from ccs_support.fcm_http import raw

TOKEN = "security-admin-token-0123456789"


def request(srv, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """One request with the path exactly as written (http.client does not normalise it)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=15)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        hdrs = {"Host": f"127.0.0.1:{srv.http_port}"}
        hdrs.update(headers or {})
        if body is not None or method in ("POST", "PUT", "PATCH"):
            hdrs.setdefault("Content-Length", str(len(body or b"")))
        for k, v in hdrs.items():
            if v is not None:
                conn.putheader(k, v)
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


# -- 1, 15: the admin token holds whatever the path looks like, and covers /metrics ---------------------

SPELLINGS = ["/emulator/v1/{r}", "//emulator/v1/{r}", "/emulator//v1/{r}", "/emulator/v1//{r}",
             "/emulator%2Fv1/{r}", "/emulator/v1%2F{r}", "/%65mulator/v1/{r}", "/emulator/v1/{r}/",
             "/emulator/./v1/{r}", "/x/../emulator/v1/{r}", "///emulator///v1///{r}"]


def test_the_admin_token_holds_under_every_spelling_of_a_path(start_server):
    srv = start_server(extra_args=["--admin-token", TOKEN])
    json_body = {"Content-Type": "application/json"}
    for spelling in SPELLINGS:
        for method, route, body in [("GET", "info", None), ("GET", "devices", None),
                                    ("POST", "credentials", b'{"project_id":"123"}'),
                                    ("POST", "faults", b'{"action":"drop_ack"}'), ("POST", "reset", None),
                                    ("POST", "devices", b'{"app":"a","senders":["1"]}')]:
            path = spelling.format(r=route)
            status, _, text = request(srv, method, path, body, json_body if body else None)
            assert status in (401, 404), (method, path, status, text[:200])
    # Nothing above changed anything: the faults and devices are as they were.
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, _, text = request(srv, "GET", "/emulator/v1/devices", headers=auth)
    assert status == 200 and json.loads(text)["devices"] == [], text
    status, _, text = request(srv, "GET", "/emulator/v1/faults", headers=auth)
    assert status == 200 and json.loads(text).get("rules", []) == [], text
    # The token itself works on the plain path and on the spellings the router resolves.
    assert request(srv, "GET", "//emulator/v1/info", headers=auth)[0] == 200
    # /metrics is behind the token too; health and ca.pem stay public.
    assert request(srv, "GET", "/metrics")[0] == 401
    assert request(srv, "GET", "//metrics")[0] == 401
    assert request(srv, "GET", "/metrics", headers=auth)[0] == 200
    for public in ("health", "ca.pem"):
        assert request(srv, "GET", f"/emulator/v1/{public}")[0] == 200


# -- 2: web pages cannot drive the admin API, nor read it by DNS rebinding ---------------------------------

def test_a_rebound_host_is_refused_and_public_host_admits_a_name(start_server):
    srv = start_server(extra_args=["--public-host", "emulator.test"])
    status, _, text = request(srv, "GET", "/emulator/v1/info", headers={"Host": "rebind.attacker.example"})
    assert status == 403 and "--public-host" in text, text
    status, _, text = request(srv, "POST", "/emulator/v1/credentials", b'{"project_id":"123"}',
                              {"Host": f"rebind.attacker.example:{srv.http_port}", "Content-Type": "application/json"})
    assert status == 403 and "private_key" not in text, text
    status, _, text = request(srv, "GET", "/", headers={"Host": "rebind.attacker.example"})
    assert status == 403, "the dashboard too"
    for host in (f"127.0.0.1:{srv.http_port}", f"localhost:{srv.http_port}", "127.1.2.3", f"emulator.test:{srv.http_port}"):
        assert request(srv, "GET", "/emulator/v1/info", headers={"Host": host})[0] == 200, host
    # A service-account file names the emulator only under a Host the emulator knows.
    status, _, text = request(srv, "POST", "/emulator/v1/credentials", b'{"project_id":"123"}',
                              {"Host": f"emulator.test:{srv.http_port}", "Content-Type": "application/json"})
    assert status == 200 and json.loads(text)["token_uri"].startswith("http://emulator.test:"), text
    # The push APIs are not the admin API: proxy mode reaches them under Google's names.
    status, _, text = request(srv, "POST", "/fcm/send", b'{"to":"x"}',
                              {"Host": "fcm.googleapis.com", "Content-Type": "application/json"})
    assert status != 403, text


def test_cross_site_requests_cannot_change_anything(start_server):
    srv = start_server()
    sender = new_sender_id()
    register_device(srv.http_base, "com.example.csrf", [sender])
    own = f"http://127.0.0.1:{srv.http_port}"
    fault = json.dumps({"action": "drop_ack"}).encode()
    # A page may send text/plain without a preflight: refused with 415.
    status, _, text = request(srv, "POST", "/emulator/v1/faults", fault, {"Content-Type": "text/plain"})
    assert status == 415 and "application/json" in text, text
    for headers in ({"Origin": "https://attacker.example"}, {"Origin": "null"},
                    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site", "Origin": own}):
        status, _, text = request(srv, "POST", "/emulator/v1/reset", None, headers)
        assert status == 403, (headers, status, text)
        status, _, _ = request(srv, "POST", "/emulator/v1/faults", fault, {**headers, "Content-Type": "application/json"})
        assert status == 403, headers
    status, devices = http_json("GET", f"{srv.http_base}/emulator/v1/devices")
    assert len(devices["devices"]) == 1, "a cross-site reset went through"
    assert http_json("GET", f"{srv.http_base}/emulator/v1/faults")[1].get("rules", []) == []
    # The server's own origin (the dashboard's fetches) and clients without Origin (curl) are served.
    status, _, _ = request(srv, "POST", "/emulator/v1/faults", fault,
                           {"Origin": own, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"})
    assert status == 201
    status, _, _ = request(srv, "POST", "/emulator/v1/reset", None, {"Origin": own})
    assert status == 200
    # The dashboard may not be framed by another site.
    status, headers, _ = request(srv, "GET", "/")
    assert status == 200 and "frame-ancestors 'none'" in headers["content-security-policy"]


# -- 3: a wide bind needs strict auth -----------------------------------------------------------------------

def test_a_wide_bind_needs_strict_auth(tmp_path):
    # Refused before anything is bound: this test opens no socket beyond loopback.
    code, err = serve_must_fail(tmp_path / "d", "--bind", "0.0.0.0", "--admin-token", TOKEN)
    assert code == 1 and "--auth strict" in err and "--open-fcm-apis-without-auth" in err, err


# -- 6, 16: long responses outlive the request deadline; SSE resumes; a stop ends the streams ---------------

class EventStream:
    def __init__(self, srv, last_event_id: str | None = None):
        self.sock = socket.create_connection(("127.0.0.1", srv.http_port), timeout=20)
        extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id else ""
        self.sock.sendall(f"GET /emulator/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode())
        self.buffer = b""
        head = self._until(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1])

    def _until(self, mark: bytes) -> bytes:
        while mark not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(self.buffer[-500:])
            self.buffer += chunk
        out, self.buffer = self.buffer.split(mark, 1)
        return out

    def next_event(self) -> dict:
        """The next event (chunked framing lines and comments skipped)."""
        while True:
            block = self._until(b"\n\n").decode()
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
            if "id" in fields:
                return {"id": int(fields["id"]), "event": fields.get("event"), "data": json.loads(fields["data"])}

    def close(self):
        self.sock.close()


def legacy_send(srv, key: str, token: str) -> str:
    status, _, text = raw("POST", f"{srv.http_base}/fcm/send", json.dumps({"to": token, "data": {"n": "1"}}),
                          {"Authorization": f"key={key}", "Content-Type": "application/json"})
    assert status == 200, text
    return json.loads(text)["results"][0]["message_id"]


def test_an_event_stream_outlives_the_request_timeout_and_resumes_after_last_event_id(start_server):
    srv = start_server(extra_args=["--request-timeout", "1"])
    sender, key = new_sender_id(), new_key()
    token = register_device(srv.http_base, "com.example.sse", [sender])["token"]
    stream = EventStream(srv)
    assert stream.status == 200
    # Events keep flowing for three times the request timeout: the stream is not cut at 1 s.
    started, last = time.monotonic(), None
    while time.monotonic() - started < 3.0:
        message_id = legacy_send(srv, key, token)
        while True:
            e = stream.next_event()
            last = e["id"]
            if e["data"].get("message_id") == message_id:
                break
    stream.close()
    # What happens while the follower is away comes first when it reconnects with Last-Event-ID.
    missed = legacy_send(srv, key, token)
    http_json("POST", f"{srv.http_base}/emulator/v1/store/sync")
    again = EventStream(srv, last_event_id=str(last))
    e = again.next_event()
    assert e["id"] == last + 1, (last, e)  # nothing skipped: the previous message's later events too
    seen = [e]
    while e["data"].get("message_id") != missed:
        e = again.next_event()
        seen.append(e)
    assert [x["id"] for x in seen] == list(range(last + 1, last + 1 + len(seen))), "a gap or a repeat"
    again.close()


def test_event_followers_are_capped(start_server):
    srv = start_server()
    streams = [EventStream(srv) for _ in range(32)]
    try:
        assert all(s.status == 200 for s in streams)
        status, _, text = request(srv, "GET", "/emulator/v1/events")
        assert status == 429, text
    finally:
        for s in streams:
            s.close()


def test_a_graceful_stop_ends_open_event_streams(start_server):
    srv = start_server()
    kept = EventStream(srv)        # still open at the stop
    EventStream(srv).close()       # opened and closed, as in the report
    srv.proc.send_signal(signal.SIGTERM)
    srv.proc.wait(30)              # ends by itself; a hang fails here
    assert srv.proc.returncode == 0
    with pytest.raises(EOFError):
        while True:
            kept._until(b"\n\n")
    kept.close()


# -- 7: the data directory is private ------------------------------------------------------------------------

def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_data_directory_and_its_files_are_private(start_server, tmp_path):
    base = tmp_path / "old"
    data = base / "data"
    (data / "tls").mkdir(parents=True)
    os.chmod(data, 0o755)
    leftover = data / "notes.txt"
    leftover.write_text("from an older version")
    os.chmod(leftover, 0o644)
    srv = start_server(base=base)
    register_device(srv.http_base, "com.example.modes", [new_sender_id()])
    http_json("POST", f"{srv.http_base}/emulator/v1/store/sync")
    assert mode(data) == 0o700
    assert mode(leftover) == 0o600
    for name in ("ccs-emulator.sqlite", "journal.sqlite", "lock", "tls/ca-key.pem", "tls/server-key.pem", "tls/ca.pem"):
        path = data / name
        if path.exists():
            assert mode(path) & 0o077 == 0, (name, oct(mode(path)))
    assert (data / "ccs-emulator.sqlite").exists() and (data / "tls" / "ca-key.pem").exists()


def test_a_database_file_that_is_a_link_is_refused(tmp_path):
    data = tmp_path / "d"
    data.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.sqlite"
    target.write_bytes(b"")
    (data / "ccs-emulator.sqlite").symlink_to(target)
    code, err = serve_must_fail(data)
    assert code == 1 and "symbolic link" in err, err


# -- 9: the development CA vouches only for the names served -------------------------------------------------------

def test_the_development_ca_cannot_vouch_for_other_names_or_addresses(start_server, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import datetime

    srv = start_server()
    tls = srv.data_dir / "tls"
    ca = x509.load_pem_x509_certificate((tls / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((tls / "ca-key.pem").read_bytes(), None)
    constraints = ca.extensions.get_extension_for_class(x509.NameConstraints).value
    dns = {n.value for n in constraints.permitted_subtrees if isinstance(n, x509.DNSName)}
    assert "google.com" not in dns and "fcm.googleapis.com" in dns, dns
    # No iPAddress constraint: BoringSSL refuses every chain with one (DevelopmentCA.permittedDNSDomains).
    assert not any(isinstance(n, x509.IPAddress) for n in constraints.permitted_subtrees)

    def leaf(name: x509.GeneralName) -> Path:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "leaf")]))
                .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([name]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        path = tmp_path / f"leaf-{len(list(tmp_path.iterdir()))}.pem"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    def verifies(path: Path) -> bool:
        return subprocess.run(["openssl", "verify", "-CAfile", str(tls / "ca.pem"), str(path)],
                              capture_output=True).returncode == 0

    assert verifies(tls / "server.pem"), "the server's own certificate must verify"
    assert verifies(leaf(x509.DNSName("fcm.googleapis.com")))
    assert not verifies(leaf(x509.DNSName("www.google.com")))
    assert not verifies(leaf(x509.DNSName("accounts.googleapis.com")))
    assert not verifies(leaf(x509.DNSName("evil.fcm.googleapis.com.attacker.example")))
    # The CA key is the only guard for addresses: it is private to the emulator's user.
    assert stat.S_IMODE(os.stat(tls / "ca-key.pem").st_mode) == 0o600


# -- 15: secrets stay off the command line -------------------------------------------------------------------

def test_the_store_password_comes_from_a_file_not_the_command_line(tmp_path):
    code, err = serve_must_fail(tmp_path / "d", "--store", "postgres://ccs@127.0.0.1:1/x",
                                "--store-password-file", str(tmp_path / "missing"))
    assert code != 0 and "--store-password-file" in err and "cannot be read" in err, err


def test_the_admin_token_can_come_from_the_environment(start_server, monkeypatch):
    monkeypatch.setenv("CCS_ADMIN_TOKEN", TOKEN)
    srv = start_server()
    assert TOKEN.encode() not in Path(f"/proc/{srv.pid}/cmdline").read_bytes()
    assert request(srv, "GET", "/emulator/v1/info")[0] == 401
    assert request(srv, "GET", "/emulator/v1/info", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
