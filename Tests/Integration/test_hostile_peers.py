"""Hostile and slow peers (docs/hardening.md): an app server that never reads, slowloris on every
listener, 10,000 half-open TLS handshakes. Each keeps the server's memory bounded, and a healthy client
keeps working meanwhile. The servers run with short timeouts (--auth-timeout 2, --request-timeout 2) so
that the tests wait seconds, not minutes; every wait is on a fact (the server closing), bounded."""

from __future__ import annotations

import resource
import socket
import ssl
import time

import h2.connection
import h2.events
import pytest

from ccs_support import http_json, new_key, new_sender_id, register_device
from ccs_support.xmpp import gcm_stanza

SHORT = ["--auth-timeout", "2", "--request-timeout", "2"]


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True once the server closes the socket (EOF or reset), reading whatever it sends meanwhile."""
    sock.settimeout(0.5)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except (socket.timeout, TimeoutError, ssl.SSLWantReadError):
            continue
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError):
            return True
    return False


def tls(port: int, ca: str) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))


def healthy_round_trip(srv, xmpp) -> None:
    sender = new_sender_id()
    token = register_device(srv.http_base, "com.example.canary", [sender])["token"]
    c = xmpp(srv)
    c.login(sender, new_key())
    ack, _ = c.downstream({"to": token, "message_id": "canary", "data": {"ok": "1"}})
    assert ack["message_type"] == "ack", ack


def test_an_app_server_that_never_reads_stops_being_read_and_memory_stays_bounded(start_server, xmpp):
    srv = start_server(extra_args=SHORT)
    sender = new_sender_id()
    c = xmpp(srv)
    c.login(sender, new_key())
    before = srv.rss_kib()
    # Every stanza earns a NACK the client never reads; the server must stop reading it long before
    # 40 MB of stanzas are in, so the send blocks.
    stanza = gcm_stanza({"to": "no-such-token", "message_id": "m" * 40, "data": {"x": "y" * 40}}).encode()
    raw = c.sock
    raw.settimeout(3)
    sent = 0
    with pytest.raises((socket.timeout, TimeoutError, ssl.SSLWantWriteError)):
        while sent < 40 << 20:
            raw.sendall(stanza * 64)
            sent += len(stanza) * 64
    assert sent < 40 << 20
    grown_mib = (srv.rss_kib() - before) / 1024
    assert grown_mib < 64, f"server RSS grew {grown_mib:.1f} MiB while a client did not read"
    healthy_round_trip(srv, xmpp)
    assert srv.alive


@pytest.mark.parametrize("listener", ["ccs", "device"])
def test_slowloris_before_authentication_is_closed(start_server, xmpp, listener):
    srv = start_server(extra_args=SHORT)
    port = srv.ccs_port if listener == "ccs" else srv.device_port
    s = tls(port, srv.ca_cert)
    # A stream header sent one byte at a time, slower than the auth timeout allows.
    header = b"<stream:stream to='gcm.googleapis.com' xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"
    started = time.monotonic()
    closed = False
    for b in header:
        try:
            s.sendall(bytes([b]))
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            closed = True
            break
        if closed_by_server(s, 0.3):
            closed = True
            break
    assert closed or closed_by_server(s, 10), "the trickling connection was never closed"
    assert time.monotonic() - started < 15
    healthy_round_trip(srv, xmpp)


def test_http_slowloris_and_a_body_that_never_ends_are_closed(start_server, xmpp):
    srv = start_server(extra_args=SHORT)
    head = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    head.sendall(b"GET /emulator/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the blank line never comes
    assert closed_by_server(head, 10), "an unfinished request head was kept open"

    body = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    body.sendall(b"POST /emulator/v1/devices HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
    started = time.monotonic()
    closed = False
    while time.monotonic() - started < 10:
        try:
            body.sendall(b"1\r\n{\r\n")  # a chunk every 100 ms, forever
        except (BrokenPipeError, ConnectionResetError, OSError):
            closed = True
            break
        if closed_by_server(body, 0.1):
            closed = True
            break
    assert closed, "a chunked body that never ends was kept open"
    # Keep-alive still works for a client that behaves.
    ok = socket.create_connection(("127.0.0.1", srv.http_port), timeout=10)
    ok.sendall(b"GET /emulator/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert b"200 OK" in ok.recv(4096)
    healthy_round_trip(srv, xmpp)


def test_a_stalled_apns_handshake_is_closed(start_server):
    srv = start_server(extra_args=SHORT)
    s = socket.create_connection(("127.0.0.1", int(srv.ready["apns_port"])), timeout=10)
    s.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
    assert closed_by_server(s, 10), "a stalled TLS handshake on the APNs gateway was kept open"
    f = socket.create_connection(("127.0.0.1", int(srv.ready["apns_feedback_port"])), timeout=10)
    assert closed_by_server(f, 10), "an idle handshake on the feedback service was kept open"


def test_a_stalled_https_handshake_and_an_unfinished_h2_stream_are_closed(start_server, xmpp):
    srv = start_server(extra_args=SHORT + ["--https-port", "0"])
    port = int(srv.ready["https_port"])
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
    assert closed_by_server(s, 10), "a stalled TLS handshake on the HTTPS listener was kept open"

    # HTTP/2: a request whose body never comes. Its stream is reset at the request deadline, and the
    # connection, left with no open stream, is closed after the same time.
    ctx = ssl.create_default_context(cafile=srv.ca_cert)
    ctx.set_alpn_protocols(["h2"])
    t = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
    assert t.selected_alpn_protocol() == "h2"
    conn = h2.connection.H2Connection()
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "POST"), (":path", "/emulator/v1/devices"), (":scheme", "https"),
                          (":authority", "localhost"), ("content-type", "application/json")])
    t.sendall(conn.data_to_send())
    t.settimeout(0.5)
    events: list = []
    deadline = time.monotonic() + 10
    closed = False
    while time.monotonic() < deadline and not closed:
        try:
            data = t.recv(65536)
        except (socket.timeout, TimeoutError, ssl.SSLWantReadError):
            continue
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError):
            closed = True
            break
        if not data:
            closed = True
            break
        if any(isinstance(e, h2.events.ConnectionTerminated) for e in events):
            continue  # after its GOAWAY the server may still send (a PING), then it closes
        events += conn.receive_data(data)
        if conn.data_to_send():
            t.sendall(conn.data_to_send())
    assert closed, f"an HTTP/2 connection with an unfinished request was kept open ({events})"
    assert any(isinstance(e, h2.events.StreamReset) and e.stream_id == 1 for e in events), events
    assert any(isinstance(e, h2.events.ConnectionTerminated) for e in events), events
    # The stalled handshake, the h2 stream without its body, and the h2 connection that outstayed
    # its GOAWAY.
    status, info = http_json("GET", f"{srv.http_base}/emulator/v1/info")
    assert status == 200 and info["connections"]["http_deadline_closes"] == 3, info
    healthy_round_trip(srv, xmpp)


def listener_accept_queue(port: int) -> int:
    """Connections waiting in the accept queue of the IPv4 listener on `port` (/proc/net/tcp: for a
    socket in LISTEN, state 0A, rx_queue is the accept queue's length)."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[1].endswith(f":{port:04X}"):
                return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"no listener on port {port} in /proc/net/tcp")


def wait_for_accept_queue_to_drain(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (queued := listener_accept_queue(port)) > 0:
        assert time.monotonic() < deadline, f"the server left {queued} connections in its accept queue for {timeout} s"
        time.sleep(0.005)


def test_ten_thousand_half_open_tls_handshakes(start_server, xmpp):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 10_500:
        pytest.skip(f"the file-descriptor limit ({hard}) cannot hold 10,000 connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 22_000)), hard))
    srv = start_server(extra_args=SHORT)  # inherits the raised limit
    before = srv.rss_kib()
    socks = []
    try:
        for i in range(10_000):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", srv.ccs_port))
            socks.append(s)
            if i % 200 == 199:
                # Paced so that the listener's accept queue (1024) never overflows: a connection the
                # kernel dropped from a full queue never reaches the server, which then cannot close it.
                # On loopback the handshake is done when connect_ex returns, so the queue holds every
                # connection the server has not accepted yet; wait until it has taken them all.
                wait_for_accept_queue_to_drain(srv.ccs_port)
        # Open and silent: a healthy client still gets through.
        healthy_round_trip(srv, xmpp)
        grown_mib = (srv.rss_kib() - before) / 1024
        assert grown_mib < 400, f"10,000 half-open handshakes cost {grown_mib:.0f} MiB"
        # The auth timeout closes them all.
        deadline = time.monotonic() + 60
        open_left = len(socks)
        while open_left and time.monotonic() < deadline:
            open_left = 0
            for s in socks:
                try:
                    if s.recv(1) == b"":
                        continue
                    open_left += 1
                except BlockingIOError:
                    open_left += 1
                except OSError:
                    continue
            if open_left:
                time.sleep(0.2)
        assert open_left == 0, f"{open_left} half-open connections outlived the auth timeout"
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert srv.alive
