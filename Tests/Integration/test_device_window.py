"""The device channel's window (serve --device-window, docs/device-protocol.md): a device that reads
every stanza and never ACKs holds at most the window of messages on its connection, however many are
sent to it; the rest wait in its queue under the store's rules (the 100-message limit and its
`deleted_messages` notice), and go out as the device ACKs. Memory is measured by the server's own
count of what a connection holds unACKed (the device record's `unacked`), not by RSS."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from ccs_support import get_device, new_key, new_sender_id, register_device
from ccs_support.cli import run_cli, serve_must_fail
from ccs_support.fcm_http import raw
from ccs_support.xmpp import CLIENT_NS, SASL_NS, XmppConn, plain_payload, q

SENDS = 100_000
PER_REQUEST = 1000  # legacy `registration_ids` takes up to 1000 tokens: the same token 1000 times
# Journal and audit off: they record every one of the 100,000 messages, which is not what is tested.
FAST = ["--journal", "off", "--audit", "off"]


def raw_device(srv, device: dict) -> XmppConn:
    """A device connection that is logged in and bound, driven by hand (nothing is ACKed by itself)."""
    d = XmppConn(srv.device_port, srv.ca_cert, timeout=30)
    d.open_stream("devices.ccs-emulator")
    assert d.auth_plain(plain_payload("", device["device_id"], device["device_secret"])).tag == q(SASL_NS, "success")
    d.open_stream("devices.ccs-emulator")
    assert d.bind().elem.get("type") == "result"
    return d


def barrier(d: XmppConn, n: int) -> list[dict]:
    """A ping round trip: everything the server handed the connection before the answer has been
    read. Returns the gcm payloads of the messages that came before it."""
    d.send(f'<iq type="get" id="barrier-{n}"><ping xmlns="urn:xmpp:ping"/></iq>')
    messages = []
    while True:
        item = d.next_element(timeout=60)
        if item.tag == q(CLIENT_NS, "iq") and item.elem.get("id") == f"barrier-{n}":
            return messages
        payload = item.gcm()
        assert payload is not None, item
        messages.append(payload)


def read_available(d: XmppConn) -> None:
    """Reads whatever the server has sent so far (the device reads everything, it only never ACKs)."""
    while d._recv(0.01):
        pass


def ack(d: XmppConn, message_id: str) -> None:
    d.send_gcm({"message_type": "ack", "message_id": message_id})


def test_a_device_that_reads_and_never_acks_holds_at_most_the_window(start_server):
    srv = start_server(extra_args=FAST)
    sender = new_sender_id()
    device = register_device(srv.http_base, "com.example.window", [sender])
    token = device["token"]
    d = raw_device(srv, device)
    headers = {"Authorization": f"key={new_key()}", "Content-Type": "application/json"}
    body = json.dumps({"registration_ids": [token] * PER_REQUEST, "data": {"x": "y"}})

    def send(_: int) -> int:
        status, _, text = raw("POST", f"{srv.http_base}/fcm/send", body, headers, timeout=60)
        assert status == 200, text
        return json.loads(text)["success"]

    # The device keeps reading while the sends go on (it never ACKs): the server is never stopped
    # from writing to it by a full socket, only by its window.
    with ThreadPoolExecutor(4) as pool:
        accepted = 0
        for n in pool.map(send, range(SENDS // PER_REQUEST)):
            accepted += n
            read_available(d)
            handed = d.received.count("<message ")
            assert handed <= 100, f"{handed} messages handed to a device that ACKed none"
            _, record = get_device(srv.http_base, token)
            # The window's 100, at most 100 more waiting, and the limit's notice.
            assert record["queued"] <= 201 and record.get("unacked", 0) <= 100, record
    assert accepted == SENDS
    held = barrier(d, 1)
    assert len(held) == 100, f"{len(held)} messages handed to a device that ACKed none"
    _, record = get_device(srv.http_base, token)
    assert record["unacked"] == 100 and record["queued"] <= 201, record

    # ACKed, the window takes what the store kept, the limit's notice first.
    for m in held:
        ack(d, m["message_id"])
    more = barrier(d, 2)
    while not any(m.get("message_type") == "deleted_messages" for m in more):
        item = d.next_element(timeout=60)
        assert item.gcm() is not None, item
        more.append(item.gcm())
    _, record = get_device(srv.http_base, token)
    assert record["unacked"] <= 100, record
    d.close()


def test_the_window_is_a_checked_serve_option_shown_in_help(tmp_path):
    help_text = run_cli("serve", "--help").stdout.decode()
    assert "--device-window" in help_text, help_text
    for bad in ("0", "-1", "100001", "many"):
        status, stderr = serve_must_fail(tmp_path / f"data-{bad}", "--device-window", bad)
        assert status != 0 and "--device-window" in stderr, (bad, status, stderr)


def test_a_window_of_one_hands_over_one_message_at_a_time_in_order(start_server):
    srv = start_server(extra_args=["--device-window", "1"])
    sender = new_sender_id()
    device = register_device(srv.http_base, "com.example.window", [sender])
    headers = {"Authorization": f"key={new_key()}", "Content-Type": "application/json"}
    for i in range(5):
        status, _, text = raw("POST", f"{srv.http_base}/fcm/send",
                              json.dumps({"to": device["token"], "data": {"n": str(i)}}), headers)
        assert status == 200, text
    d = raw_device(srv, device)
    seen = []
    for i in range(5):
        item = d.next_element(timeout=30)
        payload = item.gcm()
        assert payload is not None, item
        assert barrier(d, i) == [], "a second message came before the first was ACKed"
        seen.append(payload["data"]["n"])
        ack(d, item.elem.get("id"))
    assert seen == ["0", "1", "2", "3", "4"]
    assert barrier(d, 5) == []
    d.close()
