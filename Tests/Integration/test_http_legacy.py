"""The legacy FCM HTTP API (/fcm/send, /gcm/send) with pyfcm 1.x from PyPI, unmodified except for
its documented endpoint attribute (`FCMNotification.FCM_END_POINT`), and with raw requests for the
plain-text form and every error status."""

from __future__ import annotations

import json

import pytest
from pyfcm.errors import AuthenticationError

from ccs_support import get_device, http_json, new_sender_id, register_device
from ccs_support.fcm_http import pyfcm_legacy, raw


pyfcm = pyfcm_legacy


def test_pyfcm_sends_to_one_token_and_the_device_gets_it(server, devices):
    sender = new_sender_id()
    dev = devices(server, "com.example.legacy", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)

    result = pyfcm(server).single_device_data_message(registration_id=token, data_message={"hello": "legacy"})
    assert result["success"] == 1 and result["failure"] == 0 and result["canonical_ids"] == 0, result
    [entry] = result["results"]
    assert entry["message_id"].startswith("0:"), result

    event = dev.expect(lambda e: e.get("event") == "message", timeout=20)
    assert event["message"]["data"] == {"hello": "legacy"}, event
    assert event["message"]["from"] == sender, event
    assert event["message"]["message_id"] == entry["message_id"], (event, entry)


def test_pyfcm_registration_ids_with_one_bad_token(server):
    sender = new_sender_id()
    first = register_device(server.http_base, "com.example.legacy", [sender])["token"]
    second = register_device(server.http_base, "com.example.legacy", [sender])["token"]
    ids = [first, "this-is-not-a-registration-token", second]

    result = pyfcm(server).notify_multiple_devices(registration_ids=ids, message_title="Hi", message_body="there",
                                                   data_message={"k": "v"})
    assert result["success"] == 2 and result["failure"] == 1, result
    assert len(result["results"]) == 3, result
    assert result["results"][0]["message_id"].startswith("0:"), result
    assert result["results"][1] == {"error": "InvalidRegistration"}, result
    assert result["results"][2]["message_id"].startswith("0:"), result
    for token, entry in ((first, result["results"][0]), (second, result["results"][2])):
        status, device = get_device(server.http_base, token)
        assert status == 200 and [q["message_id"] for q in device["queue"]] == [entry["message_id"]], device
        assert device["queue"][0]["payload"]["notification"] == {"title": "Hi", "body": "there"}, device


def test_pyfcm_not_registered_after_uninstall(server):
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.legacy", [sender])["token"]
    status, _ = http_json("POST", f"{server.http_base}/emulator/v1/devices/{token}/uninstall")
    assert status == 200
    result = pyfcm(server).single_device_data_message(registration_id=token, data_message={"a": "b"})
    assert result["failure"] == 1 and result["results"] == [{"error": "NotRegistered"}], result


def test_pyfcm_with_an_empty_key_is_refused(server):
    # pyfcm refuses an empty api_key itself; a blank one reaches the server, which answers 401.
    with pytest.raises(AuthenticationError):
        pyfcm(server, key=" ").single_device_data_message(registration_id="x", data_message={"a": "b"})


@pytest.mark.parametrize("path", ["/fcm/send", "/gcm/send"])
def test_plain_text_form(server, path):
    token = register_device(server.http_base, "com.example.legacy", [new_sender_id()])["token"]
    form = {"Authorization": "key=AIzaSy-plain", "Content-Type": "application/x-www-form-urlencoded;charset=UTF-8"}
    status, headers, body = raw("POST", server.http_base + path,
                                f"registration_id={token}&collapse_key=score&data.score=4x8&data.msg=hello+world", form)
    assert status == 200 and headers["content-type"].startswith("text/plain"), (status, headers, body)
    assert body.startswith("id=0:"), body
    _, device = get_device(server.http_base, token)
    [entry] = device["queue"]
    assert entry["message_id"] == body.strip()[3:], (entry, body)
    assert entry["payload"]["data"] == {"score": "4x8", "msg": "hello world"} and entry["collapse_key"] == "score", entry

    status, _, body = raw("POST", server.http_base + path, "registration_id=unknown-token&data.a=b", form)
    assert (status, body) == (200, "Error=InvalidRegistration\n")
    status, _, body = raw("POST", server.http_base + path, "data.a=b", form)
    assert (status, body) == (200, "Error=MissingRegistration\n")


def test_error_statuses(server):
    url = server.http_base + "/fcm/send"
    keyed = {"Authorization": "key=AIzaSy-errors", "Content-Type": "application/json"}
    status, _, body = raw("POST", url, json.dumps({"to": "x"}), {"Content-Type": "application/json"})
    assert status == 401 and body.startswith("Unauthorized"), (status, body)
    status, _, body = raw("POST", url, '{"to": ', keyed)
    assert status == 400 and "JSON_PARSING_ERROR" in body, (status, body)
    status, _, body = raw("POST", url, json.dumps({"to": "x", "time_to_live": "soon"}), keyed)
    assert status == 400 and "time_to_live" in body, (status, body)
    status, _, body = raw("POST", url, json.dumps({"registration_ids": [f"t{i}" for i in range(1001)]}), keyed)
    assert status == 400 and "exceeds maximum allowed (1000)" in body, (status, body)
    # Permissive mode: a topic belongs to a sender, no sender has used this key yet, and no device
    # holds the topic.
    status, _, body = raw("POST", url, json.dumps({"to": f"/topics/nobody-{new_sender_id()}", "data": {"a": "b"}}), keyed)
    assert status == 401 and "no sender is known by this server key" in body, (status, body)
    # Message-level errors are results, with all four numbers, as FCM answered them.
    status, _, body = raw("POST", url, json.dumps({"to": "x", "time_to_live": 2419201}), keyed)
    answer = json.loads(body)
    assert status == 200 and answer["results"] == [{"error": "InvalidTtl"}], answer
    assert {"multicast_id", "success", "failure", "canonical_ids"} <= answer.keys(), answer


def test_strict_mode_takes_the_key_from_the_config_file(start_server, tmp_path):
    sender = new_sender_id()
    config = tmp_path / "senders.json"
    config.write_text(json.dumps({"senders": [{"sender_id": sender, "server_key": "strict-key"}]}))
    srv = start_server(auth="strict", config=config)
    token = register_device(srv.http_base, "com.example.legacy", [sender])["token"]
    result = pyfcm(srv, key="strict-key").single_device_data_message(registration_id=token, data_message={"a": "b"})
    assert result["success"] == 1, result
    with pytest.raises(AuthenticationError):
        pyfcm(srv, key="wrong-key").single_device_data_message(registration_id=token, data_message={"a": "b"})
