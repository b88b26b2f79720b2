"""Fixtures for the black-box integration tests of ccs-emulator.

The binary under test is $CCS_EMULATOR_BIN (scripts/test sets it to the debug build). Every
server runs on 127.0.0.1 with port 0 in a fresh data dir under pytest's tmp dir, and is
stopped with SIGTERM (then SIGKILL) at teardown; an atexit hook kills anything left over.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ccs_support import (  # noqa: E402
    DeviceCLI, EmulatorServer, XmppConn, emulator_bin, new_key, new_sender_id, register_device,
)

# Hard stop for a single test, on top of every bounded wait inside it: a hung test must fail,
# not hang the suite. (No pytest plugins: SIGALRM in the main thread.)
TEST_HARD_LIMIT = 90


@pytest.fixture(autouse=True)
def _hard_limit(request):
    def on_alarm(signum, frame):
        raise TimeoutError(f"{request.node.nodeid} ran longer than {TEST_HARD_LIMIT}s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_HARD_LIMIT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def pytest_report_header(config):
    try:
        return f"ccs-emulator binary: {emulator_bin()}"
    except RuntimeError as e:
        return f"ccs-emulator binary: NOT FOUND ({e})"


@contextlib.contextmanager
def running_server(base: Path, **kw) -> Iterator[EmulatorServer]:
    """Starts `ccs-emulator serve` in base/data (port 0 everywhere); stops it on exit."""
    srv = EmulatorServer(base / "data", log_dir=base, **kw)
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[EmulatorServer]:
    """One server per test module (tests use distinct sender IDs, so they do not interfere)."""
    base = tmp_path_factory.mktemp("server")
    with running_server(base) as srv:
        yield srv


@pytest.fixture(scope="module")
def ready(server) -> dict:
    """The server's ready JSON."""
    return server.ready


@pytest.fixture
def start_server(tmp_path) -> Iterator:
    """Factory for servers private to one test: start_server(auth=..., config=..., base=...)."""
    started: list[EmulatorServer] = []

    def start(base: Path | None = None, **kw) -> EmulatorServer:
        b = Path(base) if base else tmp_path / f"srv{len(started)}"
        srv = EmulatorServer(b / "data", log_dir=b, **kw)
        started.append(srv)
        srv.start()
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture
def devices(tmp_path) -> Iterator:
    """Factory for device CLI processes; all are closed (or killed) at teardown."""
    procs: list[DeviceCLI] = []

    def start(srv: EmulatorServer, app: str, senders: list[str], **kw) -> DeviceCLI:
        d = DeviceCLI(srv.http_port, app, senders, log_dir=tmp_path, **kw)
        procs.append(d)
        return d

    yield start
    for d in procs:
        if d.proc.poll() is None:
            d.kill()


@pytest.fixture
def xmpp(request) -> Iterator:
    """Factory for raw TLS XMPP connections: xmpp() to the module server, xmpp(srv) to another."""
    conns: list[XmppConn] = []

    def connect(srv: EmulatorServer | None = None, **kw) -> XmppConn:
        s = srv or request.getfixturevalue("server")
        c = XmppConn(s.ccs_port, s.ca_cert, **kw)
        conns.append(c)
        return c

    yield connect
    for c in conns:
        c.close()


@pytest.fixture
def sender() -> str:
    return new_sender_id()


@pytest.fixture
def key() -> str:
    return new_key()


@pytest.fixture
def device(server, sender) -> dict:
    """A device registered (over HTTP) for `sender`, not connected."""
    return register_device(server.http_base, "com.example.app", [sender])
