"""The legacy send API with python-gcm 0.4 (PyPI, unmodified): its plain-text and JSON requests,
a topic send, and a dry run. Pointed at the emulator the way its class allows: the instance's `url`
attribute. The topic is one the app subscribed itself to (the device's own subscribeToTopic), so the
app server's key is new to the emulator when it sends to the topic (permissive mode then takes the
one sender whose devices hold it: docs/semantics.md, "Which sender a topic belongs to")."""

from __future__ import annotations

import pytest

from ccs_support import http_json, new_key, new_sender_id

gcm = pytest.importorskip("gcm")
from gcm.gcm import GCMInvalidRegistrationException  # noqa: E402


def client(server) -> "gcm.GCM":
    g = gcm.GCM(new_key())
    g.url = f"{server.http_base}/gcm/send"
    return g


def test_plain_text_json_topic_and_dry_run(server, devices):
    sender = new_sender_id()
    dev = devices(server, "com.example.pythongcm", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    g = client(server)

    # Plain text: python-gcm answers None for `id=…` without a canonical id.
    assert g.plaintext_request(registration_id=token, data={"form": "1"}) is None
    with pytest.raises(GCMInvalidRegistrationException):
        g.plaintext_request(registration_id="not-a-token", data={"form": "2"})

    answer = g.json_request(registration_ids=[token, "not-a-token"], data={"json": "1"}, collapse_key="c",
                            time_to_live=60, priority="high")
    assert answer["errors"] == {"InvalidRegistration": ["not-a-token"]}, answer
    assert answer["success"][token].startswith("0:"), answer

    topic = f"news-{sender}"
    status, _ = http_json("POST", f"{server.http_base}/emulator/v1/devices/{token}/topics/{topic}")
    assert status == 200, status
    topic_id = client(server).send_topic_message(topic=topic, data={"topic": "1"})
    assert isinstance(topic_id, int), topic_id

    dry = g.json_request(registration_ids=[token], data={"dry": "1"}, dry_run=True)
    assert dry["success"] == {token: "fake_message_id"}, dry
    # A real message after the dry run: had the dry run gone out, it would come before this one.
    assert g.plaintext_request(registration_id=token, data={"after": "dry"}) is None

    received = [dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"] for _ in range(4)]
    assert [m["data"] for m in received] == [{"form": "1"}, {"json": "1"}, {"topic": "1"}, {"after": "dry"}], received
    assert received[2]["from"] == f"/topics/{topic}", received
    assert received[1]["collapse_key"] == "c" and received[1]["priority"] == "high", received
