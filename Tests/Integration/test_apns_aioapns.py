"""aioapns 4.0, an unmodified APNs HTTP/2 client library, against the emulator through a host
override: aioapns dials Apple's host name on port 443, and the event loop it runs on resolves that
name to the emulator's `apns_http2_port` (as an /etc/hosts entry would, with the port; TLS still
checks the name, which the emulator's certificate carries; its `ssl_context` trusts the emulator's
CA). aioapns's own `proxy_host`/`proxy_port` cannot be used on Python 3.11: it hands the proxy
connection's `asyncio.TransportSocket` to `create_connection`, and that wrapper has no `send` since
3.11 (docs/apns.md); proxy mode itself is tested with raw CONNECT in test_apns_http2.py. Token auth (a `.p8` from `ccs-emulator
apns-key`) and certificate auth (`ccs-emulator apns-cert`), delivery to a simulated iOS device, the
410 path, and a topic the key may not push to."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time

import pytest
from aioapns import APNs, NotificationRequest, PushType

from ccs_support import http_json
from ccs_support.apns import issue_cert, register_ios
from ccs_support.apns_http2 import issue_key

APP = "com.example.aioapns"
TEAM, KEY = "TEAMAIO001", "KEYAIO0001"


APPLE_HOSTS = {"api.push.apple.com", "api.sandbox.push.apple.com", "api.development.push.apple.com"}


class HostOverrideLoop(asyncio.SelectorEventLoop):
    """An event loop whose resolver answers Apple's APNs hosts with the emulator's address."""

    def __init__(self, port: int):
        super().__init__()
        self.port = port

    async def getaddrinfo(self, host, port, *args, **kwargs):
        if host in APPLE_HOSTS:
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", self.port))]
        return await super().getaddrinfo(host, port, *args, **kwargs)


def client(srv, **kw):
    """The client's options; it is made inside the event loop that runs it (its pool keeps the loop)."""
    ca = srv.ready["ca_cert"]
    return lambda: APNs(use_sandbox=True, ssl_context=ssl.create_default_context(cafile=ca),
                        max_connection_attempts=1, **kw)


def send(make, *requests: NotificationRequest, srv) -> list:
    async def run():
        apns = make()
        try:
            return [await asyncio.wait_for(apns.send_notification(r), 30) for r in requests]
        finally:
            apns.pool.close()
    loop = HostOverrideLoop(int(srv.ready["apns_http2_port"]))
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


def test_token_auth_delivers_to_the_device(server, devices, tmp_path):
    key = issue_key(server.data_dir, TEAM, KEY, tmp_path / "key.p8", topics=[APP])
    dev = devices(server, APP, [], platform="ios", apns=True)
    token = dev.expect("registered", timeout=30)["apns_token"]
    dev.expect("connected", timeout=30)
    apns = client(server, key=(tmp_path / "key.p8").read_text(), key_id=key["key_id"], team_id=TEAM, topic=APP)
    ok, silent, other_topic = send(
        apns,
        NotificationRequest(device_token=token, message={"aps": {"alert": "From aioapns", "badge": 1}},
                            push_type=PushType.ALERT),
        NotificationRequest(device_token=token, message={"aps": {"content-available": 1}}, priority=5,
                            push_type=PushType.BACKGROUND, time_to_live=60, collapse_key="sync"),
        NotificationRequest(device_token=token, message={"aps": {"alert": "x"}}, apns_topic="com.example.notmine"),
        srv=server)
    assert ok.is_successful, (ok.status, ok.description)
    assert silent.is_successful, (silent.status, silent.description)
    event = dev.expect("apns")
    assert event["alert"] == "From aioapns" and event["apns"]["apns_id"] == ok.notification_id
    event = dev.expect("apns")
    assert event["presentation"] == "background_wakeup" and event["apns"]["collapse_id"] == "sync"
    # A bad topic: the key is limited to APP.
    assert (other_topic.status, other_topic.description) == ("400", "TopicDisallowed")


def test_token_auth_410_for_an_uninstalled_app(server, tmp_path):
    issue_key(server.data_dir, TEAM, "KEYAIO0002", tmp_path / "key.p8")
    device = register_ios(server.http_base, APP)
    status, _ = http_json("POST", f"{server.http_base}/emulator/v1/devices/{device['token']}/uninstall")
    assert status in (200, 204)
    apns = client(server, key=(tmp_path / "key.p8").read_text(), key_id="KEYAIO0002", team_id=TEAM, topic=APP)
    (result,) = send(apns, NotificationRequest(device_token=device["apns_token"], message={"aps": {"alert": "x"}}),
                     srv=server)
    assert (result.status, result.description) == ("410", "Unregistered")
    assert int(result.timestamp) <= int(time.time()) * 1000


def test_certificate_auth(server, devices, tmp_path):
    cert = issue_cert(server.data_dir, APP, tmp_path / "cert")
    dev = devices(server, APP, [], platform="ios", apns=True)
    token = dev.expect("registered", timeout=30)["apns_token"]
    dev.expect("connected", timeout=30)
    apns = client(server, client_cert=cert["combined"], topic=APP)
    ok, bad = send(apns,
                   NotificationRequest(device_token=token, message={"aps": {"alert": "Certificate"}}),
                   NotificationRequest(device_token=token, message={"aps": {"alert": "x"}},
                                       apns_topic="com.example.notmine"), srv=server)
    assert ok.is_successful, (ok.status, ok.description)
    assert dev.expect("apns")["alert"] == "Certificate"
    assert (bad.status, bad.description) == ("400", "BadTopic")
