"""The APNs legacy binary gateway and feedback service over real TLS, with raw sockets (ssl, struct):
every status the gateway sends, commands 0 and 1, a notification split across TLS records, a
10,000-notification burst with a bad one in the middle, client-certificate refusal, the feedback
service, and kill -9 durability. pushjack (a real provider library) is in test_apns_pushjack.py."""

from __future__ import annotations

import datetime
import signal
import socket
import ssl
import struct
import time

import pytest

from ccs_support import get_device, http_json, store_sync
from ccs_support.apns import (activity, connect, enhanced, feedback, frame, issue_cert, item, payload, raw_frame,
                              read_until_closed, register_ios, simple)

APP = "com.example.app"
FAR = 4_000_000_000  # an expiry far ahead (UNIX seconds)


@pytest.fixture(scope="module")
def certs(server, tmp_path_factory):
    out = tmp_path_factory.mktemp("apns-certs")
    return {"app": issue_cert(server.data_dir, APP, out / "app"),
            "other": issue_cert(server.data_dir, "com.example.other", out / "other", sandbox=True)}


def gateway(server, certs, which="app"):
    return connect(int(server.ready["apns_port"]), certs[which]["combined"])


def answer(sock) -> bytes:
    """What the gateway writes before it closes."""
    return read_until_closed(sock)


def test_ready_line_and_certificate_names(server, certs):
    assert int(server.ready["apns_port"]) > 0 and int(server.ready["apns_feedback_port"]) > 0
    assert certs["app"]["subject"].startswith("UID=com.example.app, CN=Apple Push Services: com.example.app")
    assert "CN=Apple Development IOS Push Services: com.example.other" in certs["other"]["subject"]
    status, info = http_json("GET", f"{server.http_base}/emulator/v1/info")
    assert info["apns_port"] == int(server.ready["apns_port"])


def test_tls_is_1_2_and_a_good_notification_gets_no_answer(server, certs, devices):
    dev = devices(server, APP, [], platform="ios", apns=True)
    registered = dev.expect("registered")
    dev.expect("connected")
    token = bytes.fromhex(registered["apns_token"])
    with gateway(server, certs) as sock:
        assert sock.version() == "TLSv1.2"
        sock.sendall(frame(token, payload("Hi", badge=3, sound="default", **{"content-available": 1,
                                                                           "mutable-content": 1}), 11, FAR))
        event = dev.expect("apns")
        assert event["alert"] == "Hi" and event["badge"] == 3 and event["sound"] == "default"
        assert event["content_available"] is True and event["mutable_content"] is True
        assert event["payload"]["aps"]["badge"] == 3
        assert event["apns"]["identifier"] == 11 and event["apns"]["priority"] == 10
        sock.settimeout(0.2)
        with pytest.raises(TimeoutError):
            sock.recv(6)  # nothing comes back for an accepted notification; the connection stays
    delivered = activity(server.http_base, event="delivered", bundle_id=APP)["notifications"]
    assert any(e["identifier"] == 11 and e["device_token"] == registered["apns_token"] for e in delivered)


def bad_cases(valid_token: bytes, other_token: bytes):
    """(what, status, identifier reported, bytes)."""
    return [
        ("zero-length token", 2, 21, frame(b"", payload(), 21)),
        ("no payload item", 4, 22, raw_frame(item(1, valid_token) + item(3, struct.pack(">I", 22)))),
        ("empty payload", 4, 23, frame(valid_token, b"", 23)),
        ("payload without aps", 4, 24, frame(valid_token, b'{"alert":"x"}', 24)),
        ("1-byte token", 5, 25, frame(b"\x00", payload(), 25)),
        ("payload over 2048 bytes", 7, 26, frame(valid_token, payload("x" * 2100), 26)),
        ("unknown token", 8, 27, frame(b"\x07" * 32, payload(), 27)),
        ("another app's token", 8, 28, frame(other_token, payload(), 28)),
        ("priority 7", 255, 29, frame(valid_token, payload(), 29, priority=7)),
        ("unknown item 9", 255, 30, raw_frame(item(1, valid_token) + item(2, payload())
                                              + item(3, struct.pack(">I", 30)) + item(9, b"\x01"))),
        ("item running past the frame", 128, 0, raw_frame(item(1, valid_token) + b"\x02\x00\x50{")),
    ]


def test_every_form_status_is_answered_then_the_connection_closes(server, certs):
    mine = bytes.fromhex(register_ios(server.http_base, APP)["apns_token"])
    other = bytes.fromhex(register_ios(server.http_base, "com.example.other")["apns_token"])
    for name, status, identifier, data in bad_cases(mine, other):
        with gateway(server, certs) as sock:
            sock.sendall(frame(mine, payload(), 1, FAR) + data + frame(mine, payload(), 99, FAR))
            assert answer(sock) == struct.pack(">BBI", 8, status, identifier), name
    rejected = activity(server.http_base, event="rejected", bundle_id=APP)["notifications"]
    assert {e["status"] for e in rejected} >= {2, 4, 5, 7, 8, 128, 255}


def _foreign_certs(tmp_path, server):
    """Provider certificates the CA signs but `apns-cert` would never issue (no UID; an empty UID),
    and one from a CA the emulator does not trust: made with `cryptography`, as a test fixture."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    tls = server.data_dir / "tls"
    ca_cert = x509.load_pem_x509_certificate((tls / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((tls / "ca-key.pem").read_bytes(), password=None)
    now = datetime.datetime.now(datetime.timezone.utc)

    def make(name: str, attributes, issuer_cert=ca_cert, issuer_key=ca_key):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(attributes)
        cert = (x509.CertificateBuilder().subject_name(subject)
                .issuer_name(issuer_cert.subject if issuer_cert else subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(issuer_key or key, hashes.SHA256()))
        path = tmp_path / f"{name}.pem"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return str(path)

    cn = x509.NameAttribute(NameOID.COMMON_NAME, "Apple Push Services: nobody")
    return {
        "no_uid": make("no-uid", [cn]),
        "empty_uid": make("empty-uid", [x509.NameAttribute(NameOID.USER_ID, ""), cn]),
        "self_signed": make("self-signed", [x509.NameAttribute(NameOID.USER_ID, APP), cn], issuer_cert=None,
                            issuer_key=None),
    }


def test_topic_statuses_3_and_6_come_from_the_certificate(server, tmp_path):
    foreign = _foreign_certs(tmp_path, server)
    mine = bytes.fromhex(register_ios(server.http_base, APP)["apns_token"])
    for cert, status in (("no_uid", 3), ("empty_uid", 6)):
        with connect(int(server.ready["apns_port"]), foreign[cert]) as sock:
            sock.sendall(frame(mine, payload(), 31, FAR))
            assert answer(sock) == struct.pack(">BBI", 8, status, 31), cert


def test_a_client_without_a_certificate_or_with_a_foreign_one_is_refused_in_the_handshake(server, tmp_path):
    foreign = _foreign_certs(tmp_path, server)
    for port in (int(server.ready["apns_port"]), int(server.ready["apns_feedback_port"])):
        for cert in (None, foreign["self_signed"]):
            with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
                with connect(port, cert) as sock:
                    sock.sendall(b"\x00")  # TLS 1.2: the refusal is in the handshake
                    assert sock.recv(1) == b""
                    raise ssl.SSLError("closed without data")


def test_tls_1_3_is_not_offered(server, certs):
    import socket
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(certs["app"]["combined"])
    with pytest.raises(ssl.SSLError):
        with socket.create_connection(("127.0.0.1", int(server.ready["apns_port"])), timeout=20) as raw:
            ctx.wrap_socket(raw)


def test_commands_0_and_1(server, certs, devices):
    dev = devices(server, APP, [], platform="ios", apns=True)
    token = bytes.fromhex(dev.expect("registered")["apns_token"])
    dev.expect("connected")
    with gateway(server, certs) as sock:
        sock.sendall(simple(token, payload("zero")) + enhanced(token, payload("one"), 0x01020304, FAR))
        assert dev.expect("apns")["alert"] == "zero"
        one = dev.expect("apns")
        assert one["alert"] == "one" and one["apns"]["identifier"] == 0x01020304
    # Command 1 with a bad token: the error response echoes its 4 identifier bytes.
    with gateway(server, certs) as sock:
        sock.sendall(enhanced(b"\x05" * 32, payload(), 0xA1B2C3D4, FAR))
        assert answer(sock) == bytes.fromhex("0808a1b2c3d4")
    # Command 0 with a bad token: closed, no answer (Apple gave none for the simple format).
    with gateway(server, certs) as sock:
        sock.sendall(simple(b"\x05" * 32, payload()))
        assert answer(sock) == b""
    # An unknown command byte: closed, no answer (TN2265).
    with gateway(server, certs) as sock:
        sock.sendall(b"\x09" + b"\x00" * 40)
        assert answer(sock) == b""


def test_one_notification_split_across_tls_records(server, certs, devices):
    dev = devices(server, APP, [], platform="ios", apns=True)
    token = bytes.fromhex(dev.expect("registered")["apns_token"])
    dev.expect("connected")
    data = frame(token, payload("split"), 41, FAR) + frame(token, payload("bytewise"), 42, FAR)
    with gateway(server, certs) as sock:
        first = data[:len(data) // 2]
        sock.sendall(first[:3])  # each sendall is its own TLS record
        sock.sendall(first[3:])
        for b in data[len(data) // 2:]:
            sock.sendall(bytes([b]))
        assert dev.expect("apns")["alert"] == "split"
        assert dev.expect("apns")["alert"] == "bytewise"


def test_a_burst_of_10000_with_a_bad_one_in_the_middle_then_the_resend(server, certs):
    device = register_ios(server.http_base, "com.example.burst")
    burst_cert = issue_cert(server.data_dir, "com.example.burst", server.data_dir.parent / "burst-cert")
    token = bytes.fromhex(device["apns_token"])
    before = activity(server.http_base)["counts"]
    frames = [frame(token, payload(f"n{i}"), i, FAR) for i in range(10_000)]
    frames[5000] = frame(b"\x09" * 32, payload("bad"), 5000, FAR)
    with connect(int(server.ready["apns_port"]), burst_cert["combined"]) as sock:
        try:
            sock.sendall(b"".join(frames))
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the gateway may close before the whole write is taken, as Apple's did
        got = answer(sock)
    assert got == struct.pack(">BBI", 8, 8, 5000)
    after = activity(server.http_base)["counts"]
    assert after["accepted"] - before["accepted"] == 5000  # 0…4999; 5001…9999 were dropped unread
    # The provider resends everything after the reported identifier, on a new connection; a known-bad
    # notification at the end makes its answer the fact that all before it were processed.
    with connect(int(server.ready["apns_port"]), burst_cert["combined"]) as sock:
        sock.sendall(b"".join(frames[5001:]) + frame(b"", payload(), 10_000))
        assert answer(sock) == struct.pack(">BBI", 8, 2, 10_000)
    final = activity(server.http_base)["counts"]
    assert final["accepted"] - before["accepted"] == 9999
    # The device was offline: Apple's store-and-forward keeps only the newest notification.
    store_sync(server.http_base)
    status, record = get_device(server.http_base, device["token"])
    assert [m["payload"]["apns"]["identifier"] for m in record["queue"]] == [9999]


def test_feedback_lists_uninstalled_apps_once_and_forgets_reregistered_ones(server, certs):
    port = int(server.ready["apns_feedback_port"])
    feedback(port, certs["app"]["combined"])  # start from an empty list
    gone = register_ios(server.http_base, APP)
    back = register_ios(server.http_base, APP)
    for d in (gone, back):
        status, _ = http_json("POST", f"{server.http_base}/emulator/v1/devices/{d['token']}/uninstall")
        assert status == 200
    with gateway(server, certs) as sock:
        # Accepted without an error (Apple learned of the uninstall later); a bad one ends the connection.
        sock.sendall(frame(bytes.fromhex(gone["apns_token"]), payload(), 51, FAR)
                     + frame(bytes.fromhex(back["apns_token"]), payload(), 52, FAR) + frame(b"", payload(), 53))
        assert answer(sock) == struct.pack(">BBI", 8, 2, 53)
    # The app comes back on one of them: that token is no longer reported.
    register_ios(server.http_base, APP, apns_token=back["apns_token"])
    tuples = feedback(port, certs["app"]["combined"])
    assert [t for _, t in tuples] == [gone["apns_token"]]
    now = datetime.datetime.now(datetime.timezone.utc).timestamp()
    assert abs(tuples[0][0] - now) < 120
    assert feedback(port, certs["app"]["combined"]) == []  # cleared once read
    # Another app's certificate never sees them.
    assert feedback(port, certs["other"]["combined"]) == []


def test_payload_limit_256_and_status_10_on_shutdown(start_server, tmp_path):
    srv = start_server(extra_args=["--apns-payload-limit", "256"])
    cert = issue_cert(srv.data_dir, APP, tmp_path / "c")
    token = bytes.fromhex(register_ios(srv.http_base, APP)["apns_token"])
    with connect(int(srv.ready["apns_port"]), cert["combined"]) as sock:
        sock.sendall(frame(token, payload("x" * 300), 61, FAR))
        assert answer(sock) == struct.pack(">BBI", 8, 7, 61)
    with connect(int(srv.ready["apns_port"]), cert["combined"]) as sock:
        sock.sendall(frame(token, payload("a"), 76, FAR) + frame(token, payload("b"), 77, FAR) + frame(b"", payload(), 78))
        assert answer(sock) == struct.pack(">BBI", 8, 2, 78)
    with connect(int(srv.ready["apns_port"]), cert["combined"]) as sock:
        sock.sendall(frame(token, payload("a"), 88, FAR) + frame(token, payload("b"), 89, FAR))
        # The fact that both were taken: the admin API lists them.
        while len([e for e in activity(srv.http_base, event="accepted")["notifications"]
                   if e["identifier"] in (88, 89)]) < 2:
            time.sleep(0.02)
        srv.proc.send_signal(signal.SIGTERM)
        assert answer(sock) == struct.pack(">BBI", 8, 10, 89)
    assert srv.proc.wait(timeout=30) == 0


def test_stored_notifications_and_feedback_survive_kill_9(start_server, tmp_path):
    srv = start_server()
    cert = issue_cert(srv.data_dir, APP, tmp_path / "c")
    waiting = register_ios(srv.http_base, APP)
    gone = register_ios(srv.http_base, APP)
    http_json("POST", f"{srv.http_base}/emulator/v1/devices/{gone['token']}/uninstall")
    with connect(int(srv.ready["apns_port"]), cert["combined"]) as sock:
        sock.sendall(frame(bytes.fromhex(waiting["apns_token"]), payload("kept"), 71, FAR)
                     + frame(bytes.fromhex(gone["apns_token"]), payload(), 72, FAR) + frame(b"", payload(), 73))
        assert answer(sock) == struct.pack(">BBI", 8, 2, 73)
    store_sync(srv.http_base)  # everything accepted so far is committed
    srv.kill()
    srv.start()
    status, record = get_device(srv.http_base, waiting["token"])
    assert [m["payload"]["payload"]["aps"]["alert"] for m in record["queue"]] == ["kept"]
    assert [t for _, t in feedback(int(srv.ready["apns_feedback_port"]), cert["combined"])] == [gone["apns_token"]]


@pytest.mark.parametrize("port_key", ["apns_port", "apns_feedback_port"])
def test_a_tls_session_is_never_resumed(server, certs, port_key):
    """Apple's gateway and feedback service made a full handshake every time: a provider that offers
    the session (ticket or id) of its last connection gets a new one."""
    port = int(server.ready[port_key])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(certs["app"]["combined"])
    first = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=15))
    assert first.version() == "TLSv1.2"
    session = first.session
    first.close()
    assert session is not None
    again = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=15), session=session)
    try:
        assert not again.session_reused, "the TLS session was resumed"
    finally:
        again.close()
