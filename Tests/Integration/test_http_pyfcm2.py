"""pyfcm 2.x (HTTP v1 with a service-account file, from PyPI, unmodified) through proxy mode: its v1
URL is fixed to fcm.googleapis.com, so HTTPS_PROXY and the development CA in REQUESTS_CA_BUNDLE are
the only redirection, and the service-account file keeps Google's token_uri. Tokens, platform blocks,
a topic the app subscribed to itself, a condition, a dry run, and each error pyfcm maps to its own
exception."""

from __future__ import annotations


from ccs_support import new_sender_id, register_device
from ccs_support.fcm_http import google_style_credentials, run_driver
from ccs_support.semantics import post, quote_token


def test_pyfcm2_sends_through_the_proxy_and_maps_every_error(start_server, devices, tmp_path):
    srv = start_server(extra_args=["--proxy-port", "0"])
    sender, other_sender = new_sender_id(), new_sender_id()
    creds = tmp_path / "google-style.json"
    google_style_credentials(srv, sender, creds)

    dev = devices(srv, "com.example.pyfcm2", [sender])
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    dev.send({"subscribe": "pyfcm2-news"})
    dev.expect(lambda e: e.get("event") == "subscribed", timeout=20)
    gone = register_device(srv.http_base, "com.example.pyfcm2", [sender])["token"]
    status, _ = post(srv.http_base, f"devices/{quote_token(gone)}/uninstall")
    assert status == 200
    foreign = register_device(srv.http_base, "com.example.pyfcm2", [other_sender])["token"]

    result = run_driver("pyfcm2_driver.py", {"credentials": str(creds), "project_id": None, "ops": [
        {"notify": {"fcm_token": token, "notification_title": "Hi", "notification_body": "there",
                    "data_payload": {"k": "v"}}},
        {"notify": {"fcm_token": token, "data_payload": {"n": "2"},
                    "android_config": {"priority": "high", "ttl": "60s", "collapse_key": "ck"},
                    "apns_config": {"headers": {"apns-priority": "10"}},
                    "fcm_options": {"analytics_label": "pyfcm2"}}},
        {"notify": {"topic_name": "pyfcm2-news", "data_payload": {"n": "topic"}}},
        {"notify": {"topic_condition": "'pyfcm2-news' in topics || 'pyfcm2-none' in topics",
                    "data_payload": {"n": "condition"}}},
        {"notify": {"fcm_token": token, "data_payload": {"n": "dry"}, "dry_run": True}},
        {"notify": {"fcm_token": "not-a-token", "data_payload": {"n": "bad"}}},
        {"notify": {"fcm_token": token, "data_payload": {"n": 3}}},
        {"notify": {"fcm_token": gone, "data_payload": {"n": "gone"}}},
        {"notify": {"fcm_token": foreign, "data_payload": {"n": "foreign"}}},
        {"notify": {"fcm_token": token, "data_payload": {"n": "last"}}},
    ]}, workdir=tmp_path, proxy=f"http://127.0.0.1:{srv.ready['proxy_port']}", ca=srv.ca_cert)
    assert result["version"].startswith("2."), result
    first, second, topic, condition, dry, bad, not_string, unregistered, mismatch, last = result["results"]
    assert first["name"].startswith(f"projects/{sender}/messages/0:"), first
    assert second["name"].startswith(f"projects/{sender}/messages/0:"), second
    # A topic or condition message's name ends in a number, as FCM's does.
    assert topic["name"].rsplit("/", 1)[1].isdigit(), topic
    assert condition["name"].rsplit("/", 1)[1].isdigit(), condition
    assert dry == {"name": f"projects/{sender}/messages/fake_message_id"}, dry
    assert bad["error"] == "InvalidDataError" and "INVALID_ARGUMENT" in bad["message"], bad
    assert not_string["error"] == "InvalidDataError" and 'message.data[\\"n\\"]' in not_string["message"], not_string
    assert unregistered["error"] == "FCMNotRegisteredError", unregistered
    assert mismatch["error"] == "FCMSenderIdMismatchError", mismatch

    assert last["name"].startswith(f"projects/{sender}/messages/0:"), last

    # Until all five have come: a dry run that went out would have come before "last" (same token, in order).
    wanted = ["v", "2", "topic", "condition", "last"]
    messages = []
    while not all(any((m["data"].get("k") or m["data"].get("n")) == w for m in messages) for w in wanted):
        messages.append(dev.expect(lambda e: e.get("event") in ("message", "notification"), timeout=20)["message"])
    by_tag = {m["data"].get("k") or m["data"].get("n"): m for m in messages}
    assert sorted(by_tag) == sorted(wanted) and len(messages) == len(wanted), messages
    assert by_tag["v"]["notification"] == {"title": "Hi", "body": "there"}, by_tag["v"]
    assert first["name"].endswith("/" + by_tag["v"]["message_id"]), (first, by_tag["v"])
    assert by_tag["2"]["ttl"] == 60 and by_tag["2"]["priority"] == "high", by_tag["2"]
    assert by_tag["2"].get("collapse_key") == "ck", by_tag["2"]
    assert by_tag["topic"]["from"] == "/topics/pyfcm2-news", by_tag["topic"]
    assert by_tag["condition"]["from"] == sender, by_tag["condition"]
