"""The provider side of the APNs legacy binary interface, written from spec apns-legacy §2–4 with the
standard library only (struct, ssl): frames, a TLS connection with a provider certificate, reads."""

from __future__ import annotations

import json
import socket
import ssl
import struct
import subprocess
from pathlib import Path

from .admin_api import http_json
from .server import emulator_bin

TIMEOUT = 20.0


def issue_cert(data_dir: Path, bundle_id: str, out: Path, sandbox: bool = False) -> dict:
    """`ccs-emulator apns-cert`: returns its JSON line (cert, key, combined paths)."""
    args = [emulator_bin(), "apns-cert", "--bundle-id", bundle_id, "--data-dir", str(data_dir), "--out", str(out)]
    if sandbox:
        args.append("--sandbox")
    p = subprocess.run(args, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def register_ios(base: str, app: str, apns_token: str | None = None) -> dict:
    body: dict = {"app": app, "platform": "ios", "apns": True}
    if apns_token:
        body["apns_token"] = apns_token
    status, device = http_json("POST", f"{base}/emulator/v1/devices", body)
    assert status == 201, (status, device)
    assert len(device["apns_token"]) == 64, device
    return device


def payload(alert: str = "Hello", **aps) -> bytes:
    return json.dumps({"aps": {"alert": alert, **aps}}, separators=(",", ":")).encode()


def item(item_id: int, data: bytes) -> bytes:
    return struct.pack(">BH", item_id, len(data)) + data


def frame(token: bytes, body: bytes, identifier: int, expiry: int = 0, priority: int = 10) -> bytes:
    items = (item(1, token) + item(2, body) + item(3, struct.pack(">I", identifier))
             + item(4, struct.pack(">I", expiry)) + item(5, bytes([priority])))
    return struct.pack(">BI", 2, len(items)) + items


def raw_frame(items: bytes) -> bytes:
    return struct.pack(">BI", 2, len(items)) + items


def enhanced(token: bytes, body: bytes, identifier: int, expiry: int = 0) -> bytes:
    return struct.pack(">BIIH", 1, identifier, expiry, len(token)) + token + struct.pack(">H", len(body)) + body


def simple(token: bytes, body: bytes) -> bytes:
    return struct.pack(">BH", 0, len(token)) + token + struct.pack(">H", len(body)) + body


def connect(port: int, certfile: str | None, keyfile: str | None = None) -> ssl.SSLSocket:
    """TLS as provider libraries did it: a client certificate, no check of the server's."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if certfile:
        ctx.load_cert_chain(certfile, keyfile)
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    return ctx.wrap_socket(sock)


def read_until_closed(sock: ssl.SSLSocket) -> bytes:
    """Everything the server writes until it closes the connection."""
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLEOFError):
            break
        if not chunk:
            break
        out += chunk
    return out


def feedback(port: int, certfile: str) -> list[tuple[int, str]]:
    """Connects to the feedback service, reads until it closes, returns (timestamp, token hex) tuples."""
    with connect(port, certfile) as sock:
        data = read_until_closed(sock)
    tuples = []
    while data:
        timestamp, length = struct.unpack(">IH", data[:6])
        tuples.append((timestamp, data[6:6 + length].hex()))
        data = data[6 + length:]
    return tuples


def activity(base: str, **query) -> dict:
    q = "&".join(f"{k}={v}" for k, v in query.items())
    status, body = http_json("GET", f"{base}/emulator/v1/apns/notifications" + (f"?{q}" if q else ""))
    assert status == 200, (status, body)
    return body
