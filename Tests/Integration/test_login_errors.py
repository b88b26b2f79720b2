"""Issue 11, item 4: a refused login says why, in the SASL failure's <text> and in the log at the
default level (notice), for every reason; an app server on the device port is told where to go."""

from __future__ import annotations

import json

import pytest

from ccs_support import EmulatorServer, XmppConn, new_key, new_sender_id
from ccs_support.xmpp import plain_payload


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("strict-login")
    config = d / "senders.json"
    config.write_text(json.dumps({"senders": [{"sender_id": "4242", "server_key": "right-key"}]}))
    srv = EmulatorServer(d / "data", auth="strict", config=config, log_dir=d)
    srv.start()
    yield srv
    srv.stop()


def refused(port: int, ca: str, authcid: str, key: str) -> str:
    c = XmppConn(port, ca)
    try:
        c.open_stream()
        item = c.auth_plain(plain_payload("", authcid, key))
        assert "not-authorized" in item.raw, item.raw
        return item.raw
    finally:
        c.close()


@pytest.mark.parametrize("authcid,key,reason", [
    ("4242@gcm.googleapis.com", "wrong-key", "wrong server key for sender 4242 (--auth strict)"),
    ("777@gcm.googleapis.com", "right-key", "sender 777 is not in the --config file (--auth strict)"),
    ("not-a-number@gcm.googleapis.com", "k", "the user name must be a sender ID"),
    ("4242@gcm.googleapis.com", "", "the password (the server key) is empty for sender 4242"),
])
def test_refused_logins_say_why(strict_server, authcid, key, reason):
    raw = refused(strict_server.ccs_port, strict_server.ca_cert, authcid, key)
    assert f'<text xml:lang="en">' in raw and reason in raw, raw
    # Logged at the default level, with the same reason.
    assert reason.split(" (")[0] in strict_server.stderr_tail(20000)


def test_an_app_server_on_the_device_port_is_told_the_ccs_port(server):
    raw = refused(server.device_port, server.ca_cert, f"{new_sender_id()}@gcm.googleapis.com", new_key())
    assert "this is the device channel" in raw and f"port {server.ccs_port}" in raw, raw
