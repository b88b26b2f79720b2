"""TLS on the CCS port, checked with `openssl s_client` (a client nobody here wrote).

TLS 1.0/1.1 must be refused by the *server*: the same client options are shown to complete a
TLS 1.0/1.1 handshake against a throwaway `openssl s_server` (so the client can do it), the
emulator answers them with a protocol alert, and the same options with -tls1_2 succeed
against the emulator.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

OPENSSL = shutil.which("openssl")
FIXTURES = Path(__file__).resolve().parents[2] / "Fixtures" / "tls"
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="openssl CLI not installed (scripts/setup installs it)")

# OpenSSL 3 allows TLS < 1.2 only at security level 0 (else it fails client-side with
# "no protocols available" / "legacy sigalg disallowed"), so old-version probes use this.
LEGACY = ["-cipher", "DEFAULT@SECLEVEL=0"]
CLIENT_ERRORS = ("no protocols available", "legacy sigalg disallowed", "no ciphers available")
SERVER_REFUSALS = ("alert protocol version", "alert number 70", "alert handshake failure", "alert number 40")


def s_client(port: int, *args: str, timeout: float = 20) -> tuple[int, str]:
    cmd = [OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", *args]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def verified(ca: str, name: str = "gcm.googleapis.com") -> list[str]:
    return ["-CAfile", ca, "-verify_return_error", "-servername", name, "-verify_hostname", name]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def legacy_tls_server(tmp_path_factory):
    """A throwaway openssl s_server that accepts TLS 1.0/1.1 (control for the client options)."""
    key, cert = FIXTURES / "legacy-control-key.pem", FIXTURES / "legacy-control.pem"
    port = free_port()
    proc = subprocess.Popen([OPENSSL, "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(cert),
                             "-key", str(key), *LEGACY, "-quiet"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("could not start the control openssl s_server")
                time.sleep(0.1)
        yield port, str(cert)
    finally:
        proc.kill()
        proc.wait(5)


def test_ready_reports_ca_inside_data_dir(server):
    r = server.ready
    assert r["event"] == "ready"
    assert os.path.isabs(r["data_dir"]) and os.path.isabs(r["ca_cert"]), r
    assert Path(r["ca_cert"]) == Path(r["data_dir"]) / "tls" / "ca.pem", r
    assert Path(r["data_dir"]).resolve() == server.data_dir.resolve(), r
    assert Path(r["ca_cert"]).read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert all(isinstance(r[k], int) and r[k] > 0 for k in ("ccs_port", "device_port", "http_port")), r
    # The same JSON is printed as one line on stdout (it may be flushed just after the file).
    deadline = time.monotonic() + 5
    while True:
        readies = []
        for line in server.stdout_text().splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("event") == "ready":
                readies.append(obj)
        if readies or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert readies == [r], server.stdout_text()


@pytest.mark.parametrize("version", ["-tls1", "-tls1_1"])
def test_old_tls_refused_by_server(server, legacy_tls_server, version):
    ctl_port, ctl_cert = legacy_tls_server
    # Control: these exact client options can complete this handshake.
    rc, out = s_client(ctl_port, version, *LEGACY, *verified(ctl_cert, "localhost"))
    assert rc == 0 and "Cipher is (NONE)" not in out, f"control handshake failed, client cannot do {version}:\n{out}"

    rc, out = s_client(server.ccs_port, version, *LEGACY, *verified(server.ca_cert))
    assert rc != 0, f"emulator accepted {version}:\n{out}"
    assert not any(e in out for e in CLIENT_ERRORS), f"client-side error, not a server refusal:\n{out}"
    # The server's refusal: a protocol_version (or handshake_failure) alert, as BoringSSL/OpenSSL
    # send; a server that just hangs up before answering the ClientHello also refused.
    hung_up = "unexpected eof while reading" in out and "handshake has read 0 bytes" in out
    assert any(a in out for a in SERVER_REFUSALS) or hung_up, f"no refusal from the server:\n{out}"

    # Same options, TLS 1.2: fine. So it is the version the server refused.
    rc, out = s_client(server.ccs_port, "-tls1_2", *LEGACY, *verified(server.ca_cert))
    assert rc == 0 and "New, TLSv1.2" in out, out


@pytest.mark.parametrize("version,proto", [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")])
def test_modern_tls_verifies_against_ca(server, version, proto):
    rc, out = s_client(server.ccs_port, version, *verified(server.ca_cert))
    assert rc == 0, out
    assert f"New, {proto}" in out, out
    assert "Verify return code: 0 (ok)" in out, out


@pytest.mark.parametrize("name", ["localhost", "fcm-xmpp.googleapis.com", "gcm.googleapis.com",
                                  "gcm-xmpp.googleapis.com", "gcm-preprod.googleapis.com"])
def test_certificate_names(server, name):
    rc, out = s_client(server.ccs_port, "-tls1_2", *verified(server.ca_cert, name))
    assert rc == 0 and "Verify return code: 0 (ok)" in out, out


@pytest.mark.parametrize("ip", ["127.0.0.1", "::1"])
def test_certificate_ip_addresses(server, ip):
    rc, out = s_client(server.ccs_port, "-tls1_2", "-CAfile", server.ca_cert, "-verify_return_error",
                       "-verify_ip", ip)
    assert rc == 0 and "Verify return code: 0 (ok)" in out, out


def test_certificate_rejects_other_names(server):
    """The name check is real: a name the certificate does not carry fails verification."""
    rc, out = s_client(server.ccs_port, "-tls1_2", *verified(server.ca_cert, "example.com"))
    assert rc != 0, out
    assert "hostname mismatch" in out or "Verify return code: 62" in out, out


def test_tls_cert_serves_the_given_chain(start_server):
    """--tls-cert/--tls-key: the emulator serves that chain (no development CA), and the ready line's
    ca_cert and GET /emulator/v1/ca.pem point at the given file."""
    import urllib.request
    chain = FIXTURES / "custom-chain.pem"
    srv = start_server(extra_args=["--tls-cert", str(chain), "--tls-key", str(FIXTURES / "custom-server-key.pem")])
    assert srv.ca_cert == str(chain)
    with urllib.request.urlopen(srv.http_base + "/emulator/v1/ca.pem", timeout=10) as r:
        assert r.read().decode() == chain.read_text()
    rc, out = s_client(srv.ccs_port, *verified(str(FIXTURES / "custom-ca.pem")))
    assert "Verify return code: 0 (ok)" in out, out[-2000:]
    rc, out = s_client(srv.ccs_port, *verified(str(FIXTURES / "custom-ca.pem"), "example.com"))
    assert "Verify return code: 0 (ok)" not in out
