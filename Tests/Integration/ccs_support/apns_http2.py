"""The provider side of the APNs HTTP/2 provider API for raw tests: `ccs-emulator apns-key`, an ES256
provider token (PyJWT), and a blocking HTTP/2 client over TLS with ALPN h2 (the `h2` package), which
sends exactly the headers a test gives (duplicates included) and reads the server's SETTINGS."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.settings
import jwt

from .server import emulator_bin

TIMEOUT = 20.0
SANDBOX = "api.sandbox.push.apple.com"
PRODUCTION = "api.push.apple.com"


def issue_key(data_dir: Path, team_id: str, key_id: str, out: Path, topics: list[str] | None = None,
              environment: str | None = None) -> dict:
    """`ccs-emulator apns-key`: returns its JSON line."""
    args = [emulator_bin(), "apns-key", "--team-id", team_id, "--key-id", key_id, "--out", str(out),
            "--data-dir", str(data_dir)]
    if topics:
        args += ["--topics", ",".join(topics)]
    if environment:
        args += ["--environment", environment]
    p = subprocess.run(args, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def provider_token(p8: Path, key_id: str, team_id: str, iat: int | None = None, alg: str = "ES256") -> str:
    """A provider authentication token as Apple documents it: {alg, kid} and {iss, iat}."""
    return jwt.encode({"iss": team_id, "iat": int(time.time()) if iat is None else iat}, Path(p8).read_text(),
                      algorithm=alg, headers={"kid": key_id})


class H2Provider:
    """One HTTP/2 connection to the provider API."""

    def __init__(self, port: int, ca_cert: str, host: str = SANDBOX, cert: str | None = None,
                 raw: socket.socket | None = None):
        """To 127.0.0.1:`port`, or over `raw` (a proxy tunnel already open)."""
        context = ssl.create_default_context(cafile=ca_cert)
        context.set_alpn_protocols(["h2"])
        if cert:
            context.load_cert_chain(cert)
        raw = raw or socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock = context.wrap_socket(raw, server_hostname=host)
        assert self.sock.selected_alpn_protocol() == "h2"
        self.host = host
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True,
                                                                                 header_encoding="utf-8",
                                                                                 validate_outbound_headers=False,
                                                                                 normalize_outbound_headers=False))
        self.conn.initiate_connection()
        self._flush()
        self.server_settings: dict[int, int] = {}
        self.heads: dict[int, dict[str, str]] = {}
        self.bodies: dict[int, bytes] = {}
        self.ended: dict[int, int | None] = {}
        self.goaway = None

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def _pump(self) -> bool:
        """Reads once; False when the server closed."""
        data = self.sock.recv(65536)
        if not data:
            return False
        for event in self.conn.receive_data(data):
            if isinstance(event, h2.events.RemoteSettingsChanged):
                for code, change in event.changed_settings.items():
                    self.server_settings[int(code)] = change.new_value
            elif isinstance(event, h2.events.ResponseReceived):
                self.heads[event.stream_id] = {k: v for k, v in event.headers}
            elif isinstance(event, h2.events.DataReceived):
                self.bodies[event.stream_id] = self.bodies.get(event.stream_id, b"") + event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended[event.stream_id] = None
            elif isinstance(event, h2.events.StreamReset):
                self.ended[event.stream_id] = int(event.error_code)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.goaway = event
        self._flush()
        return True

    @property
    def max_concurrent_streams(self) -> int | None:
        return self.server_settings.get(int(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS))

    def wait_for_settings(self, predicate) -> None:
        while not predicate(self.server_settings):
            assert self._pump(), "closed while waiting for SETTINGS"

    def send(self, path: str, headers: list[tuple[str, str]], body: bytes = b"", method: str = "POST") -> int:
        stream = self.conn.get_next_available_stream_id()
        pseudo = [(":method", method), (":scheme", "https"), (":path", path), (":authority", self.host)]
        self.conn.send_headers(stream, pseudo + headers, end_stream=not body)
        if body:
            self.conn.send_data(stream, body, end_stream=True)
        self._flush()
        return stream

    def response(self, stream: int) -> tuple[int, dict[str, str], dict | None]:
        """(status, headers, JSON body); status -1 and {"reset": code} for a reset stream."""
        while stream not in self.ended:
            assert self._pump(), "closed before the answer"
        reset = self.ended.pop(stream)
        if reset is not None:
            return -1, {}, {"reset": reset}
        headers = self.heads.pop(stream)
        body = self.bodies.pop(stream, b"")
        return int(headers[":status"]), headers, json.loads(body) if body else None

    def post(self, path: str, headers: list[tuple[str, str]], body: bytes = b"", method: str = "POST"):
        return self.response(self.send(path, headers, body, method))

    def close(self) -> None:
        try:
            self.conn.close_connection()
            self._flush()
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> "H2Provider":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def proxy_tunnel(proxy_port: int, host: str, port: int) -> socket.socket:
    """A CONNECT tunnel through proxy mode to `host:port`, open (the proxy answered 200)."""
    raw = socket.create_connection(("127.0.0.1", proxy_port), timeout=TIMEOUT)
    raw.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = raw.recv(1)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return raw
