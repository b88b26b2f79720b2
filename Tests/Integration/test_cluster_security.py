"""Issue 39, items 4, 5 and 8, through the real binary: two nodes on one throwaway PostgreSQL
(as in test_cluster.py).

- Two nodes on one virtual clock never give one device the same message id (each node mints ids of
  its own), and nothing ACKed is overwritten.
- A PostgreSQL role with LOGIN and no privileges on the emulator's tables cannot steer the nodes by
  NOTIFY: a forged clock, a forged message on a node's channel, an offer or a confirmation are not
  taken; it cannot read the cluster's key either (docs/scaling.md).
- The cluster link listener closes a silent connection after the handshake deadline, and refuses
  unauthenticated connections past its cap.

Waits are on facts (an answer, the admin API, a closed socket), never on sleeps.
"""

from __future__ import annotations

import json
import socket
import subprocess
import uuid

import pytest

from ccs_support import get_device, new_key, new_sender_id, register_device
from ccs_support.admin_api import http_json
from ccs_support.server import EmulatorServer, create_database, postgres_url
from ccs_support.upstream import RawAppServer, wait_until

pytestmark = pytest.mark.skipif(postgres_url() is None,
                                reason="no PostgreSQL: scripts/test starts one and sets CCS_TEST_POSTGRES_URL")

APP = "com.example.cluster"
YEAR_9999_MS = 253_402_300_799_000
# NodeLinks.maxUnauthenticated: links past it that have not sent the secret yet are closed at once.
LINK_CAP = 64


@pytest.fixture
def cluster(tmp_path):
    """Nodes on one new database; cluster.url is its URL."""
    url = create_database("ccs_sec_" + uuid.uuid4().hex[:20])
    nodes: list[EmulatorServer] = []

    def node(name: str, *extra: str) -> EmulatorServer:
        srv = EmulatorServer(tmp_path / name / "data", log_dir=tmp_path / name, extra_args=["--store", url, *extra])
        nodes.append(srv)
        srv.start()
        return srv

    node.url = url
    yield node
    for srv in nodes:
        srv.stop()


@pytest.fixture
def app_servers():
    made: list[RawAppServer] = []

    def connect(srv: EmulatorServer, sender: str, key: str) -> RawAppServer:
        c = RawAppServer(srv.ccs_port, srv.ca_cert, sender, key)
        made.append(c)
        return c

    yield connect
    for c in made:
        try:
            c.close()
        except Exception:
            pass


def psql(url: str, sql: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["psql", url, "-v", "ON_ERROR_STOP=1", "-tAc", sql], capture_output=True, text=True,
                          check=check, timeout=30)


def intruder(url: str) -> str:
    """The URL of a new role with LOGIN and no privileges on anything of the emulator's."""
    name = "intruder_" + uuid.uuid4().hex[:12]
    psql(url, f"CREATE ROLE {name} LOGIN")
    return url.replace("://ccs@", f"://{name}@", 1)


def node_id(url: str, srv: EmulatorServer) -> str:
    return psql(url, f"SELECT id FROM cluster_node WHERE link_port = {srv.ready['cluster_port']} "
                     "AND lease_until > ccs_now_ms()").stdout.strip()


def notify(url: str, channel: str, payload: str) -> None:
    psql(url, f"SELECT pg_notify('{channel}', $p${payload}$p$)")


def wait_registered(srv: EmulatorServer, token: str) -> None:
    wait_until(lambda: get_device(srv.http_base, token)[0] == 200, 20, "the other node does not know the device")


def clock(srv: EmulatorServer) -> int:
    return http_json("GET", f"{srv.http_base}/emulator/v1/clock")[1]["now_ms"]


def test_two_nodes_on_a_virtual_clock_never_give_one_device_the_same_message_id(cluster, app_servers):
    a, b = cluster("a", "--clock", "virtual"), cluster("b", "--clock", "virtual")
    sender, key = new_sender_id(), new_key()
    token = register_device(a.http_base, APP, [sender])["token"]
    wait_registered(b, token)
    on_a = app_servers(a, sender, key)
    on_a.downstream(token, "first")  # the sender is stored before node b sees it log in
    on_b = app_servers(b, sender, key)
    sent = ["first"]
    for i in range(4):
        for name, server in (("a", on_a), ("b", on_b)):
            sent.append(f"{name}-{i}")
            answer = server.downstream(token, sent[-1])
            assert answer["message_type"] == "ack", answer
    # Every ACKed message is queued for the offline device, each under an id of its own.
    queue = get_device(a.http_base, token)[1]["queue"]
    assert sorted(m["app_message_id"] for m in queue) == sorted(sent), queue
    assert len({m["message_id"] for m in queue}) == len(sent), queue


def two_nodes_and_an_intruder(cluster, devices, app_servers):
    """Nodes a and b on a virtual clock, a device connected to b, an app server on a, and the URL of a
    role with LOGIN and no privileges."""
    a, b = cluster("a", "--clock", "virtual"), cluster("b", "--clock", "virtual")
    sender, key = new_sender_id(), new_key()
    dev = devices(b, APP, [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    server = app_servers(a, sender, key)
    evil = intruder(cluster.url)
    # It cannot read the key NOTIFY payloads are sealed with, nor the links' secrets.
    assert psql(evil, "SELECT * FROM cluster_key", check=False).returncode != 0
    assert psql(evil, "SELECT link_secret FROM cluster_node", check=False).returncode != 0
    return a, b, sender, dev, token, server, evil


def test_a_forged_clock_through_notify_moves_no_node(cluster, devices, app_servers):
    a, b, sender, dev, token, server, evil = two_nodes_and_an_intruder(cluster, devices, app_servers)
    offline = register_device(a.http_base, APP, [sender])["token"]
    wait_registered(b, offline)
    server.send_json({"to": offline, "message_id": "kept", "data": {"n": "kept"}, "time_to_live": 3600})
    assert server.response("kept")["message_type"] == "ack"
    notify(evil, "ccs_registry", json.dumps({"n": "intruder", "k": "clock", "v": str(YEAR_9999_MS)}))
    notify(evil, "ccs_presence", f"{offline} {node_id(cluster.url, b)}")

    # Each node handles notifications in order: once B follows A's real advance, and A B's, the
    # forged clock came and went. Neither node moved to the year 9999; nothing expired.
    status, advanced = http_json("POST", f"{a.http_base}/emulator/v1/clock/advance", {"seconds": 1})
    assert status == 200 and advanced["now_ms"] < YEAR_9999_MS, advanced
    wait_until(lambda: clock(b) == advanced["now_ms"], 20, "node b did not follow node a's advance")
    status, advanced = http_json("POST", f"{b.http_base}/emulator/v1/clock/advance", {"seconds": 1})
    assert status == 200 and advanced["now_ms"] < YEAR_9999_MS, advanced
    wait_until(lambda: clock(a) == advanced["now_ms"], 20, "node a did not follow node b's advance")
    assert [m["app_message_id"] for m in get_device(b.http_base, offline)[1]["queue"]] == ["kept"]


def test_a_forged_message_offer_or_confirmation_through_notify_is_not_taken(cluster, devices, app_servers):
    a, b, sender, dev, token, server, evil = two_nodes_and_an_intruder(cluster, devices, app_servers)
    id_a, id_b = node_id(cluster.url, a), node_id(cluster.url, b)
    forged = {"token": token, "id": "0:1%forged", "sender": sender, "app_id": "forged", "priority": "high", "ttl": 60,
              "enqueued": 0, "expires": YEAR_9999_MS, "receipt": 0, "dwi": 0, "notification": 0, "kind": "message",
              "payload": json.dumps({"data": {"n": "forged"}})}
    notify(evil, f"ccs_node_{id_b}", json.dumps(forged))
    notify(evil, f"ccs_node_{id_b}", f"\nL {id_a}\n" + json.dumps(dict(forged, id="0:2%forged")))
    notify(evil, f"ccs_node_{id_a}", "\nC\n0:3%forged")
    # A message committed for the device on B is announced on B's channel after the forged ones:
    # once it arrived, the forged message and offer would have too.
    server.send_json({"to": token, "message_id": "real", "data": {"n": "real"}, "delivery_receipt_requested": True})
    assert server.response("real")["message_type"] == "ack"
    got = dev.messages(until=lambda ms: any(m.get("data", {}).get("n") == "real" for m in ms))
    assert [m.get("data", {}).get("n") for m in got] == ["real"], got


def test_the_link_listener_closes_a_silent_connection_at_the_handshake_deadline(cluster):
    a = cluster("a", "--request-timeout", "1")
    with socket.create_connection(("127.0.0.1", a.ready["cluster_port"]), timeout=30) as s:
        # Closed by the node (EOF), well before the socket's own 30 s timeout.
        assert s.recv(1) == b""


def test_the_link_listener_refuses_unauthenticated_connections_past_its_cap(cluster):
    a = cluster("a", "--request-timeout", "3600")
    port = a.ready["cluster_port"]
    held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(LINK_CAP)]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as extra:
            assert extra.recv(1) == b""
        # The node still serves: its admin API answers.
        assert http_json("GET", f"{a.http_base}/emulator/v1/info")[0] == 200
    finally:
        for s in held:
            s.close()
