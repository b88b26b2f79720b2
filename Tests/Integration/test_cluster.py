"""Two emulator nodes on one PostgreSQL database act as one service (docs/scaling.md): an app
server on node A, devices on node B. Downstream, delivery receipts, upstream, draining, and kill -9
of node B with messages in flight (its devices reconnect to A; nothing ACKed is lost).

Needs the throwaway server of scripts/test ($CCS_TEST_POSTGRES_URL); skipped, saying so, without it.
Waits are on facts (an event, an answer, the admin API), never on sleeps.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ccs_support import EmulatorServer, get_device, list_devices, new_key, new_sender_id, register_device
from ccs_support.admin_api import http_json
from ccs_support.server import create_database, postgres_url
from ccs_support.upstream import (
    RawAppServer, connection_id, drain, expect_sent, send_upstream, wait_until,
)

pytestmark = pytest.mark.skipif(postgres_url() is None,
                                reason="no PostgreSQL: scripts/test starts one and sets CCS_TEST_POSTGRES_URL")

APP = "com.example.cluster"


@pytest.fixture
def cluster(tmp_path):
    """Nodes on one new database: cluster("a") starts (or restarts) node a; cluster("a", "--clock", "virtual")
    with those options too."""
    url = create_database("ccs_cl_" + uuid.uuid4().hex[:20])
    nodes: dict[str, EmulatorServer] = {}

    def node(name: str, *extra: str) -> EmulatorServer:
        srv = nodes.get(name) or EmulatorServer(tmp_path / name / "data", log_dir=tmp_path / name,
                                                extra_args=["--store", url, *extra])
        nodes[name] = srv
        srv.start()
        return srv

    yield node
    for srv in nodes.values():
        srv.stop()


@pytest.fixture
def app_servers():
    made: list[RawAppServer] = []

    def connect(srv: EmulatorServer, sender: str, key: str, **kw) -> RawAppServer:
        c = RawAppServer(srv.ccs_port, srv.ca_cert, sender, key, **kw)
        made.append(c)
        return c

    yield connect
    for c in made:
        try:
            c.close()
        except Exception:
            pass


def wait_registered(srv: EmulatorServer, token: str) -> None:
    wait_until(lambda: get_device(srv.http_base, token)[0] == 200, 20,
               f"node {srv.data_dir.parent.name} does not know the device {token[:20]}…")


def test_downstream_on_a_reaches_a_device_on_b_with_its_receipt(cluster, devices, app_servers):
    a, b = cluster("a"), cluster("b")
    sender, key = new_sender_id(), new_key()
    token = register_device(a.http_base, APP, [sender])["token"]
    wait_registered(b, token)  # told by A's NOTIFY
    dev = devices(b, APP, [sender], token=token)
    dev.expect("connected", timeout=30)

    server = app_servers(a, sender, key)
    server.send_json({"to": token, "message_id": "x-1", "data": {"n": "1"}, "delivery_receipt_requested": True})
    assert server.response("x-1")["message_type"] == "ack"
    got = dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"]
    assert got["data"] == {"n": "1"}
    # The device's confirmation on B becomes a receipt for the app server on A.
    server.wait(lambda: len(server.receipts) >= 1, 20, "waiting for the delivery receipt")
    receipt = server.receipts[0].payload
    assert receipt["message_id"] == "dr2:x-1" and receipt["data"]["message_status"] == "MESSAGE_SENT_TO_DEVICE"
    server.ack(token, "dr2:x-1")


def test_a_message_for_a_device_on_b_is_offered_over_the_nodes_link_before_it_is_written(cluster, devices, app_servers):
    a, b = cluster("a"), cluster("b")
    assert a.ready["cluster_port"] > 0 and b.ready["cluster_port"] > 0
    sender, key = new_sender_id(), new_key()
    dev = devices(b, APP, [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    server = app_servers(a, sender, key)

    def ticketed() -> int:
        store = http_json("GET", f"{a.http_base}/emulator/v1/info")[1]["store"]
        return store["live_writes_called_off"] + store["live_writes_committed"]

    sent: list[str] = []

    def send_one_and_see_an_offer() -> bool:
        sent.append(f"live-{len(sent)}")
        assert server.downstream(token, sent[-1])["message_type"] == "ack"
        return ticketed() >= 1

    # A learns that B holds the device from B's presence announcement, which follows the connection:
    # until then A writes first. Once A knows, its writes are ticketed (offered first): called off by
    # the device's confirmation, or committed when it came late.
    wait_until(send_one_and_see_an_offer, 30, "A offering a message to B")
    got = [m["data"]["m"] for m in dev.messages(until=lambda ms: len(ms) >= len(sent))]
    assert sorted(got) == sorted(sent), got
    # Nothing stays queued: what was written anyway is removed once the device confirmed it.
    wait_until(lambda: get_device(b.http_base, token)[1]["queued"] == 0, 20, "the device's queue emptied")


def test_upstream_from_a_device_on_b_reaches_the_app_server_on_a(cluster, devices, app_servers):
    a, b = cluster("a"), cluster("b")
    sender, key = new_sender_id(), new_key()
    server = app_servers(a, sender, key)
    dev = devices(b, APP, [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    for i in range(5):
        send_upstream(dev, f"up-{i}", to=f"{sender}@gcm.googleapis.com")
    expect_sent(dev, [f"up-{i}" for i in range(5)])
    server.wait(lambda: {f"up-{i}" for i in range(5)} <= set(server.upstream_ids()), 20, "waiting for upstream")
    assert all(r.payload["from"] == token and r.payload["category"] == APP for r in server.upstream)
    assert len(server.upstream) == 5, server.summary()  # each once: one node holds each item
    server.ack_all(server.upstream)


def test_draining_on_a_moves_the_app_server_to_b_and_nothing_stops(cluster, devices, app_servers):
    a, b = cluster("a"), cluster("b")
    sender, key = new_sender_id(), new_key()
    dev = devices(b, APP, [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    first = app_servers(a, sender, key, name="on-a")
    assert first.downstream(token, "before")["message_type"] == "ack"
    drain(a.http_base, connection_id(a.http_base, first.jid))
    first.wait(lambda: len(first.controls) >= 1, 20, "waiting for CONNECTION_DRAINING")
    assert first.controls[0].payload["control_type"] == "CONNECTION_DRAINING"
    # As a CCS client does: a new connection, here to the other node.
    second = app_servers(b, sender, key, name="on-b")
    assert second.downstream(token, "after")["message_type"] == "ack"
    got = [m["data"]["m"] for m in dev.messages(until=lambda ms: len(ms) >= 2)]
    assert sorted(got) == ["after", "before"], got
    # Upstream while A's connection drains goes to the connection that takes it: B's.
    send_upstream(dev, "during-drain", to=f"{sender}@gcm.googleapis.com")
    expect_sent(dev, ["during-drain"])
    second.wait_upstream_id("during-drain")
    second.ack(token, "during-drain")


def test_kill_9_of_node_b_loses_no_acked_message(cluster, devices, app_servers):
    a, b = cluster("a"), cluster("b")
    sender, key = new_sender_id(), new_key()
    tokens = [register_device(a.http_base, APP, [sender])["token"] for _ in range(3)]
    for t in tokens:
        wait_registered(b, t)
    # B loses its devices' confirmations (fault injection): what B delivered stays unconfirmed.
    status, body = http_json("POST", f"{b.http_base}/emulator/v1/faults",
                             {"id": "hold", "action": "lose_device_ack", "sender": sender})
    assert status == 201, body
    devs = [devices(b, APP, [sender], token=t) for t in tokens]
    for d in devs:
        d.expect("connected", timeout=30)
    server = app_servers(a, sender, key)
    sent = [f"k-{i}" for i in range(60)]
    for i, mid in enumerate(sent):
        server.send_json({"to": tokens[i % 3], "message_id": mid, "data": {"i": str(i)}})
    server.wait(lambda: all(m in server.responses for m in sent), 30, "waiting for 60 ACKs")
    assert all(server.responses[m]["message_type"] == "ack" for m in sent)
    # The devices on B got them, B never took their confirmations; B dies.
    for d in devs:
        d.collect(lambda e: e.get("event") == "message", quiet=30, timeout=30, until=lambda evs: len(evs) >= 20)
    b.kill()
    for d in devs:
        d.kill()
    # Devices come back on A: every ACKed message is delivered there.
    again = [devices(a, APP, [sender], token=t) for t in tokens]
    delivered: set[str] = set()
    for d in again:
        d.expect("connected", timeout=30)
    for d in again:
        delivered |= {m["data"]["i"] for m in d.messages(until=lambda ms: len(ms) >= 20)}
    assert delivered == {str(i) for i in range(60)}, sorted(set(map(str, range(60))) - delivered)


def test_each_node_shows_the_whole_service(cluster, devices):
    a, b = cluster("a"), cluster("b")
    sender = new_sender_id()
    on_a = register_device(a.http_base, APP, [sender])["token"]
    on_b = register_device(b.http_base, APP, [sender])["token"]
    wait_registered(a, on_b)
    wait_registered(b, on_a)
    assert {on_a, on_b} <= {d["token"] for d in list_devices(a.http_base)}
    assert {on_a, on_b} <= {d["token"] for d in list_devices(b.http_base)}


def test_the_virtual_clock_and_a_token_refresh_are_the_whole_services(cluster, devices, app_servers):
    a, b = cluster("a", "--clock", "virtual"), cluster("b", "--clock", "virtual")
    sender, key = new_sender_id(), new_key()
    token = register_device(a.http_base, APP, [sender])["token"]
    wait_registered(b, token)

    # A message waiting on B's side of the service expires when A moves the clock past its TTL.
    server = app_servers(b, sender, key)
    server.send_json({"to": token, "message_id": "ttl-1", "data": {"n": "1"}, "time_to_live": 60})
    assert server.response("ttl-1")["message_type"] == "ack"
    _, before = http_json("GET", f"{b.http_base}/emulator/v1/clock")
    status, advanced = http_json("POST", f"{a.http_base}/emulator/v1/clock/advance", {"seconds": 3600})
    assert status == 200, advanced
    wait_until(lambda: http_json("GET", f"{b.http_base}/emulator/v1/clock")[1]["now_ms"] == advanced["now_ms"], 20,
               "node b's clock did not follow node a's advance")
    assert advanced["now_ms"] >= before["now_ms"] + 3_600_000
    wait_until(lambda: get_device(b.http_base, token)[1]["queue"] == [], 20, "the expired message is still queued")

    # A token refresh on A: B answers a message to the old token with the canonical id.
    status, record = http_json("POST", f"{a.http_base}/emulator/v1/devices/{token}/refresh")
    assert status == 200, record
    new = record["canonical_token"]
    wait_until(lambda: get_device(b.http_base, new)[0] == 200, 20, "node b does not know the new token")
    server.send_json({"to": token, "message_id": "old-1", "data": {"n": "2"}})
    ack = server.response("old-1")
    assert ack["message_type"] == "ack" and ack["registration_id"] == new, ack


def test_scripts_cluster_starts_the_database_and_the_nodes_and_stops_them_by_pid():
    """scripts/cluster: a throwaway PostgreSQL and two nodes on it, one CA; SIGTERM stops them all."""
    import json
    import os
    import signal
    import subprocess
    import time

    from ccs_support.server import emulator_bin

    script = Path(__file__).resolve().parents[2] / "scripts" / "cluster"
    proc = subprocess.Popen([str(script), "--nodes", "2", "--bin", emulator_bin()], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    lines: list[dict] = []
    try:
        deadline = time.monotonic() + 60
        while not lines or lines[-1].get("event") != "cluster-ready":
            assert time.monotonic() < deadline, f"no cluster-ready line: {lines}"
            line = proc.stdout.readline()
            assert line, f"scripts/cluster ended early: {proc.stderr.read().decode()[-2000:]}"
            lines.append(json.loads(line))
        nodes = [l for l in lines if l["event"] == "node"]
        assert [n["node"] for n in nodes] == [1, 2]
        assert Path(nodes[0]["ca_cert"]).read_bytes() == Path(nodes[1]["ca_cert"]).read_bytes()
        first, second = (f"http://127.0.0.1:{n['http_port']}" for n in nodes)
        token = register_device(first, APP, [new_sender_id()])["token"]
        wait_until(lambda: get_device(second, token)[0] == 200, 20, "node 2 does not know node 1's device")
        postgres_dir = Path(lines[0]["dir"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the script's own trap stops the nodes and the database
        proc.wait(60)
    for n in nodes:
        with pytest.raises(ProcessLookupError):
            os.kill(n["pid"], 0)
    assert not postgres_dir.exists()
