"""The PostgreSQL store (`serve --store postgres://…`, docs/scaling.md): the state lives in the
database, not in the data directory; an ACK is still a promise across kill -9; exports move between
the backends; bad URLs and unreachable servers are refused with a clear error.

Needs the throwaway server of scripts/test ($CCS_TEST_POSTGRES_URL); skipped, saying so, without it.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ccs_support import EmulatorServer, XmppConn, get_device, new_key, new_sender_id, register_device
from ccs_support.cli import run_cli, json_lines, serve_must_fail
from ccs_support.fcm_http import closed_port
from ccs_support.server import create_database, postgres_url
from test_crash import N_DEVICES, pump_until_kill

pytestmark = pytest.mark.skipif(postgres_url() is None,
                                reason="no PostgreSQL: scripts/test starts one and sets CCS_TEST_POSTGRES_URL")

APP = "com.example.postgres"


@pytest.fixture
def database() -> str:
    """A new, empty database of its own."""
    return create_database("ccs_it_" + uuid.uuid4().hex[:20])


def on_postgres(base: Path, url: str, *extra: str) -> EmulatorServer:
    return EmulatorServer(base / "data", log_dir=base, extra_args=["--store", url, *extra])


def send_acked(srv: EmulatorServer, sender: str, key: str, token: str, count: int) -> None:
    c = XmppConn(srv.ccs_port, srv.ca_cert)
    try:
        c.login(sender, key)
        for i in range(count):
            payload, item = c.downstream({"to": token, "message_id": f"pg-{i}", "data": {"seq": str(i)}})
            assert payload.get("message_type") == "ack", item.raw
    finally:
        c.close()


def test_the_state_lives_in_the_database_not_the_data_directory(tmp_path, database):
    first = on_postgres(tmp_path / "a", database)
    try:
        first.start()
        sender, key = new_sender_id(), new_key()
        token = register_device(first.http_base, APP, [sender])["token"]
        send_acked(first, sender, key, token, 3)
    finally:
        first.stop()
    # Another data directory on the same database: the device and its queue are there.
    second = on_postgres(tmp_path / "b", database)
    try:
        second.start()
        status, body = get_device(second.http_base, token)
        assert status == 200, body
        assert [m["app_message_id"] for m in body["queue"]] == ["pg-0", "pg-1", "pg-2"], body
        # The app server's key was stored too: the same login works on this node.
        send_acked(second, sender, key, token, 1)
    finally:
        second.stop()


def test_sigkill_on_postgres_loses_no_acked_message(tmp_path, database, devices):
    srv = on_postgres(tmp_path, database)
    try:
        srv.start()
        sender, key = new_sender_id(), new_key()
        tokens = [register_device(srv.http_base, APP, [sender])["token"] for _ in range(N_DEVICES)]
        c = XmppConn(srv.ccs_port, srv.ca_cert)
        try:
            c.login(sender, key)
            acked, nacked, sent, in_flight = pump_until_kill(srv, c, tokens, 200)
        finally:
            c.close()
        assert in_flight > 0 and not srv.alive
        srv.start()
        queued = 0
        seqs: set[int] = set()
        for t in tokens:
            status, body = get_device(srv.http_base, t)
            assert status == 200, body
            queued += len(body["queue"])
            seqs |= {int(m["payload"]["data"]["seq"]) for m in body["queue"] if m.get("kind") == "message"}
        lost = sorted(set(acked.values()) - seqs)
        print(f"\npostgres crash: sent={sent} acked={len(acked)} nacked={len(nacked)} queued after restart={queued}")
        assert not lost, f"{len(lost)} ACKed messages lost after SIGKILL: {lost[:30]}"
    finally:
        srv.stop()


def test_export_from_postgres_imports_into_sqlite(tmp_path, database):
    srv = on_postgres(tmp_path / "pg", database)
    try:
        srv.start()
        sender, key = new_sender_id(), new_key()
        token = register_device(srv.http_base, APP, [sender])["token"]
        send_acked(srv, sender, key, token, 2)
        # While the server runs: one read transaction.
        proc = run_cli("export", "--store", database, str(tmp_path / "exp"))
        assert proc.returncode == 0, proc.stderr.decode()
        assert json_lines(proc.stdout)[-1]["event"] == "exported"
    finally:
        srv.stop()
    sqlite = EmulatorServer(tmp_path / "sqlite" / "data", log_dir=tmp_path / "sqlite",
                            extra_args=["--import", str(tmp_path / "exp")])
    try:
        sqlite.start()
        status, body = get_device(sqlite.http_base, token)
        assert status == 200 and len(body["queue"]) == 2, body
    finally:
        sqlite.stop()


def test_reset_state_empties_the_database(tmp_path, database):
    srv = on_postgres(tmp_path, database)
    try:
        srv.start()
        token = register_device(srv.http_base, APP, [new_sender_id()])["token"]
        srv.stop()
        srv.extra_args.append("--reset-state")
        srv.start()
        status, _ = get_device(srv.http_base, token)
        assert status == 404
        assert "--reset-state: deleted the state in postgres://" in srv.stderr_tail()
    finally:
        srv.stop()


@pytest.mark.parametrize("url, says", [
    ("mysql://u@127.0.0.1/db", "the scheme is not postgres://"),
    ("postgres://127.0.0.1/db", "no user name"),
    ("postgres://u@127.0.0.1:99999/db", "port"),
    ("postgres://u@127.0.0.1/db?sslmode=bogus", "sslmode"),
])
def test_a_bad_store_url_is_refused_before_anything_starts(tmp_path, url, says):
    code, err = serve_must_fail(tmp_path / "data", "--store", url)
    assert code != 0 and "--store" in err and says in err, (code, err)


def test_an_unreachable_database_is_a_clear_error(tmp_path):
    url = f"postgres://ccs@127.0.0.1:{closed_port()}/nowhere"
    code, err = serve_must_fail(tmp_path / "data", "--store", url)
    assert code != 0 and f"--store postgres://ccs@127.0.0.1" in err, (code, err)


def test_a_restart_of_postgresql_under_a_running_node(tmp_path):
    """PostgreSQL restarts (every connection cut): what was ACKed before is still there, sends during
    the cut are answered (SERVICE_UNAVAILABLE, never a crash or a hang), and the node takes sends
    again once it can reconnect."""
    import subprocess
    import tempfile

    script = Path(__file__).resolve().parents[2] / "scripts" / "postgres"
    pg_dir = tempfile.mkdtemp(prefix="ccs-pg-restart-")
    url = subprocess.run([str(script), "start", pg_dir], capture_output=True, text=True, check=True).stdout.strip()
    srv = on_postgres(tmp_path, url)
    try:
        srv.start()
        sender, key = new_sender_id(), new_key()
        token = register_device(srv.http_base, APP, [sender])["token"]
        c = XmppConn(srv.ccs_port, srv.ca_cert)
        try:
            c.login(sender, key)
            payload, item = c.downstream({"to": token, "message_id": "before", "data": {"n": "0"}})
            assert payload.get("message_type") == "ack", item.raw
            subprocess.run([str(script), "restart", pg_dir], capture_output=True, text=True, check=True)
            answers = []
            for i in range(20):  # the first send after the cut may find the old connection closed
                payload, item = c.downstream({"to": token, "message_id": f"after-{i}", "data": {"n": str(i)}})
                answers.append(payload.get("message_type") if payload.get("message_type") == "ack" else payload.get("error"))
                if answers[-1] == "ack":
                    break
            print(f"\nanswers after the restart: {answers}")
            assert answers[-1] == "ack", answers
            assert set(answers[:-1]) <= {"SERVICE_UNAVAILABLE"}, answers
        finally:
            c.close()
        status, body = get_device(srv.http_base, token)
        assert status == 200, body
        assert [m["app_message_id"] for m in body["queue"]] == ["before", f"after-{len(answers) - 1}"], body
    finally:
        srv.stop()
        subprocess.run([str(script), "stop", pg_dir], capture_output=True, text=True)
