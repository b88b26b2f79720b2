"""pushjack 1.6.0 (PyPI, unmodified) against the APNs gateway and feedback service: command-2 frames,
the error response, its reconnect and resend of the tail, and the feedback list. Pointed at the
emulator the way its class allows: the `host`/`port`/`feedback_host`/`feedback_port` attributes,
and the combined PEM from `ccs-emulator apns-cert` as `certificate`."""

from __future__ import annotations

import pytest

from ccs_support import get_device, http_json, store_sync
from ccs_support.apns import activity, issue_cert, register_ios

pushjack = pytest.importorskip("pushjack")
from pushjack import APNSClient  # noqa: E402
from pushjack.exceptions import APNSInvalidTokenError  # noqa: E402

APP = "com.example.pushjack"
# pushjack waits this long for an error response after its last write (its own knob); the emulator
# answers at once, so this only bounds how long a send without errors takes.
ERROR_TIMEOUT = 3


@pytest.fixture(scope="module")
def client(server, tmp_path_factory):
    cert = issue_cert(server.data_dir, APP, tmp_path_factory.mktemp("pushjack") / "cert")
    c = APNSClient(certificate=cert["combined"], default_error_timeout=ERROR_TIMEOUT)
    c.host, c.port = "127.0.0.1", int(server.ready["apns_port"])
    c.feedback_host, c.feedback_port = "127.0.0.1", int(server.ready["apns_feedback_port"])
    yield c
    c.close()


def test_send_reaches_an_online_device(server, client, devices):
    dev = devices(server, APP, [], platform="ios", apns=True)
    token = dev.expect("registered")["apns_token"]
    dev.expect("connected")
    res = client.send([token], "Hello from pushjack", badge=2, sound="default", mutable_content=True,
                      extra={"order": 17})
    assert res.errors == [] and res.successes == [token]
    event = dev.expect("apns")
    assert event["alert"] == "Hello from pushjack" and event["badge"] == 2 and event["mutable_content"] is True
    assert event["payload"]["order"] == 17
    assert event["apns"]["priority"] == 10 and event["apns"]["identifier"] == 0


def test_bad_token_error_response_then_reconnect_and_resend_of_the_tail(server, client):
    a = register_ios(server.http_base, APP)
    b = register_ios(server.http_base, APP)
    bad = "ff" * 32
    before = activity(server.http_base, bundle_id=APP)["notifications"]
    after_seq = before[-1]["sequence"] if before else 0
    res = client.send([a["apns_token"], bad, b["apns_token"]], "tail", low_priority=True)
    assert len(res.errors) == 1 and isinstance(res.errors[0], APNSInvalidTokenError)
    assert res.errors[0].identifier == 1 and res.failures == [bad]
    assert res.successes == [a["apns_token"], b["apns_token"]]
    seen = activity(server.http_base, bundle_id=APP, after=after_seq)["notifications"]
    assert [(e["event"], e["identifier"]) for e in seen if e["event"] != "delivered"] == [
        ("accepted", 0), ("rejected", 1), ("accepted", 2)]  # 2 came again, on a new connection
    store_sync(server.http_base)
    for d in (a, b):
        status, record = get_device(server.http_base, d["token"])
        assert [m["payload"]["payload"]["aps"]["alert"] for m in record["queue"]] == ["tail"]
        assert record["queue"][0]["priority"] == "normal"  # low_priority: APNs priority 5


def test_feedback_through_get_expired_tokens(server, client):
    client.get_expired_tokens()  # start from an empty list
    d = register_ios(server.http_base, APP)
    status, _ = http_json("POST", f"{server.http_base}/emulator/v1/devices/{d['token']}/uninstall")
    assert status == 200
    res = client.send([d["apns_token"]], "anyone there?")
    assert res.errors == []  # Apple accepted it; the feedback service tells
    expired = client.get_expired_tokens()
    assert [e.token for e in expired] == [d["apns_token"]] and expired[0].timestamp > 1_600_000_000
    assert client.get_expired_tokens() == []
