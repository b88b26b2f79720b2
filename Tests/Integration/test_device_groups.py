"""Device groups (seed 004, spec §6.2–6.3): the management API over plain HTTP (no client library
exists for it), group sends over XMPP and with pyfcm 1.x (`to` = the notification key), partial and
total failure, the empty group, upstream to a group, the admin and device views, and kill -9 after
create/add. Every wait is on a fact: an HTTP answer (the group is durable before it), an ACK, a
device's event.
"""

from __future__ import annotations

import json

import pytest
import requests
from pyfcm import FCMNotification

from ccs_support import XmppConn, get_device, http_json, new_key, new_sender_id, register_device
from ccs_support.fcm_http import pyfcm_legacy

APP = "com.example.groups"
OTHER_APP = "com.example.groups.other"


def session() -> requests.Session:
    s = requests.Session()
    s.trust_env = False  # never through a proxy from the environment
    return s


HTTP = session()


def headers(sender: str | None, key: str | None = "key=AIzaSy-groups") -> dict[str, str]:
    h = {"Content-Type": "application/json"}
    if key is not None:
        h["Authorization"] = key
    if sender is not None:
        h["project_id"] = sender
    return h


def manage(server, sender: str, body, *, path: str = "/fcm/notification", key: str | None = "key=AIzaSy-groups"):
    r = HTTP.post(server.http_base + path, data=json.dumps(body) if not isinstance(body, str) else body,
                  headers=headers(sender, key), timeout=15)
    return r.status_code, r.json()


def create(server, sender: str, name: str, tokens: list[str], **kw) -> str:
    status, body = manage(server, sender, {"operation": "create", "notification_key_name": name,
                                           "registration_ids": tokens}, **kw)
    assert status == 200, body
    assert body["notification_key"].startswith("APA91b"), body
    return body["notification_key"]


def lookup(server, sender: str, name: str, key: str | None = "key=AIzaSy-groups"):
    r = HTTP.get(server.http_base + "/fcm/notification", params={"notification_key_name": name},
                 headers=headers(sender, key), data="{}", timeout=15)
    return r.status_code, r.json()


def groups_of(server, sender: str) -> list[dict]:
    status, body = http_json("GET", f"{server.http_base}/emulator/v1/senders/{sender}/groups")
    assert status == 200, body
    return body["groups"]


def legacy_send(server, body: dict, key: str = "key=AIzaSy-groups"):
    r = HTTP.post(server.http_base + "/fcm/send", data=json.dumps(body),
                  headers={"Content-Type": "application/json", "Authorization": key}, timeout=15)
    return r.status_code, r.json()


def pyfcm(server) -> FCMNotification:
    return pyfcm_legacy(server, "AIzaSy-groups")


def uninstall(server, token: str) -> None:
    status, body = http_json("POST", f"{server.http_base}/emulator/v1/devices/{token}/uninstall")
    assert status == 200, body


# -- management ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/fcm/notification", "/gcm/notification"])
def test_create_lookup_add_remove(server, path):
    sender = new_sender_id()
    a, b = (register_device(server.http_base, APP, [sender])["token"] for _ in range(2))
    key = create(server, sender, "appUser-Chris", [a], path=path)

    # Seed 004: each lookup may answer another encoding, every one a valid key for the group.
    status, found = lookup(server, sender, "appUser-Chris")
    assert status == 200 and found["notification_key"].startswith("APA91b"), found
    other = found["notification_key"]
    assert other != key

    status, body = manage(server, sender, {"operation": "add", "notification_key_name": "appUser-Chris",
                                           "notification_key": other, "registration_ids": [b]}, path=path)
    assert (status, body) == (200, {"notification_key": other})
    [group] = groups_of(server, sender)
    assert group["notification_key_name"] == "appUser-Chris" and group["members"] == [a, b], group

    # The name is optional on add/remove; both encodings name the same group.
    status, body = manage(server, sender, {"operation": "remove", "notification_key": key, "registration_ids": [a]}, path=path)
    assert (status, body) == (200, {"notification_key": key})
    assert groups_of(server, sender)[0]["members"] == [b]


def test_every_rule_answers_the_real_error(server):
    sender = new_sender_id()
    a = register_device(server.http_base, APP, [sender])["token"]
    foreign = register_device(server.http_base, APP, [new_sender_id()])["token"]
    gone = register_device(server.http_base, APP, [sender])["token"]
    uninstall(server, gone)
    key = create(server, sender, "rules", [a])

    def refused(body, error):
        status, answer = manage(server, sender, body)
        assert (status, answer) == (400, {"error": error}), (body, status, answer)

    refused({"operation": "create", "notification_key_name": "rules", "registration_ids": [a]},
            "notification_key already exists")
    # Tokens of another sender, uninstalled or unknown ones cannot join.
    refused({"operation": "create", "notification_key_name": "x", "registration_ids": [foreign, gone, "not-a-token"]},
            "no valid registration ids")
    refused({"operation": "add", "notification_key": key, "registration_ids": [foreign]}, "no valid registration ids")
    refused({"operation": "add", "notification_key": key, "notification_key_name": "other", "registration_ids": [a]},
            "notification_key_name doesn't match the group name of the notification_key")
    refused({"operation": "remove", "notification_key": key, "notification_key_name": "other", "registration_ids": [a]},
            "notification_key_name doesn't match the group name of the notification_key")
    refused({"operation": "add", "notification_key": "APA91bNotAKeyOfAnyGroup", "registration_ids": [a]},
            "notification_key not found")
    refused({"operation": "remove", "notification_key": key, "registration_ids": [foreign]}, "no valid registration ids")
    assert lookup(server, sender, "no-such-group") == (400, {"error": "notification_key not found"})

    # Valid tokens join, the others are dropped (what clients report of the real service).
    mate = register_device(server.http_base, APP, [sender])["token"]
    status, _ = manage(server, sender, {"operation": "add", "notification_key": key, "registration_ids": [mate, foreign, gone]})
    assert status == 200
    assert groups_of(server, sender)[0]["members"] == [a, mate]


def test_twenty_members_at_most(server):
    sender = new_sender_id()
    tokens = [register_device(server.http_base, APP, [sender])["token"] for _ in range(21)]
    status, body = manage(server, sender, {"operation": "create", "notification_key_name": "big", "registration_ids": tokens})
    assert (status, body) == (400, {"error": "notification_key has reached the maximum number of members (20)"})
    key = create(server, sender, "big", tokens[:20])
    status, body = manage(server, sender, {"operation": "add", "notification_key": key, "registration_ids": tokens[20:]})
    assert (status, body) == (400, {"error": "notification_key has reached the maximum number of members (20)"})
    assert len(groups_of(server, sender)[0]["members"]) == 20


def test_the_last_member_removed_deletes_the_group(server):
    sender = new_sender_id()
    a, b = (register_device(server.http_base, APP, [sender])["token"] for _ in range(2))
    key = create(server, sender, "short-lived", [a, b])
    assert manage(server, sender, {"operation": "remove", "notification_key": key, "registration_ids": [a, b]}) \
        == (200, {"notification_key": key})
    assert groups_of(server, sender) == []
    assert lookup(server, sender, "short-lived") == (400, {"error": "notification_key not found"})
    assert manage(server, sender, {"operation": "add", "notification_key": key, "registration_ids": [a]}) \
        == (400, {"error": "notification_key not found"})
    # The name is free again; a send to the old key finds nothing.
    create(server, sender, "short-lived", [a])
    status, body = legacy_send(server, {"to": key, "data": {"a": "b"}})
    assert status == 200 and body["results"] == [{"error": "NotRegistered"}], body


def test_bad_input_is_refused_with_a_reason(server):
    sender = new_sender_id()
    bodies = ["", "not json", "[]", {"operation": 1}, {}, {"operation": "delete"},
              {"operation": "create", "registration_ids": ["a"]},
              {"operation": "create", "notification_key_name": "n", "registration_ids": "a"},
              {"operation": "create", "notification_key_name": "n", "registration_ids": [1]},
              {"operation": "create", "notification_key_name": ["n"], "registration_ids": ["a"]},
              {"operation": "add", "registration_ids": ["a"]},
              {"operation": "create", "notification_key_name": "x" * 257, "registration_ids": ["a"]},
              {"operation": "create", "notification_key_name": "n", "registration_ids": [f"t{i}" for i in range(1001)]}]
    for body in bodies:
        status, answer = manage(server, sender, body)
        assert status == 400 and answer["error"], (body, status, answer)
    r = HTTP.get(server.http_base + "/fcm/notification", headers=headers(sender), timeout=15)
    assert r.status_code == 400 and "notification_key_name" in r.json()["error"]
    r = HTTP.post(server.http_base + "/fcm/notification", data=b"x" * (2 << 20), headers=headers(sender), timeout=15)
    assert r.status_code == 413
    # The server is still there.
    assert http_json("GET", f"{server.http_base}/emulator/v1/health")[0] == 200


def test_authorization_and_project_id(server):
    sender, key = new_sender_id(), new_key()
    # Logging in to CCS records the sender's server key (permissive mode): requests must carry it.
    with XmppConn(server.ccs_port, server.ca_cert) as c:
        c.login(sender, key)
    token = register_device(server.http_base, APP, [sender])["token"]
    body = {"operation": "create", "notification_key_name": "auth", "registration_ids": [token]}

    for sent_key, project, status in [(None, sender, 401), ("Bearer abc", sender, 401), ("key=", sender, 401),
                                      ("key=wrong", sender, 401), (f"key={key}", None, 400), (f"key={key}", "my-app", 400)]:
        got, answer = manage(server, project, body, key=sent_key)
        assert got == status and answer["error"], (sent_key, project, got, answer)
    assert groups_of(server, sender) == []
    group_key = create(server, sender, "auth", [token], key=f"key={key}")

    # Another sender neither sees nor changes it, nor sends to it.
    stranger = new_sender_id()
    assert lookup(server, stranger, "auth") == (400, {"error": "notification_key not found"})
    assert manage(server, stranger, {"operation": "remove", "notification_key": group_key, "registration_ids": [token]}) \
        == (400, {"error": "notification_key not found"})
    with XmppConn(server.ccs_port, server.ca_cert) as c:
        c.login(stranger, new_key())
        nack, _ = c.downstream({"to": group_key, "message_id": "m-stranger", "data": {"a": "b"}})
    assert nack["message_type"] == "nack" and nack["error"] == "DEVICE_UNREGISTERED", nack
    assert nack["error_description"] == "notification_key not found", nack
    assert groups_of(server, sender)[0]["members"] == [token]


# -- sends -----------------------------------------------------------------------------------------


def test_xmpp_group_send_ack_with_counts_then_nack_when_all_fail(server, devices):
    sender, key = new_sender_id(), new_key()
    online = devices(server, APP, [sender])
    online_token = online.expect("registered", timeout=30)["token"]
    online.expect("connected", timeout=30)
    gone = register_device(server.http_base, APP, [sender])["token"]
    offline = register_device(server.http_base, APP, [sender])["token"]

    with XmppConn(server.ccs_port, server.ca_cert) as c:
        c.login(sender, key)
        group = create(server, sender, "xmpp", [online_token, gone, offline], key=f"key={key}")
        ack, _ = c.downstream({"to": group, "message_id": "g-1", "data": {"hello": "group"}})
        assert ack == {"from": group, "message_type": "ack", "success": 3, "failure": 0, "message_id": "g-1"}, ack
        event = online.expect(lambda e: e.get("event") == "message", timeout=20)
        assert event["message"]["data"] == {"hello": "group"} and event["message"]["from"] == sender, event
        # The offline member holds it in its own queue.
        _, dev = get_device(server.http_base, offline)
        assert [q["app_message_id"] for q in dev["queue"]] == ["g-1"], dev

        uninstall(server, gone)
        ack, _ = c.downstream({"to": group, "message_id": "g-2", "data": {"n": "2"}})
        assert ack == {"from": group, "message_type": "ack", "success": 2, "failure": 1,
                       "failed_registration_ids": [gone], "message_id": "g-2"}, ack

        # No member takes it: a NACK, with the counts and the failed members.
        uninstall(server, online_token)
        uninstall(server, offline)
        nack, _ = c.downstream({"to": group, "message_id": "g-3", "data": {"n": "3"}})
        assert nack["message_type"] == "nack" and nack["from"] == group and nack["error"] == "DEVICE_UNREGISTERED", nack
        assert nack["success"] == 0 and nack["failure"] == 2, nack
        assert sorted(nack["failed_registration_ids"]) == sorted([online_token, offline]), nack

        # Every member was found dead and pruned: an empty group is ACKed with 0 and 0.
        ack, _ = c.downstream({"to": group, "message_id": "g-4", "data": {"n": "4"}})
        assert ack == {"from": group, "message_type": "ack", "success": 0, "failure": 0, "message_id": "g-4"}, ack
    [g] = groups_of(server, sender)
    assert g["members"] == [], g


def test_pyfcm_sends_to_the_key(server, devices):
    sender = new_sender_id()
    dev = devices(server, APP, [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    other = register_device(server.http_base, APP, [sender])["token"]
    group = create(server, sender, "pyfcm", [token, other])

    result = pyfcm(server).notify_single_device(registration_id=group, data_message={"via": "pyfcm"},
                                                message_title="Hi", message_body="group")
    assert result["success"] == 2 and result["failure"] == 0, result
    event = dev.expect(lambda e: e.get("event") in ("message", "notification"), timeout=20)
    assert event["message"]["data"] == {"via": "pyfcm"}, event
    assert event["message"]["notification"] == {"title": "Hi", "body": "group"}, event


def test_partial_failure_one_uninstalled_one_mismatched(server):
    """Seed 004's partial success: the failed members are listed; pyfcm sees the counts."""
    sender = new_sender_id()
    ok = register_device(server.http_base, APP, [sender])["token"]
    gone = register_device(server.http_base, APP, [sender])["token"]
    other_app = register_device(server.http_base, OTHER_APP, [sender])["token"]
    group = create(server, sender, "partial", [ok, gone, other_app])
    uninstall(server, gone)

    status, body = legacy_send(server, {"to": group, "restricted_package_name": APP, "data": {"a": "b"}})
    assert (status, body) == (200, {"success": 1, "failure": 2, "failed_registration_ids": [gone, other_app]}), body

    # The uninstalled member was found dead and pruned; the other app's member stays and fails
    # again for this package (pyfcm reads the counts).
    result = pyfcm(server).notify_single_device(registration_id=group, data_message={"a": "c"},
                                                restricted_package_name=APP)
    assert result["success"] == 1 and result["failure"] == 1, result
    assert groups_of(server, sender)[0]["members"] == [ok, other_app]
    _, dev = get_device(server.http_base, ok)
    assert len(dev["queue"]) == 2, dev


def test_empty_group_answers_zero_and_zero(server):
    sender = new_sender_id()
    only = register_device(server.http_base, APP, [sender])["token"]
    group = create(server, sender, "emptied", [only])
    uninstall(server, only)
    assert legacy_send(server, {"to": group, "data": {"a": "b"}}) == \
        (200, {"success": 0, "failure": 1, "failed_registration_ids": [only]})
    assert legacy_send(server, {"to": group, "data": {"a": "b"}}) == (200, {"success": 0, "failure": 0})
    # The deprecated notification_key field reaches the same group.
    assert legacy_send(server, {"notification_key": group, "data": {"a": "b"}}) == (200, {"success": 0, "failure": 0})


def test_each_member_keeps_its_own_delivery_semantics(server):
    """time_to_live 0: the online member gets it, the offline one drops it (now or never) — both
    count as success, as they do for single-token sends."""
    sender = new_sender_id()
    a, b = (register_device(server.http_base, APP, [sender])["token"] for _ in range(2))
    group = create(server, sender, "ttl", [a, b])
    assert legacy_send(server, {"to": group, "time_to_live": 0, "data": {"a": "b"}}) == (200, {"success": 2, "failure": 0})
    for t in (a, b):
        assert get_device(server.http_base, t)[1]["queue"] == []
    assert legacy_send(server, {"to": group, "collapse_key": "k", "data": {"n": "1"}})[1]["success"] == 2
    assert legacy_send(server, {"to": group, "collapse_key": "k", "data": {"n": "2"}})[1]["success"] == 2
    for t in (a, b):
        queue = get_device(server.http_base, t)[1]["queue"]
        assert [q["payload"]["data"] for q in queue] == [{"n": "2"}], queue


# -- upstream, views ---------------------------------------------------------------------------------


def test_upstream_to_a_group_reaches_the_app_server_marked(server, devices):
    sender, key = new_sender_id(), new_key()
    dev = devices(server, APP, [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    mate = register_device(server.http_base, APP, [sender])["token"]
    group = create(server, sender, "family", [token, mate])

    dev.send({"show": "groups"})
    shown = dev.expect("groups", timeout=15)["groups"]
    assert [(g["sender_id"], g["notification_key_name"]) for g in shown] == [(sender, "family")], shown
    assert shown[0]["notification_key"].startswith("APA91b")
    _, view = get_device(server.http_base, token)
    assert [g["notification_key_name"] for g in view["groups"]] == ["family"], view

    with XmppConn(server.ccs_port, server.ca_cert) as c:
        c.login(sender, key)
        dev.send({"upstream": {"to": group, "message_id": "up-group-1", "data": {"k": "v"}}})
        dev.expect(lambda e: e.get("event") == "sent" and e.get("message_id") == "up-group-1", timeout=20)
        payload, item = c.wait_gcm("up-group-1", timeout=20, skip_other=True)
    assert payload == {"category": APP, "data": {"k": "v"}, "message_id": "up-group-1", "from": token,
                       "to": group, "notification_key_name": "family"}, payload
    assert item.elem.get("type") == "normal"

    # A device outside the group cannot address it.
    outsider = devices(server, APP, [sender])
    outsider.expect("connected", timeout=30)
    outsider.send({"upstream": {"to": group, "message_id": "up-group-2", "data": {"k": "v"}}})
    refused = outsider.expect(lambda e: e.get("message_id") == "up-group-2", timeout=20)
    assert refused == {"event": "send_error", "message_id": "up-group-2", "error": "INVALID_SENDER"}, refused


# -- durability ------------------------------------------------------------------------------------


def test_kill_9_after_create_and_add_keeps_the_group(start_server, tmp_path):
    base = tmp_path / "crash"
    srv = start_server(base=base)
    sender = new_sender_id()
    a, b = (register_device(srv.http_base, APP, [sender])["token"] for _ in range(2))
    key = create(srv, sender, "durable", [a])
    # The 200 is the fact to wait on: the group is committed before the answer.
    srv.kill()
    srv.start()
    assert [g["members"] for g in groups_of(srv, sender)] == [[a]]
    assert manage(srv, sender, {"operation": "add", "notification_key": key, "registration_ids": [b]}) \
        == (200, {"notification_key": key})
    srv.kill()
    srv.start()
    status, found = lookup(srv, sender, "durable")
    assert status == 200 and found["notification_key"].startswith("APA91b"), found
    [g] = groups_of(srv, sender)
    assert g["members"] == [a, b], g
    # The key from before both crashes still sends to both.
    assert legacy_send(srv, {"to": key, "data": {"a": "b"}}) == (200, {"success": 2, "failure": 0})
