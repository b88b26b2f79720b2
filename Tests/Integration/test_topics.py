"""Topics and conditions end to end: subscriptions through firebase-admin 7.x (Instance ID, with its
own `IID_URL` base attribute), pyfcm 1.x (legacy topic and condition sends, its IID info call through
`INFO_END_POINT`), the device CLI and plain HTTP; sends over CCS, legacy and v1; and a SIGKILL in the
middle of a fan-out to 10,000 offline subscribers."""

from __future__ import annotations


import requests
from pyfcm import FCMNotification

from ccs_support import EmulatorServer, get_device, http_json, new_key, new_sender_id, register_device
from ccs_support.fcm_http import credentials_file, google_style_credentials, pyfcm_legacy, run_firebase


def pyfcm(server, key: str) -> FCMNotification:
    push = pyfcm_legacy(server, key)
    # An instance attribute too, as for the send URL: the class keeps Google's.
    push.INFO_END_POINT = f"{server.http_base}/iid/info/"
    return push


def batch(server, op: str, key: str, topic: str, tokens: list[str], session=None) -> dict:
    r = (session or requests).post(f"{server.http_base}/iid/v1:{op}", json={"to": f"/topics/{topic}", "registration_tokens": tokens},
                                   headers={"Authorization": f"key={key}"}, timeout=60)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def queue_ids(server, token: str) -> list[str]:
    status, device = get_device(server.http_base, token)
    assert status == 200, device
    return [q["app_message_id"] for q in device["queue"]]


def test_firebase_admin_subscribes_and_sends_to_a_topic_and_a_condition(server, devices, tmp_path):
    sender = new_sender_id()
    creds = tmp_path / "sa.json"
    credentials_file(server, sender, creds)
    dev = devices(server, "com.example.topics", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    other = register_device(server.http_base, "com.example.topics", [sender])["token"]

    result = run_firebase({"credentials": str(creds), "fcm_base": server.http_base, "ops": [
        {"op": "subscribe_legacy", "tokens": [token, "not-a-token"], "topic": "weather"},
        {"op": "send", "message": {"topic": "weather", "data": {"t": "1"}}},
        {"op": "send", "message": {"condition": "'weather' in topics && !('news' in topics)", "data": {"c": "2"}}},
        {"op": "unsubscribe_legacy", "tokens": [token], "topic": "weather"},
        {"op": "send", "message": {"topic": "weather", "data": {"t": "3"}}},
    ]}, workdir=tmp_path)["results"]
    sub, topic_send, condition_send, unsub, after = result
    assert sub["success_count"] == 1 and sub["failure_count"] == 1, sub
    assert sub["errors"][0]["index"] == 1, sub
    for answer in (topic_send, condition_send, after):
        assert answer.get("name", "").startswith(f"projects/{sender}/messages/"), answer
    assert unsub == {"success_count": 1, "failure_count": 0, "errors": []}, unsub

    # Two fan-outs: FCM promises no order between them, and neither does the emulator.
    received = [dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"] for _ in range(2)]
    by_topic = {m["from"] == "/topics/weather": m for m in received}
    assert set(by_topic) == {True, False}, received
    assert by_topic[True]["data"] == {"t": "1"}, received
    assert by_topic[False]["from"] == sender and by_topic[False]["data"] == {"c": "2"}, received
    assert queue_ids(server, other) == []
    # Unsubscribed before the third send: it never comes (the last event is the condition message).
    dev.send({"subscribe": "news"})
    assert dev.expect(lambda e: e.get("event") in ("subscribed", "message"), timeout=20) == {"event": "subscribed", "topic": "news"}
    _, device = get_device(server.http_base, token)
    assert device["topics"] == {sender: ["news"]}, device


def test_firebase_admin_v1_topic_subscriptions_through_the_proxy(start_server, devices, tmp_path):
    """subscribe_to_topic / unsubscribe_from_topic use the v1 registrations API on a URL fixed in
    firebase-admin's code: reached with proxy mode, no line of code changed."""
    srv = start_server(extra_args=["--proxy-port", "0"])
    sender = new_sender_id()
    creds = tmp_path / "google-style.json"
    google_style_credentials(srv, sender, creds)
    dev = devices(srv, "com.example.v1topics", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    proxy = dict(proxy=f"http://127.0.0.1:{srv.ready['proxy_port']}", ca=srv.ca_cert)

    sub, sent, unsub, after = run_firebase({"credentials": str(creds), "fcm_base": None, "ops": [
        {"op": "subscribe", "tokens": [token, "not-a-token"], "topic": "/topics/scores"},
        {"op": "send", "message": {"topic": "scores", "data": {"goal": "1"}}},
        {"op": "unsubscribe", "tokens": [token], "topic": "scores"},
        {"op": "send", "message": {"topic": "scores", "data": {"goal": "2"}}},
    ]}, workdir=tmp_path, **proxy)["results"]
    assert sub["success_count"] == 1 and sub["failure_count"] == 1 and sub["errors"][0]["index"] == 1, sub
    assert unsub == {"success_count": 1, "failure_count": 0, "errors": []}, unsub
    for answer in (sent, after):
        assert answer.get("name", "").startswith(f"projects/{sender}/messages/"), answer
    event = dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"]
    assert event["from"] == "/topics/scores" and event["data"] == {"goal": "1"}, event
    # The second send had no subscriber left: nothing else arrives before a later marker message.
    dev.send({"subscribe": "marker"})
    assert dev.expect(lambda e: e.get("event") in ("subscribed", "message"), timeout=20)["event"] == "subscribed"


def test_pyfcm_topic_and_condition_sends_and_iid_info(server, devices):
    sender, key = new_sender_id(), new_key()
    tokens = [register_device(server.http_base, "com.example.pyfcm", [sender])["token"] for _ in range(3)]
    # Permissive mode: the key used here is recorded for the tokens' sender, as a CCS login would.
    assert batch(server, "batchAdd", key, "sports", tokens[:2]) == {"results": [{}, {}]}
    assert batch(server, "batchAdd", key, "news", tokens[1:]) == {"results": [{}, {}]}
    push = pyfcm(server, key)

    sent = push.notify_topic_subscribers(topic_name="sports", message_body="goal", data_message={"k": "v"})
    assert isinstance(sent["topic_message_id"], int) and sent["success"] == 1, sent
    cond = push.topic_subscribers_data_message(condition="'sports' in topics && 'news' in topics", data_message={"both": "1"})
    assert isinstance(cond["topic_message_id"], int), cond
    nobody = push.topic_subscribers_data_message(topic_name="nobody-listens", data_message={"a": "b"})
    assert isinstance(nobody["topic_message_id"], int), nobody

    assert [len(queue_ids(server, t)) for t in tokens] == [1, 2, 0]
    _, device = get_device(server.http_base, tokens[1])
    notification, both = device["queue"]
    assert notification["payload"]["from"] == "/topics/sports" and notification["payload"]["notification"]["body"] == "goal"
    assert both["payload"]["data"] == {"both": "1"}

    info = push.get_registration_id_info(tokens[1])
    assert info["application"] == "com.example.pyfcm" and info["authorizedEntity"] == sender, info
    assert sorted(info["rel"]["topics"]) == ["news", "sports"], info
    assert push.get_registration_id_info("not-a-token") is None


def test_topic_errors_over_http(server):
    sender, key = new_sender_id(), new_key()
    token = register_device(server.http_base, "com.example.errors", [sender])["token"]
    batch(server, "batchAdd", key, "t", [token])
    url = f"{server.http_base}/fcm/send"
    r = requests.post(url, json={"to": "/topics/bad name"}, headers={"Authorization": f"key={key}"}, timeout=30)
    assert r.status_code == 200 and r.json()["results"] == [{"error": "InvalidParameters"}], r.text
    r = requests.post(url, json={"condition": "'a' in topics &&"}, headers={"Authorization": f"key={key}"}, timeout=30)
    assert r.status_code == 200 and r.json()["results"] == [{"error": "InvalidParameters"}], r.text
    # A key no sender is known by (permissive mode, docs/http-api.md): a topic that only one sender's
    # devices hold is that sender's; a topic no device holds, or one that two senders' devices hold,
    # names no sender: 401.
    own, shared, fresh = f"own-{sender}", f"shared-{sender}", new_key()
    batch(server, "batchAdd", key, own, [token])
    batch(server, "batchAdd", key, shared, [token])
    other_sender, other_key = new_sender_id(), new_key()
    other = register_device(server.http_base, "com.example.errors", [other_sender])["token"]
    batch(server, "batchAdd", other_key, shared, [other])
    for topic in (f"nobody-{sender}", shared):
        r = requests.post(url, json={"to": f"/topics/{topic}"}, headers={"Authorization": f"key={new_key()}"}, timeout=30)
        assert r.status_code == 401 and "no sender is known by this server key" in r.text, (topic, r.text)
    r = requests.post(url, json={"to": f"/topics/{own}"}, headers={"Authorization": f"key={fresh}"}, timeout=30)
    assert r.status_code == 200 and isinstance(r.json()["message_id"], int), r.text
    r = requests.post(f"{server.http_base}/iid/v1/{token}/rel/topics/" + "x" * 901, headers={"Authorization": f"key={key}"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "INVALID_ARGUMENT", r.text
    r = requests.post(f"{server.http_base}/iid/v1:batchAdd", data="{", headers={"Authorization": f"key={key}"}, timeout=30)
    assert r.status_code == 400, r.text


def test_topic_send_over_ccs_is_acked_from_the_topic(server, xmpp):
    sender, key = new_sender_id(), new_key()
    online = register_device(server.http_base, "com.example.ccs", [sender])["token"]
    c = xmpp(server)
    c.login(sender, key)
    batch(server, "batchAdd", key, "alerts", [online])
    ack, _ = c.downstream({"to": "/topics/alerts", "message_id": "t-1", "data": {"x": "y"}}, timeout=20)
    assert ack == {"from": "/topics/alerts", "message_id": "t-1", "message_type": "ack"}, ack
    ack, _ = c.downstream({"condition": "'alerts' in topics || 'other' in topics", "message_id": "c-1"}, timeout=20)
    assert ack["message_type"] == "ack" and ack["from"] == "'alerts' in topics || 'other' in topics", ack
    nack, _ = c.downstream({"to": "/topics/bad name", "message_id": "bad-1"}, timeout=20)
    assert nack["message_type"] == "nack" and nack["error"] == "INVALID_JSON", nack
    assert queue_ids(server, online) == ["t-1", "c-1"]


def test_sigkill_in_the_middle_of_a_fan_out_to_10000_offline_subscribers(tmp_path, xmpp):
    """Each subscriber as of the send gets an ACKed message exactly once after the restart; a message
    in the middle of its fan-out at the kill is on every subscriber or on none; a device subscribed
    after a send never gets it."""
    srv = EmulatorServer(tmp_path / "data", log_dir=tmp_path)
    try:
        srv.start()
        sender, key = new_sender_id(), new_key()
        session = requests.Session()
        tokens = []
        for _ in range(10_000):
            r = session.post(f"{srv.http_base}/emulator/v1/devices", json={"app": "com.example.fanout", "senders": [sender]}, timeout=30)
            assert r.status_code == 201, r.text
            tokens.append(r.json()["token"])
        for i in range(0, len(tokens), 1000):
            assert batch(srv, "batchAdd", key, "everyone", tokens[i:i + 1000], session) == {"results": [{}] * 1000}
        c = xmpp(srv)
        c.login(sender, key)
        ack, _ = c.downstream({"to": "/topics/everyone", "message_id": "first", "data": {"n": "1"}}, timeout=60)
        assert ack["message_type"] == "ack", ack
        late = session.post(f"{srv.http_base}/emulator/v1/devices", json={"app": "com.example.fanout", "senders": [sender]}, timeout=30).json()["token"]
        batch(srv, "batchAdd", key, "everyone", [late], session)
        # Not waiting for its ACK: the kill lands before, during or after its transaction.
        c.send_gcm({"to": "/topics/everyone", "message_id": "second", "data": {"n": "2"}})
        srv.kill()

        srv.start()
        status, listing = http_json("GET", f"{srv.http_base}/emulator/v1/devices")
        assert status == 200
        counts = {d["token"]: d["queued"] for d in listing["devices"]}
        first_batch = {counts[t] for t in tokens}
        assert first_batch in ({1}, {2}), f"queue lengths after the restart: {sorted(first_batch)}"
        assert counts[late] == (first_batch.pop() - 1), "the late subscriber has exactly the second message if it was written"
        for token in (tokens[0], tokens[4999], tokens[-1]):
            ids = queue_ids(srv, token)
            assert ids[0] == "first" and len(ids) == len(set(ids)), ids
        assert "first" not in queue_ids(srv, late)
    finally:
        srv.stop()
