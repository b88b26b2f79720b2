"""Canonical registration ids (docs/semantics.md, "Canonical registration ids"): after a token refresh
the app's earlier token still reaches it, and every API that has a place for it names the new one —
pyfcm 1.x and python-gcm 0.4 (legacy JSON: `registration_id`, `canonical_ids`; python-gcm's
`canonical` map), the plain-text form (`registration_id=` on a second line, which python-gcm returns),
a raw CCS ACK (`registration_id`) — while HTTP v1 (firebase-admin) just delivers. Upstream messages
come from the new token, and all of it survives a restart."""

from __future__ import annotations

import json
import urllib.parse

from gcm import GCM

from ccs_support import http_json, new_key, new_sender_id
from ccs_support.fcm_http import credentials_file, pyfcm_legacy, raw, run_firebase
from ccs_support.semantics import quote_token


def test_an_old_token_reaches_the_app_and_every_answer_names_the_new_one(start_server, devices, xmpp, tmp_path):
    base = tmp_path / "srv"
    srv = start_server(base=base)
    sender, key = new_sender_id(), new_key()
    dev = devices(srv, "com.example.canonical", [sender])
    old = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)

    dev.send({"refresh": "token"})
    event = dev.expect(lambda e: e.get("event") == "token", timeout=20)
    new = event["token"]
    assert event["previous_token"] == old and new != old, event
    assert new.split(":")[0] == old.split(":")[0], (old, new)  # the same installation id
    status, record = http_json("GET", f"{srv.http_base}/emulator/v1/devices/{quote_token(new)}")
    assert status == 200 and record["token"] == old and record["canonical_token"] == new, record
    assert record["refreshed_tokens"] == [new], record

    # Legacy JSON through pyfcm 1.x: the old token's result names the new one; the new one's does not.
    answer = pyfcm_legacy(srv, key).single_device_data_message(registration_id=old, data_message={"n": "pyfcm-old"})
    assert answer["success"] == 1 and answer["canonical_ids"] == 1, answer
    assert answer["results"][0]["registration_id"] == new, answer
    answer = pyfcm_legacy(srv, key).single_device_data_message(registration_id=new, data_message={"n": "pyfcm-new"})
    assert answer["success"] == 1 and answer["canonical_ids"] == 0, answer
    assert "registration_id" not in answer["results"][0], answer

    # python-gcm: its JSON answer maps the old token to the canonical one; its plain-text call
    # returns the canonical id it read from the answer's second line.
    g = GCM(key)
    g.url = f"{srv.http_base}/gcm/send"
    info = g.json_request(registration_ids=[old, new], data={"n": "gcm-json"})
    assert info.get("canonical") == {old: new}, info
    assert sorted(info.get("success", {})) == sorted([old, new]), info
    assert g.plaintext_request(registration_id=old, data={"n": "gcm-plain"}) == new

    # The plain-text answer itself.
    status, _, body = raw("POST", f"{srv.http_base}/fcm/send",
                          "registration_id=" + urllib.parse.quote(old) + "&data.n=plain",
                          {"Authorization": f"key={key}",
                           "Content-Type": "application/x-www-form-urlencoded;charset=UTF-8"})
    lines = body.split("\n")
    assert status == 200 and lines[0].startswith("id=0:") and lines[1] == f"registration_id={new}", body

    # CCS: the ACK carries registration_id.
    c = xmpp(srv)
    c.login(sender, key)
    ack, _ = c.downstream({"to": old, "message_id": "ccs-old", "data": {"n": "ccs-old"}})
    assert ack["message_type"] == "ack" and ack["from"] == old and ack["registration_id"] == new, ack
    ack, _ = c.downstream({"to": new, "message_id": "ccs-new", "data": {"n": "ccs-new"}})
    assert ack["message_type"] == "ack" and "registration_id" not in ack, ack

    # HTTP v1 has no canonical id: the message is delivered.
    creds = tmp_path / "sa.json"
    credentials_file(srv, sender, creds)
    result = run_firebase({"credentials": str(creds), "fcm_base": srv.http_base, "ops": [
        {"op": "send", "message": {"token": old, "data": {"n": "v1-old"}}}]}, workdir=tmp_path)
    assert result["results"][0].get("name", "").startswith(f"projects/{sender}/messages/0:"), result

    wanted = {"pyfcm-old", "pyfcm-new", "gcm-json", "gcm-plain", "plain", "ccs-old", "ccs-new", "v1-old"}
    got: list[str] = []
    while not wanted <= set(got):
        got.append(dev.expect(lambda e: e.get("event") == "message", timeout=20)["message"]["data"]["n"])
    # python-gcm's JSON request went to both tokens of the one app: it gets that message twice, like
    # any message sent twice.
    assert sorted(got) == sorted([*wanted, "gcm-json"]), got

    # Upstream: the app sends from its new token.
    dev.send({"upstream": {"message_id": "up-canonical", "data": {"k": "v"}}})
    upstream, _ = c.wait_gcm("up-canonical", timeout=20, skip_other=True)
    assert upstream["from"] == new and upstream["category"] == "com.example.canonical", upstream
    c.send_gcm({"to": new, "message_id": "up-canonical", "message_type": "ack"})
    dev.expect(lambda e: e.get("event") == "sent", timeout=20)

    # After a restart the old token still names the new one.
    dev.close()
    c.close()
    srv.stop()
    srv = start_server(base=base)
    answer = pyfcm_legacy(srv, key).single_device_data_message(registration_id=old, data_message={"n": "after"})
    assert answer["canonical_ids"] == 1 and answer["results"][0]["registration_id"] == new, answer
    status, record = http_json("GET", f"{srv.http_base}/emulator/v1/devices/{quote_token(old)}")
    assert status == 200 and record["canonical_token"] == new and record["queued"] == 1, record


def test_refresh_refusals(server):
    from ccs_support import register_device
    from ccs_support.semantics import post

    token = register_device(server.http_base, "com.example.canonical", [new_sender_id()])["token"]
    status, body = post(server.http_base, "devices/no-such-token/refresh")
    assert status == 404, (status, body)
    assert post(server.http_base, f"devices/{quote_token(token)}/uninstall")[0] == 200
    status, body = post(server.http_base, f"devices/{quote_token(token)}/refresh")
    assert status == 400 and "uninstalled" in json.dumps(body), (status, body)
