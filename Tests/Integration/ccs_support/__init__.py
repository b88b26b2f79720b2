"""Helpers for the black-box integration tests of ccs-emulator (servers, device CLI, HTTP, raw XMPP)."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from .device import DeviceCLI
from .admin_api import get_device, http_json, list_connections, list_devices, register_device, store_sync
from .server import EmulatorServer, emulator_bin
from .xmpp import XmppConn

__all__ = [
    "DeviceCLI", "EmulatorServer", "XmppConn", "emulator_bin", "get_device", "http_json",
    "list_connections", "list_devices", "register_device", "new_sender_id", "run_aiofcm", "store_sync",
]

_counter = itertools.count(1)
_base = random.randrange(100_000, 900_000)


def new_sender_id() -> str:
    """A fresh all-digits sender ID (12 digits), unique within this test run."""
    return f"{_base}{next(_counter):06d}"


def new_key() -> str:
    return f"AIzaSy-test-{random.randrange(10**9):09d}"


def run_aiofcm(job: dict, ca_cert: str, timeout: float = 50.0, workdir: Path | None = None) -> dict:
    """Runs ccs_support/aiofcm_driver.py in a subprocess with SSL_CERT_FILE=ca_cert."""
    driver = Path(__file__).with_name("aiofcm_driver.py")
    workdir = Path(workdir) if workdir else Path.cwd()
    job_file = workdir / f"aiofcm-job-{next(_counter)}.json"
    job_file.write_text(json.dumps(job))
    env = dict(os.environ, SSL_CERT_FILE=ca_cert)
    env.pop("SSL_CERT_DIR", None)
    try:
        proc = subprocess.run([sys.executable, "-I", str(driver), str(job_file)], env=env,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"aiofcm driver did not finish within {timeout}s; "
                             f"stderr: {(e.stderr or b'')[-3000:].decode('utf-8', 'replace')}") from None
    out = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0 and out, f"aiofcm driver failed ({proc.returncode}); stderr:\n{err[-4000:]}"
    result = json.loads(out[-1])
    result["stderr"] = err
    return result
