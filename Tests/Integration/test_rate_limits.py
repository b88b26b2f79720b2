"""serve --device-message-rate (docs/semantics.md, "Rate limits"): FCM's per-device message limit,
answered by each API as FCM answers it, seen by unmodified clients — aiofcm over CCS
(DEVICE_MESSAGE_RATE_EXCEEDED), pyfcm 1.x over the legacy API (DeviceMessageRateExceeded in its
result), firebase-admin 7.x over HTTP v1 (QuotaExceededError; the raw answer is 429 with
Retry-After) — and the count refilled by the virtual clock, never by waiting. Also the v1 project
quota (--project-message-rate) and the per-topic limit (--topic-message-rate)."""

from __future__ import annotations

import json

import requests

from ccs_support import http_json, new_key, new_sender_id, register_device, run_aiofcm
from ccs_support.fcm_http import access_token, credentials_file, pyfcm_legacy, raw, run_firebase
from ccs_support.semantics import advance, queued_app_ids


def test_every_api_answers_the_device_limit_and_the_clock_refills_it(start_server, tmp_path):
    srv = start_server(extra_args=["--device-message-rate", "2/min", "--clock", "virtual"])
    status, info = http_json("GET", f"{srv.http_base}/emulator/v1/info")
    assert status == 200 and info["device_message_rate"] == "2/min", info
    sender, key = new_sender_id(), new_key()
    token = register_device(srv.http_base, "com.example.rate", [sender])["token"]
    other = register_device(srv.http_base, "com.example.rate", [sender])["token"]

    # CCS: two messages fill the minute's window; the third is refused, the device's alone.
    result = run_aiofcm({"host": "127.0.0.1", "port": srv.ccs_port, "sender_id": sender, "api_key": key,
                         "sequential": True, "timeout": 30,
                         "messages": [{"device_token": token, "message_id": f"c{i}", "data": {"n": str(i)}}
                                      for i in range(3)]}, srv.ca_cert, workdir=tmp_path)
    responses = result["responses"]
    assert [r.get("is_successful") for r in responses] == [True, True, False], result
    assert responses[2]["status"] == "DEVICE_MESSAGE_RATE_EXCEEDED", responses[2]
    assert responses[2]["description"] == "Downstream message rate exceeded for this registration id", responses[2]

    # Legacy HTTP: a per-result error in request order; the other device is not affected.
    push = pyfcm_legacy(srv, key)
    answer = push.notify_multiple_devices(registration_ids=[token, other], data_message={"via": "legacy"})
    assert answer["success"] == 1 and answer["failure"] == 1, answer
    assert answer["results"][0] == {"error": "DeviceMessageRateExceeded"}, answer
    assert answer["results"][1]["message_id"].startswith("0:"), answer

    # HTTP v1: 429 RESOURCE_EXHAUSTED / QUOTA_EXCEEDED, Retry-After until the window has room (2/min: 30 s).
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    bearer = access_token(creds)
    url = f"{srv.http_base}/v1/projects/{sender}/messages:send"
    headers = {"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"}
    status, got, body = raw("POST", url, json.dumps({"message": {"token": token, "data": {"via": "v1"}}}), headers)
    assert status == 429 and got.get("retry-after") == "30", (status, got, body)
    error = json.loads(body)["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED", error
    assert error["details"][0]["errorCode"] == "QUOTA_EXCEEDED", error
    # Time refills the window: 30 virtual seconds give room for one more message, not two.
    advance(srv.http_base, 30)
    status, _, body = raw("POST", url, json.dumps({"message": {"token": token, "data": {"via": "v1-later"}}}), headers)
    assert status == 200 and json.loads(body)["name"].startswith(f"projects/{sender}/messages/"), (status, body)
    status, got, _ = raw("POST", url, json.dumps({"message": {"token": token, "data": {"via": "v1-again"}}}), headers)
    assert status == 429 and got.get("retry-after") == "30", (status, got)
    # Only what was accepted waits for the (offline) device.
    ids = queued_app_ids(srv.http_base, token)
    assert ids[:2] == ["c0", "c1"] and len(ids) == 3, ids


def test_firebase_admin_waits_retry_after_and_its_retry_goes_through(start_server, tmp_path):
    # The wall clock here: firebase-admin (urllib3's Retry) sleeps the 429's Retry-After, one second,
    # after which the window of one message a second has room again, whatever the machine's speed.
    srv = start_server(extra_args=["--device-message-rate", "1/s"])
    sender = new_sender_id()
    token = register_device(srv.http_base, "com.example.rate", [sender])["token"]
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    result = run_firebase({"credentials": str(creds), "fcm_base": srv.http_base, "ops": [
        # A dry run is not a message to the device: neither refused nor counted.
        {"op": "send", "message": {"token": token, "data": {"dry": "1"}}, "dry_run": True},
        {"op": "send", "message": {"token": token, "data": {"n": "1"}}},
        {"op": "send", "message": {"token": token, "data": {"n": "2"}}},
    ]}, workdir=tmp_path)
    dry, first, second = result["results"]
    assert dry.get("name", "").endswith("/messages/fake_message_id"), dry
    assert first.get("name", "").startswith(f"projects/{sender}/messages/"), first
    assert second.get("name", "").startswith(f"projects/{sender}/messages/"), second
    assert len(queued_app_ids(srv.http_base, token)) == 2
    # The server saw the refusal that made firebase-admin wait: the journal has it.
    status, journal = http_json("GET", f"{srv.http_base}/emulator/v1/messages?token={token}&status=refused")
    assert status == 200 and len(journal["messages"]) == 1, journal
    [refused] = journal["messages"]
    status, events = http_json("GET", f"{srv.http_base}/emulator/v1/messages/{refused['message_id']}")
    assert status == 200, events
    [event] = events["events"]
    assert event["kind"] == "refused" and event["api"] == "v1" and "QUOTA_EXCEEDED" in event["detail"], event


def test_the_v1_project_quota_counts_a_projects_messages_and_the_clock_refills_it(start_server, tmp_path):
    srv = start_server(extra_args=["--project-message-rate", "2/min", "--clock", "virtual"])
    status, info = http_json("GET", f"{srv.http_base}/emulator/v1/info")
    assert info["project_message_rate"] == "2/min" and info["device_message_rate"] is None, info
    sender, other = new_sender_id(), new_sender_id()
    tokens = [register_device(srv.http_base, "com.example.quota", [sender])["token"] for _ in range(3)]
    foreign = register_device(srv.http_base, "com.example.quota", [other])["token"]

    def v1(project: str, token: str) -> tuple[int, dict, str]:
        creds = tmp_path / f"sa-{project}.json"
        if not creds.exists():
            credentials_file(srv, project, creds)
        headers = {"Authorization": f"Bearer {access_token(creds)}", "Content-Type": "application/json"}
        return raw("POST", f"{srv.http_base}/v1/projects/{project}/messages:send",
                   json.dumps({"message": {"token": token, "data": {"k": "v"}}}), headers)

    # Two messages of the project to two devices fill its minute; the third device's is refused.
    assert v1(sender, tokens[0])[0] == 200
    assert v1(sender, tokens[1])[0] == 200
    status, headers, body = v1(sender, tokens[2])
    assert status == 429 and headers.get("retry-after") == "30", (status, headers, body)
    assert json.loads(body)["error"]["details"][0]["errorCode"] == "QUOTA_EXCEEDED", body
    # Another project has its own quota; the legacy API has none.
    assert v1(other, foreign)[0] == 200
    push = pyfcm_legacy(srv, new_key())
    assert push.single_device_data_message(registration_id=tokens[2], data_message={"via": "legacy"})["success"] == 1
    advance(srv.http_base, 30)
    assert v1(sender, tokens[2])[0] == 200


def test_every_api_answers_the_topic_limit_and_a_condition_counts_its_topics(start_server, tmp_path):
    srv = start_server(extra_args=["--topic-message-rate", "2/min", "--clock", "virtual"])
    status, info = http_json("GET", f"{srv.http_base}/emulator/v1/info")
    assert status == 200 and info["topic_message_rate"] == "2/min" and info["device_message_rate"] is None, info
    sender, key = new_sender_id(), new_key()
    token = register_device(srv.http_base, "com.example.topics", [sender])["token"]
    r = requests.post(f"{srv.http_base}/iid/v1:batchAdd", json={"to": "/topics/news", "registration_tokens": [token]},
                      headers={"Authorization": f"key={key}"}, timeout=60)
    assert r.status_code == 200 and r.json() == {"results": [{}]}, r.text

    # CCS: two messages to the topic fill its minute; the third is NACKed with the topic's code.
    result = run_aiofcm({"host": "127.0.0.1", "port": srv.ccs_port, "sender_id": sender, "api_key": key,
                         "sequential": True, "timeout": 30,
                         "messages": [{"device_token": "/topics/news", "message_id": f"t{i}", "data": {"n": str(i)}}
                                      for i in range(3)]}, srv.ca_cert, workdir=tmp_path)
    responses = result["responses"]
    assert [r.get("is_successful") for r in responses] == [True, True, False], result
    assert responses[2]["status"] == "TOPICS_MESSAGE_RATE_EXCEEDED", responses[2]

    # Legacy HTTP: a topic answer is {"message_id": N} or {"error": …} (status 200). pyfcm 1.x reads
    # only the message id, so a refusal is its topic_message_id left None; the raw answer names it.
    # A condition naming the topic is refused too; one naming only another topic goes through.
    push = pyfcm_legacy(srv, key)
    answer = push.notify_topic_subscribers(topic_name="news", data_message={"via": "legacy"})
    assert answer["topic_message_id"] is None and answer["success"] == 0, answer
    legacy = {"Authorization": f"key={key}", "Content-Type": "application/json"}
    for body in ({"to": "/topics/news", "data": {"raw": "1"}},
                 {"condition": "'news' in topics || 'sport' in topics", "data": {"c": "1"}}):
        r = requests.post(f"{srv.http_base}/fcm/send", json=body, headers=legacy, timeout=30)
        assert r.status_code == 200 and r.json() == {"error": "TopicsMessageRateExceeded"}, (body, r.status_code, r.text)
    answer = push.topic_subscribers_data_message(condition="'sport' in topics", data_message={"c": "2"})
    assert isinstance(answer["topic_message_id"], int), answer

    # HTTP v1: 429 QUOTA_EXCEEDED with Retry-After until the topic's window has room.
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    url = f"{srv.http_base}/v1/projects/{sender}/messages:send"
    headers = {"Authorization": f"Bearer {access_token(creds)}", "Content-Type": "application/json"}
    status, got, body = raw("POST", url, json.dumps({"message": {"topic": "news", "data": {"via": "v1"}}}), headers)
    assert status == 429 and got.get("retry-after") == "30", (status, got, body)
    assert json.loads(body)["error"]["details"][0]["errorCode"] == "QUOTA_EXCEEDED", body
    # A token send is not a topic send; time refills the topic's window.
    status, _, body = raw("POST", url, json.dumps({"message": {"token": token, "data": {"via": "token"}}}), headers)
    assert status == 200, (status, body)
    advance(srv.http_base, 30)
    status, _, body = raw("POST", url, json.dumps({"message": {"topic": "news", "data": {"via": "v1-later"}}}), headers)
    assert status == 200, (status, body)
    ids = queued_app_ids(srv.http_base, token)
    assert ids[:2] == ["t0", "t1"] and len(ids) == 4, ids


def test_off_by_default_and_a_bad_limit_stops_serve(server, tmp_path):
    from ccs_support.cli import serve_must_fail

    status, info = http_json("GET", f"{server.http_base}/emulator/v1/info")
    assert status == 200 and info["device_message_rate"] is None and info["project_message_rate"] is None, info
    assert info["topic_message_rate"] is None, info
    for option in ("--device-message-rate", "--project-message-rate", "--topic-message-rate"):
        for bad in ("0/min", "3/2d", "many", "3/min,") + (("fcm",) if option == "--topic-message-rate" else ()):
            code, stderr = serve_must_fail(tmp_path / "bad", option, bad)
            assert code != 0 and option in stderr, (option, bad, code, stderr)
