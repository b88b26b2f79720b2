"""Helpers for the store-and-forward semantics tests (test_delivery_semantics.py, test_restart_state.py).

Everything goes through the real endpoints: the app server is a raw TLS XMPP connection on the CCS
port, the device is the `ccs-emulator device` CLI, the admin API is plain HTTP.

"Never delivered" is checked without sleeping on a guess: after the message that must not arrive,
a *barrier* message that must arrive is sent to the same device (after the first one's ACK). The
engine hands messages to a device connection in commit order and the connection is one ordered TCP
stream, so once the barrier is printed, a wrongly delivered earlier message would already have
been printed too. A short drain afterwards is only a second line of defence.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any, Callable, Iterable

from .admin_api import get_device, http_json
from .device import DeviceCLI
from .xmpp import XmppConn, gcm_stanza

POLL_TIMEOUT = 15.0
VIRTUAL = ["--clock", "virtual"]


# ---- admin API -----------------------------------------------------------------------------------

def quote_token(token: str) -> str:
    return urllib.parse.quote(token, safe=":")


def device_view(base: str, token: str) -> dict:
    status, body = get_device(base, token)
    assert status == 200, f"GET /emulator/v1/devices/{token} -> {status} {body!r}"
    return body


def queue_of(base: str, token: str) -> list[dict]:
    return device_view(base, token)["queue"]


def queued_app_ids(base: str, token: str, kind: str | None = "message") -> list[str]:
    """The app-server message_ids of the device's queue, in queue order (notices left out)."""
    return [m["app_message_id"] for m in queue_of(base, token) if kind is None or m.get("kind") == kind]


def wait_device(base: str, token: str, pred: Callable[[dict], bool], what: str,
                timeout: float = POLL_TIMEOUT) -> dict:
    """Polls GET /emulator/v1/devices/{token} until pred(view) holds; fails with the last view."""
    deadline = time.monotonic() + timeout
    while True:
        view = device_view(base, token)
        if pred(view):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout}s; device view: {view!r}")
        time.sleep(0.1)


def post(base: str, path: str, body: Any = None) -> tuple[int, Any]:
    return http_json("POST", f"{base}/emulator/v1/{path}", body)


def set_state(base: str, token: str, body: dict) -> dict:
    status, resp = post(base, f"devices/{quote_token(token)}/state", body)
    assert status == 200, f"POST state {body} -> {status} {resp!r}"
    return resp


def clock(base: str) -> dict:
    status, body = http_json("GET", f"{base}/emulator/v1/clock")
    assert status == 200, f"GET /emulator/v1/clock -> {status} {body!r}"
    return body


def advance(base: str, seconds: float) -> dict:
    status, body = post(base, "clock/advance", {"seconds": seconds})
    assert status == 200, f"POST /emulator/v1/clock/advance -> {status} {body!r}"
    return body


def outbound(base: str, sender: str | None = None) -> list[dict]:
    status, body = http_json("GET", f"{base}/emulator/v1/outbound")
    assert status == 200, f"GET /emulator/v1/outbound -> {status} {body!r}"
    items = body["outbound"]
    return [o for o in items if sender is None or o.get("sender_id") == sender]


def wait_outbound(base: str, sender: str, pred: Callable[[list[dict]], bool], what: str,
                  timeout: float = POLL_TIMEOUT) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        items = outbound(base, sender)
        if pred(items):
            return items
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout}s; outbound for {sender}: {items!r}")
        time.sleep(0.1)


def tray(base: str, token: str) -> list[dict]:
    status, body = http_json("GET", f"{base}/emulator/v1/devices/{quote_token(token)}/tray")
    assert status == 200, f"GET tray -> {status} {body!r}"
    return body["tray"]


# ---- app server (raw XMPP) -----------------------------------------------------------------------

def app_server(srv, sender: str, key: str, resource: str = "test") -> XmppConn:
    c = XmppConn(srv.ccs_port, srv.ca_cert)
    try:
        c.login(sender, key, resource=resource)
    except Exception:
        c.close()
        raise
    return c


def data_msg(token: str, mid: str, **fields) -> dict:
    """A downstream data message tagged with data.n = mid (what the device prints lets us find it)."""
    body = {"to": token, "message_id": mid, "data": {"n": mid}}
    body.update(fields)
    return body


def send_ack(c: XmppConn, payload: dict, timeout: float = 15.0) -> dict:
    """Sends one downstream message; asserts it is ACKed; returns the ACK."""
    resp, item = c.downstream(payload, timeout=timeout)
    assert resp.get("message_type") == "ack", f"expected an ACK for {payload!r}, got {item.raw}"
    return resp


def send_nack(c: XmppConn, payload: dict, timeout: float = 15.0) -> dict:
    resp, item = c.downstream(payload, timeout=timeout)
    assert resp.get("message_type") == "nack", f"expected a NACK for {payload!r}, got {item.raw}"
    return resp


def send_many_acked(c: XmppConn, payloads: list[dict], timeout: float = 30.0) -> None:
    """Pipelines the messages (one write), then waits for an ACK for every one of them."""
    want = {p["message_id"] for p in payloads}
    c.send("".join(gcm_stanza(p) for p in payloads))
    deadline = time.monotonic() + timeout
    while want:
        item = c.next_element(max(deadline - time.monotonic(), 0.0))
        payload = item.gcm()
        assert payload is not None, f"unexpected stanza while waiting for ACKs: {item!r}"
        mid = payload.get("message_id")
        assert mid in want, f"unexpected answer: {item.raw}"
        assert payload.get("message_type") == "ack", f"expected an ACK: {item.raw}"
        want.discard(mid)


# ---- device CLI ----------------------------------------------------------------------------------

def is_msg(n: str | None = None, event: str = "message") -> Callable[[dict], bool]:
    """Matches a printed message event (optionally the one tagged data.n == n)."""
    def pred(e: dict) -> bool:
        if e.get("event") != event:
            return False
        if n is None:
            return True
        return ((e.get("message") or {}).get("data") or {}).get("n") == n
    return pred


def tags(events: Iterable[dict]) -> list[str]:
    """data.n of every message/notification event (in order)."""
    out = []
    for e in events:
        if e.get("event") in ("message", "notification"):
            n = ((e.get("message") or {}).get("data") or {}).get("n")
            out.append(n if n is not None else json.dumps(e.get("message"), sort_keys=True))
    return out


def printed_tags(dev: DeviceCLI) -> list[str]:
    """Every message/notification the device has printed so far (consumed or not)."""
    return tags(dev.events)


def start_device(devices, srv, app: str, senders: list[str], **kw) -> tuple[DeviceCLI, str]:
    """Starts a device CLI, waits for registered + connected; returns (cli, token)."""
    dev = devices(srv, app, senders, **kw)
    token = kw.get("token") or dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    return dev, token


_GO_EVENT = {"offline": "offline", "online": "connected", "uninstall": "uninstalled"}


def go(dev: DeviceCLI, state: str, timeout: float = 20.0) -> dict:
    """Sends {"go": state} and waits for its confirmation event (a `state` event for the four states)."""
    dev.send({"go": state})
    if state in ("foreground", "background", "idle", "active"):
        ev = dev.expect(lambda e: e.get("event") in ("state", "error"), timeout)
        assert ev.get("event") == "state", f'{{"go":"{state}"}} -> {ev!r}'
        return ev
    if state == "reinstall":
        ev = dev.expect(lambda e: e.get("event") in ("registered", "error"), timeout)
        assert ev.get("event") == "registered", f'{{"go":"reinstall"}} -> {ev!r}'
        dev.expect("connected", timeout)
        return ev
    ev = dev.expect(lambda e: e.get("event") in (_GO_EVENT[state], "error"), timeout)
    assert ev.get("event") == _GO_EVENT[state], f'{{"go":"{state}"}} -> {ev!r}'
    return ev


def barrier(c: XmppConn, dev: DeviceCLI, token: str, mid: str, **fields) -> dict:
    """Sends a message that must be delivered now and waits until the device prints it."""
    send_ack(c, data_msg(token, mid, priority="high", **fields))
    return dev.expect(is_msg(mid), timeout=20)


def assert_not_printed(dev: DeviceCLI, forbidden: Iterable[str], extra_wait: float = 0.5) -> None:
    """After a barrier: none of the forbidden tags was printed (also reads what arrives in extra_wait)."""
    dev.drain(extra_wait, predicate=lambda e: False)  # pull without consuming
    seen = set(printed_tags(dev)) & set(forbidden)
    assert not seen, f"device printed messages it must never get: {sorted(seen)}; events: {dev.events[-30:]!r}"


def gcm_ids(c: XmppConn, wait: float = 0.5) -> list[str]:
    """message_id of every <gcm> stanza the connection has received (reads for `wait` more seconds)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            c.next_item(max(deadline - time.monotonic(), 0.01))
        except AssertionError:
            break
    return [i.gcm().get("message_id") for i in c.items if i.kind == "element" and i.gcm() is not None]
