"""Proxy mode with `--proxy-auth-file`: every CONNECT must carry the file's user and password as
`Proxy-Authorization: Basic`; curl (`--proxy-user`) and requests (`http://user:password@host:port`)
pass, unmodified; anything else is answered 407 with `Proxy-Authenticate: Basic`."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess

import pytest
import requests

from ccs_support import emulator_bin
from test_http_proxy import proxy_exchange

USER, PASSWORD = "dev", "pa:ss word"


@pytest.fixture
def guarded(start_server, tmp_path):
    secret = tmp_path / "proxy-auth"
    secret.write_text(f"{USER}:{PASSWORD}\n")
    secret.chmod(0o600)
    srv = start_server(extra_args=["--proxy-port", "0", "--proxy-auth-file", str(secret)])
    return srv, srv.ready["proxy_port"]


def legacy_send_through(proxy_url: str, ca: str) -> requests.Response:
    return requests.post("https://fcm.googleapis.com/fcm/send", json={"to": "not-a-token"},
                         headers={"Authorization": "key=k"}, proxies={"https": proxy_url}, verify=ca, timeout=30)


def test_requests_with_the_credentials_in_the_proxy_url_reaches_the_emulator(guarded):
    srv, port = guarded
    answer = legacy_send_through(f"http://{USER}:{requests.utils.quote(PASSWORD)}@127.0.0.1:{port}", srv.ca_cert)
    assert answer.status_code == 200 and answer.json()["results"] == [{"error": "InvalidRegistration"}], answer.text
    with pytest.raises(requests.exceptions.ProxyError, match="407"):
        legacy_send_through(f"http://127.0.0.1:{port}", srv.ca_cert)
    with pytest.raises(requests.exceptions.ProxyError, match="407"):
        legacy_send_through(f"http://{USER}:wrong@127.0.0.1:{port}", srv.ca_cert)


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_curl_with_proxy_user(guarded):
    srv, port = guarded
    base = ["curl", "-sS", "--proxy", f"http://127.0.0.1:{port}", "--cacert", srv.ca_cert,
            "-H", "Authorization: key=k", "-H", "Content-Type: application/json", "-d", '{"to":"not-a-token"}',
            "https://fcm.googleapis.com/fcm/send"]
    ok = subprocess.run(base[:1] + ["--proxy-user", f"{USER}:{PASSWORD}"] + base[1:], capture_output=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["results"] == [{"error": "InvalidRegistration"}]
    refused = subprocess.run(base, capture_output=True, timeout=60)
    assert refused.returncode != 0 and b"407" in refused.stderr, refused.stderr


def test_the_challenge_and_the_refusals_on_the_wire(guarded):
    _, port = guarded
    answer = proxy_exchange(port, b"CONNECT fcm.googleapis.com:443 HTTP/1.1\r\nHost: fcm.googleapis.com:443\r\n\r\n")
    head = answer.split(b"\r\n\r\n")[0]
    assert head.startswith(b"HTTP/1.1 407 Proxy Authentication Required\r\n"), answer
    assert b'\r\nProxy-Authenticate: Basic realm="ccs-emulator"' in head, answer
    good = base64.b64encode(f"{USER}:{PASSWORD}".encode())
    # Good credentials do not open a host the emulator does not play.
    answer = proxy_exchange(port, b"CONNECT example.com:443 HTTP/1.1\r\nProxy-Authorization: Basic " + good + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403 "), answer


@pytest.mark.parametrize("args,why", [
    (["--proxy-auth-file", "/nonexistent/file"], "needs --proxy-port"),
    (["--proxy-port", "0", "--proxy-auth-file", "/nonexistent/file"], "cannot be read"),
])
def test_bad_options_are_refused_before_start(tmp_path, args, why):
    proc = subprocess.run([emulator_bin(), "serve", "--data-dir", str(tmp_path / "d"), *args],
                          capture_output=True, timeout=60)
    assert proc.returncode != 0 and why in proc.stderr.decode(), proc.stderr.decode()
