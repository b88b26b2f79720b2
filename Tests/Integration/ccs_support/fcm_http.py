"""Helpers for the FCM HTTP API tests: raw HTTP without proxies, service-account files from
`ccs-emulator credentials`, and the firebase-admin driver run in its own process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .cli import run_cli

TIMEOUT = 15.0
MESSAGING_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"

# Never through a proxy from the environment: these requests are for the local server only.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def raw(method: str, url: str, body: bytes | str | None = None, headers: dict[str, str] | None = None,
        timeout: float = TIMEOUT) -> tuple[int, dict[str, str], str]:
    """One request; (status, headers with lower-case names, body text). Never raises on 4xx/5xx."""
    data = body.encode() if isinstance(body, str) else body
    if data is None and method in ("POST", "PUT", "PATCH"):
        data = b""
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None and "Content-Type" not in (headers or {}):
        # urllib would add a form Content-Type by itself; the tests say what they send.
        req.remove_header("Content-type")
    try:
        with _opener.open(req, timeout=timeout) as resp:
            status, hdrs, text = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        status, hdrs, text = e.code, e.headers, e.read()
    return status, {k.lower(): v for k, v in hdrs.items()}, text.decode("utf-8", "replace")


def credentials_file(server, project: str, out: Path) -> dict:
    """`ccs-emulator credentials --project P --data-dir D --emulator URL --out F`; returns the file."""
    proc = run_cli("credentials", "--project", project, "--data-dir", str(server.data_dir),
                   "--emulator", server.http_base, "--out", str(out))
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    line = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert line["event"] == "credentials" and line["file"] == str(out.resolve()), line
    assert (out.stat().st_mode & 0o777) == 0o600
    return json.loads(out.read_text())


def pyfcm_legacy(server, key: str = "AIzaSy-legacy-key"):
    """pyfcm 1.x pointed at the emulator's /fcm/send the way its source allows: an instance attribute
    (the class keeps Google's URL for anyone else)."""
    from pyfcm import FCMNotification

    push = FCMNotification(api_key=key)
    push.FCM_END_POINT = f"{server.http_base}/fcm/send"
    return push


def google_style_credentials(server, project: str, out: Path) -> dict:
    """`ccs-emulator credentials --google-token-uri`: a file that keeps Google's token_uri, for proxy
    mode (the unmodified client reaches the emulator through HTTPS_PROXY alone); returns the file."""
    proc = run_cli("credentials", "--project", project, "--data-dir", str(server.data_dir), "--google-token-uri",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    written = json.loads(out.read_text())
    assert written["token_uri"] == "https://oauth2.googleapis.com/token", written
    return written


def access_token(credentials_path: Path, scopes: list[str] | None = None) -> str:
    """What google-auth (firebase-admin's auth library) gets from the file's token_uri."""
    from google.oauth2 import service_account
    import google.auth.transport.requests

    creds = service_account.Credentials.from_service_account_file(str(credentials_path), scopes=scopes or [MESSAGING_SCOPE])
    creds.refresh(google.auth.transport.requests.Request())
    return creds.token


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_firebase(job: dict, timeout: float = 60.0, workdir: Path | None = None,
                 proxy: str | None = None, ca: str | None = None) -> dict:
    """Runs ccs_support/firebase_driver.py on `job` in a subprocess and returns its JSON answer.

    The subprocess gets HTTPS_PROXY pointing at a closed loopback port (NO_PROXY for 127.0.0.1):
    google-auth's background allowedLocations lookup goes to iamcredentials.googleapis.com whatever
    token_uri says, and must fail here, on this machine, rather than leave it. With `proxy` (the
    emulator's proxy mode, http://127.0.0.1:PORT) and `ca` (its CA file) every HTTPS request goes
    there instead, and the CA is the only one trusted."""
    return run_driver("firebase_driver.py", job, timeout=timeout, workdir=workdir, proxy=proxy, ca=ca)


def run_driver(name: str, job: dict, timeout: float = 60.0, workdir: Path | None = None,
               proxy: str | None = None, ca: str | None = None) -> dict:
    """Runs ccs_support/NAME on `job` in a subprocess (see run_firebase) and returns its JSON answer."""
    driver = Path(__file__).with_name(name)
    workdir = Path(workdir) if workdir else Path.cwd()
    job_file = workdir / f"firebase-job-{os.getpid()}-{id(job)}.json"
    job_file.write_text(json.dumps(job))
    via = proxy or f"http://127.0.0.1:{closed_port()}"
    env = dict(os.environ, HTTPS_PROXY=via, https_proxy=via, NO_PROXY="127.0.0.1,localhost",
               no_proxy="127.0.0.1,localhost")
    env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
    if ca:
        env.update(REQUESTS_CA_BUNDLE=ca, SSL_CERT_FILE=ca)
    try:
        proc = subprocess.run([sys.executable, str(driver), str(job_file)], env=env, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{name} did not finish within {timeout}s; "
                             f"stderr: {(e.stderr or b'')[-3000:].decode('utf-8', 'replace')}") from None
    out = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0 and out, f"{name} failed ({proc.returncode}); stderr:\n{err[-4000:]}"
    result: dict[str, Any] = json.loads(out[-1])
    result["stderr"] = err
    return result
