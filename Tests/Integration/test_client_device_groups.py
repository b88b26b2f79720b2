"""The client-side device-group API (spec §6.3, docs/http-api.md "Client-side device groups"):
`POST /gcm/googlenotification` with `project_id` and the user's `id_token`, driven with raw HTTP
requests (no client library exists for it) for every operation and error. A group made there is the
server side's group: looked up and changed through `/fcm/notification`, sent to through `/fcm/send`
and over CCS. The ID token comes from the emulator's admin route `POST /emulator/v1/id-tokens`."""

from __future__ import annotations

import json

import requests

from ccs_support import XmppConn, http_json, new_key, new_sender_id, register_device
from ccs_support.semantics import advance

APP = "com.example.clientgroups"

HTTP = requests.Session()
HTTP.trust_env = False  # never through a proxy from the environment


def id_token(server, email: str = "chris@example.com") -> str:
    status, body = http_json("POST", f"{server.http_base}/emulator/v1/id-tokens", {"email": email})
    assert status == 200 and body["expires_in"] == 3600, body
    return body["id_token"]


def client_side(server, sender: str | None, body, token: str | None):
    if isinstance(body, dict) and token is not None:
        body = {**body, "id_token": token}
    headers = {"Content-Type": "application/json"}
    if sender is not None:
        headers["project_id"] = sender
    r = HTTP.post(server.http_base + "/gcm/googlenotification",
                  data=json.dumps(body) if not isinstance(body, str) else body, headers=headers, timeout=15)
    return r.status_code, r.json()


def server_side(server, sender: str, body):
    r = HTTP.post(server.http_base + "/fcm/notification", data=json.dumps(body),
                  headers={"Content-Type": "application/json", "Authorization": "key=AIzaSy-client-groups",
                           "project_id": sender}, timeout=15)
    return r.status_code, r.json()


def members(server, sender: str) -> list[list[str]]:
    status, body = http_json("GET", f"{server.http_base}/emulator/v1/senders/{sender}/groups")
    assert status == 200, body
    return [g["members"] for g in body["groups"]]


def test_every_operation_on_the_groups_the_server_side_shares(server):
    sender = new_sender_id()
    a, b = (register_device(server.http_base, APP, [sender])["token"] for _ in range(2))
    token = id_token(server)

    status, created = client_side(server, sender, {"operation": "create", "notification_key_name": "appUser-Chris",
                                                   "registration_ids": [a]}, token)
    assert status == 200 and created["notification_key"].startswith("APA91b"), created
    key = created["notification_key"]
    # The server side finds it by name, and changes it.
    r = HTTP.get(server.http_base + "/fcm/notification", params={"notification_key_name": "appUser-Chris"},
                 headers={"Authorization": "key=AIzaSy-client-groups", "project_id": sender}, timeout=15)
    assert r.status_code == 200 and r.json()["notification_key"].startswith("APA91b"), r.text
    assert server_side(server, sender, {"operation": "add", "notification_key": key, "registration_ids": [b]})[0] == 200
    assert members(server, sender) == [[a, b]]
    # The client side removes what the server side added; the key it answers is the one sent.
    assert client_side(server, sender, {"operation": "remove", "notification_key_name": "appUser-Chris",
                                        "notification_key": key, "registration_ids": [b]}, token) \
        == (200, {"notification_key": key})
    assert client_side(server, sender, {"operation": "add", "notification_key": key, "registration_ids": [b]}, token) \
        == (200, {"notification_key": key})
    assert members(server, sender) == [[a, b]]
    # Removing the last members deletes the group, on both sides.
    assert client_side(server, sender, {"operation": "remove", "notification_key": key, "registration_ids": [a, b]},
                       token)[0] == 200
    assert members(server, sender) == []
    assert server_side(server, sender, {"operation": "add", "notification_key": key, "registration_ids": [a]}) \
        == (400, {"error": "notification_key not found"})


def test_every_error_in_the_server_sides_words(server):
    sender = new_sender_id()
    a = register_device(server.http_base, APP, [sender])["token"]
    foreign = register_device(server.http_base, APP, [new_sender_id()])["token"]
    many = [register_device(server.http_base, APP, [sender])["token"] for _ in range(21)]
    token = id_token(server)
    key = client_side(server, sender, {"operation": "create", "notification_key_name": "n",
                                       "registration_ids": [a]}, token)[1]["notification_key"]
    cases = [
        ({"operation": "create", "notification_key_name": "n", "registration_ids": [a]}, "notification_key already exists"),
        ({"operation": "create", "notification_key_name": "m", "registration_ids": [foreign, "junk"]},
         "no valid registration ids"),
        ({"operation": "create", "notification_key_name": "m", "registration_ids": many},
         "notification_key has reached the maximum number of members (20)"),
        ({"operation": "add", "notification_key": key, "notification_key_name": "wrong", "registration_ids": [a]},
         "notification_key_name doesn't match the group name of the notification_key"),
        ({"operation": "add", "notification_key": "APA91bnonsense", "registration_ids": [a]}, "notification_key not found"),
        ({"operation": "remove", "notification_key": key, "registration_ids": [foreign]}, "no valid registration ids"),
    ]
    for body, error in cases:
        assert client_side(server, sender, body, token) == (400, {"error": error}), body
        assert server_side(server, sender, body) == (400, {"error": error}), body
    # Malformed requests: a sentence saying what is wrong, as on the server side.
    for body in ["[]", {"operation": "delete"}, {"operation": "create", "registration_ids": [a]},
                 {"operation": "add", "registration_ids": [a]}]:
        status, answer = client_side(server, sender, body, token)
        assert status == 400 and answer["error"], (body, answer)
    assert client_side(server, None, {"operation": "create", "notification_key_name": "x", "registration_ids": [a]},
                       token)[0] == 400
    assert client_side(server, sender, {"operation": "create", "id_token": 7}, None)[0] == 400


def test_the_id_token_is_checked_on_the_emulators_clock(start_server):
    srv = start_server(extra_args=["--clock", "virtual"])
    sender = new_sender_id()
    a = register_device(srv.http_base, APP, [sender])["token"]
    body = {"operation": "create", "notification_key_name": "n", "registration_ids": [a]}
    token = id_token(srv)
    for bad, text in [(None, "the request has no id_token"), ("junk", "not a Google ID token"),
                      (token[:-4] + "AAAA", "not a Google ID token")]:
        status, answer = client_side(srv, sender, body, bad)
        assert status == 401 and text in answer["error"], (bad, answer)
    for request in [{}, {"email": "nobody"}, {"email": "a@b", "audience": ""}]:
        assert http_json("POST", f"{srv.http_base}/emulator/v1/id-tokens", request)[0] == 400, request
    advance(srv.http_base, 3600)
    assert client_side(srv, sender, body, token) == (401, {"error": "Unauthorized: the id_token has expired"})
    assert client_side(srv, sender, body, id_token(srv))[0] == 200


def test_a_client_side_group_is_sent_to_over_fcm_send_and_ccs(server, devices):
    sender, key = new_sender_id(), new_key()
    online = devices(server, APP, [sender])
    member = online.expect("registered", timeout=30)["token"]
    online.expect("connected", timeout=30)
    group = client_side(server, sender, {"operation": "create", "notification_key_name": "sends",
                                         "registration_ids": [member]}, id_token(server))[1]["notification_key"]

    r = HTTP.post(server.http_base + "/fcm/send", data=json.dumps({"to": group, "data": {"via": "legacy"}}),
                  headers={"Content-Type": "application/json", "Authorization": f"key={key}"}, timeout=15)
    assert r.status_code == 200 and r.json() == {"success": 1, "failure": 0}, r.text
    event = online.expect(lambda e: e.get("event") == "message", timeout=20)
    assert event["message"]["data"] == {"via": "legacy"}, event

    with XmppConn(server.ccs_port, server.ca_cert) as c:
        c.login(sender, key)
        ack, _ = c.downstream({"to": group, "message_id": "cg-1", "data": {"via": "ccs"}})
    assert ack == {"from": group, "message_type": "ack", "success": 1, "failure": 0, "message_id": "cg-1"}, ack
    event = online.expect(lambda e: e.get("event") == "message", timeout=20)
    assert event["message"]["data"] == {"via": "ccs"}, event


def test_the_google_address_through_proxy_mode(start_server):
    """What an app configured for android.googleapis.com reaches through HTTPS_PROXY and the emulator's CA."""
    srv = start_server(extra_args=["--proxy-port", "0"])
    sender = new_sender_id()
    a = register_device(srv.http_base, APP, [sender])["token"]
    s = requests.Session()
    s.trust_env = False
    r = s.post("https://android.googleapis.com/gcm/googlenotification",
               json={"operation": "create", "notification_key_name": "proxied", "registration_ids": [a],
                     "id_token": id_token(srv)},
               headers={"project_id": sender}, proxies={"https": f"http://127.0.0.1:{srv.ready['proxy_port']}"},
               verify=srv.ca_cert, timeout=15)
    assert r.status_code == 200 and r.json()["notification_key"].startswith("APA91b"), r.text
    assert members(srv, sender) == [[a]]
