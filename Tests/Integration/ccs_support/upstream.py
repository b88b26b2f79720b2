"""Helpers for the upstream tests (device → CCS → app server, spec §4, §5, §1.7 draining).

Two app-server clients with one interface (`AppServerClient`):

* `SlixAppServer` — slixmpp, a real XMPP client, running its asyncio loop on a thread of its
  own so the synchronous tests can drive it; optionally it ACKs every upstream message the
  moment it arrives, as a real app server does.
* `RawAppServer` — the raw TLS client from xmpp.py, for byte-exact checks of what the server writes.

Both file what arrives: upstream messages (in arrival order, redeliveries included), ACK/NACK
answers by message_id, CONNECTION_DRAINING control messages, stanza errors and stream errors.
`barrier()` sends a downstream message to a token that cannot exist and waits for its NACK:
the server handles a connection's stanzas in order, so once that NACK is back, every ACK sent
before it has been processed.

Plus: device-CLI upstream helpers, the admin API's outbound list / clock / drain, and a raw
device-channel login (to send upstream JSON the device CLI would never produce).
"""

from __future__ import annotations

import asyncio
import base64
import gc
import itertools
import json
import queue
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .admin_api import http_json, list_connections
from .device import DeviceCLI
from .xmpp import (
    BIND_NS, CLIENT_NS, GCM_NS, SASL_NS, SESSION_NS, STREAM_NS, XmppConn, gcm_stanza, q,
)

GCM_DOMAIN = "gcm.googleapis.com"
NO_SUCH_TOKEN = "barrier-no-such-device:APA91bNoSuchDeviceForBarrier"
DRAINING_EXACT = ('<message><data:gcm xmlns:data="google:mobile:data">'
                  '{"message_type":"control","control_type":"CONNECTION_DRAINING"}</data:gcm></message>')
UPSTREAM_HEAD = ('<message to="{sender}@gcm.googleapis.com" from="devices@gcm.googleapis.com" type="normal">'
                 '<gcm xmlns="google:mobile:data">')
UPSTREAM_TAIL = "</gcm></message>"

_ids = itertools.count(1)


# ---- waiting ---------------------------------------------------------------------------------------

def wait_until(pred: Callable[[], bool], timeout: float, what: str | Callable[[], str],
               pump: Iterable["AppServerClient"] = (), step: float = 0.05) -> None:
    """Polls pred (pumping the given clients meanwhile) until it holds; AssertionError after timeout."""
    pump = list(pump)
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return
        if time.monotonic() >= deadline:
            msg = what() if callable(what) else what
            raise AssertionError(f"not within {timeout}s: {msg}")
        if pump:
            for c in pump:
                c.pump(step / len(pump))
        else:
            time.sleep(step)


def settle(clients: Iterable["AppServerClient"], seconds: float) -> None:
    """Keeps reading on every client for `seconds` (to see whether anything more arrives)."""
    clients = list(clients)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in clients:
            c.pump(min(0.05, max(deadline - time.monotonic(), 0.0)))


# ---- what an app server receives -------------------------------------------------------------------

@dataclass
class Received:
    payload: dict | None        # the JSON inside <gcm>, if it parsed
    attrs: dict[str, str]       # attributes of the <message>
    text: str                   # the <gcm> text (entity-decoded)
    raw: str = ""               # exact wire text (raw client only)
    at: float = field(default_factory=time.monotonic)

    @property
    def message_id(self) -> Any:
        return (self.payload or {}).get("message_id")


class AppServerClient:
    """What both clients share: filing of received stanzas and waits over them."""

    name = "app server"

    def __init__(self, sender: str, key: str):
        self.sender = sender
        self.key = key
        self.jid: str | None = None
        self.received: list[Received] = []      # every <message> with a gcm payload, in order
        self.upstream: list[Received] = []      # upstream data messages (no message_type), redeliveries too
        self.responses: dict[str, dict] = {}    # ACK/NACK answers by message_id (last wins)
        self.nacks: list[dict] = []             # every NACK, in order
        self.controls: list[Received] = []      # control messages (CONNECTION_DRAINING)
        self.receipts: list[Received] = []      # delivery receipts (message_type "receipt")
        self.errors: list[Received] = []        # <message type="error"> (stanza errors)
        self.stream_errors: list[str] = []      # raw <stream:error> texts / conditions
        self.other: list[Received] = []         # anything else
        self.closed = False
        self.auto_ack = False

    # -- filing --------------------------------------------------------------------------------------
    def _file(self, rec: Received, may_ack: bool = True) -> None:
        self.received.append(rec)
        p = rec.payload
        if rec.attrs.get("type") == "error":
            self.errors.append(rec)
            return
        if not isinstance(p, dict):
            self.other.append(rec)
            return
        mt = p.get("message_type")
        if mt is None:
            self.upstream.append(rec)
            if may_ack and self.auto_ack and isinstance(p.get("from"), str) and isinstance(p.get("message_id"), str):
                self.ack(p["from"], p["message_id"])
        elif mt in ("ack", "nack"):
            mid = p.get("message_id")
            self.responses[mid if isinstance(mid, str) else json.dumps(mid)] = p
            if mt == "nack":
                self.nacks.append(p)
        elif mt == "control":
            self.controls.append(rec)
        elif mt == "receipt":
            self.receipts.append(rec)
        else:
            self.other.append(rec)

    def pump(self, timeout: float) -> bool:
        """Files at most one arrival, waiting up to timeout; False if nothing came."""
        raise NotImplementedError

    def pump_all(self, timeout: float = 0.0) -> None:
        deadline = time.monotonic() + timeout
        while self.pump(max(deadline - time.monotonic(), 0.0)):
            pass

    def wait(self, pred: Callable[[], bool], timeout: float, what: str) -> None:
        wait_until(pred, timeout, lambda: f"{self.name}: {what}; {self.summary()}", pump=[self])

    def summary(self) -> str:
        return (f"upstream ids={self.upstream_ids()[-30:]} ({len(self.upstream)}), "
                f"responses={list(self.responses.items())[-5:]}, controls={len(self.controls)}, "
                f"errors={[e.raw or e.text for e in self.errors][-3:]}, stream_errors={self.stream_errors}, "
                f"closed={self.closed}")

    # -- upstream --------------------------------------------------------------------------------------
    def upstream_ids(self) -> list:
        return [r.message_id for r in self.upstream]

    def wait_upstream(self, n: int, timeout: float = 20.0) -> list[Received]:
        """Waits until at least n upstream messages (counting redeliveries) have arrived; returns all."""
        self.wait(lambda: len(self.upstream) >= n, timeout, f"waiting for {n} upstream messages")
        return list(self.upstream)

    def wait_upstream_id(self, message_id: str, count: int = 1, timeout: float = 20.0) -> Received:
        """Waits until message_id arrived `count` times; returns its latest copy."""
        self.wait(lambda: self.upstream_ids().count(message_id) >= count, timeout,
                  f"waiting for upstream {message_id!r} x{count}")
        return [r for r in self.upstream if r.message_id == message_id][-1]

    # -- sending ---------------------------------------------------------------------------------------
    def send_json(self, payload: dict | str) -> None:
        raise NotImplementedError

    def ack(self, token: str, message_id: Any) -> None:
        self.send_json({"to": token, "message_id": message_id, "message_type": "ack"})

    def ack_all(self, recs: Iterable[Received]) -> None:
        for r in recs:
            self.ack(r.payload["from"], r.payload["message_id"])

    def response(self, message_id: str, timeout: float = 15.0) -> dict:
        self.wait(lambda: message_id in self.responses, timeout, f"waiting for the ACK/NACK of {message_id!r}")
        return self.responses[message_id]

    def downstream(self, token: str, message_id: str, data: dict | None = None, timeout: float = 15.0) -> dict:
        self.send_json({"to": token, "message_id": message_id, "data": data or {"m": message_id}})
        return self.response(message_id, timeout)

    def barrier(self, timeout: float = 15.0) -> dict:
        """A downstream message the server must NACK; once its NACK is back, everything sent on this
        connection before it has been handled. Returns the NACK."""
        mid = f"barrier-{next(_ids)}"
        self.send_json({"to": NO_SUCH_TOKEN, "message_id": mid, "data": {"barrier": "1"}})
        resp = self.response(mid, timeout)
        assert resp.get("message_type") == "nack", f"barrier message was not NACKed: {resp}"
        return resp

    def close(self) -> None:
        raise NotImplementedError


# ---- slixmpp ---------------------------------------------------------------------------------------

_slix_registered = False


def register_gcm_plugin() -> None:
    """<gcm xmlns="google:mobile:data"> as a slixmpp stanza plugin: msg["gcm"]["json"]."""
    global _slix_registered
    if _slix_registered:
        return
    from slixmpp import Message
    from slixmpp.xmlstream import ElementBase, register_stanza_plugin

    class Gcm(ElementBase):
        name = "gcm"
        namespace = GCM_NS
        plugin_attrib = "gcm"
        interfaces = {"json"}

        def get_json(self):
            return self.xml.text or ""

        def set_json(self, value):
            self.xml.text = value

        def del_json(self):
            self.xml.text = None

    register_stanza_plugin(Message, Gcm)
    _slix_registered = True


class SlixAppServer(AppServerClient):
    """An app server on slixmpp (direct TLS, SASL PLAIN, bind, session), on its own thread."""

    def __init__(self, port: int, ca_cert: str, sender: str, key: str, *, resource: str | None = None,
                 auto_ack: bool = False, name: str = "slixmpp", connect_timeout: float = 20.0):
        super().__init__(sender, key)
        self.name = name
        self.auto_ack = auto_ack
        self._inbox: queue.Queue = queue.Queue()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"slix-{name}", daemon=True)
        self._thread.start()
        self.client = None
        jid = f"{sender}@{GCM_DOMAIN}" + (f"/{resource}" if resource else "")
        try:
            self.jid = self._call(self._connect(jid, port, ca_cert, connect_timeout), connect_timeout + 5)
        except BaseException:
            self.close()
            raise

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _call(self, coro, timeout: float):
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except BaseException:
            fut.cancel()
            raise

    async def _connect(self, jid: str, port: int, ca_cert: str, timeout: float) -> str:
        import slixmpp
        from slixmpp.xmlstream.handler import Callback
        from slixmpp.xmlstream.matcher import MatchXPath

        register_gcm_plugin()
        client = slixmpp.ClientXMPP(jid, self.key)
        client.enable_direct_tls = True       # CCS speaks TLS from the first byte
        client.enable_starttls = False
        client.enable_plaintext = False
        client.ca_certs = Path(ca_cert)       # verified against gcm.googleapis.com
        client.use_ipv6 = False
        client.whitespace_keepalive = False
        self.client = client

        loop = asyncio.get_running_loop()
        started = loop.create_future()

        def settle_started(value=None, exc=None):
            if not started.done():
                started.set_exception(exc) if exc else started.set_result(value)

        client.add_event_handler("session_start", lambda _ev: settle_started(True))
        client.add_event_handler("failed_auth", lambda _ev: settle_started(exc=AssertionError("slixmpp: SASL failed")))
        client.add_event_handler("connection_failed",
                                 lambda ev: settle_started(exc=AssertionError(f"slixmpp: connection failed: {ev}")))
        client.add_event_handler("disconnected", self._on_disconnected)
        client.add_event_handler("stream_error", self._on_stream_error)
        # slixmpp's "message" event wants a <body>: match message/gcm directly (both gcm and data:gcm).
        client.register_handler(Callback("CCS gcm", MatchXPath(f"{{{CLIENT_NS}}}message/{{{GCM_NS}}}gcm"),
                                         self._on_gcm))
        client.connect(host="127.0.0.1", port=port)
        try:
            await asyncio.wait_for(started, timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"slixmpp: no session within {timeout}s") from None
        return str(client.boundjid)

    # Runs on the slixmpp thread.
    def _on_gcm(self, msg) -> None:
        el = msg.xml.find(f"{{{GCM_NS}}}gcm")
        text = (el.text or "") if el is not None else ""
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        rec = Received(payload, dict(msg.xml.attrib), text)
        if (self.auto_ack and rec.attrs.get("type") != "error" and isinstance(payload, dict)
                and "message_type" not in payload and isinstance(payload.get("from"), str)
                and isinstance(payload.get("message_id"), str)):
            self._send_now(json.dumps({"to": payload["from"], "message_id": payload["message_id"],
                                       "message_type": "ack"}))
        self._inbox.put(("gcm", rec))

    def _on_disconnected(self, reason) -> None:
        self._inbox.put(("disconnected", reason))

    def _on_stream_error(self, error) -> None:
        self._inbox.put(("stream_error", f"{error['condition']}: {error['text']}"))

    def _send_now(self, text: str) -> None:
        """On the slixmpp thread: one <message> with a <gcm> payload, built with the stanza plugin."""
        client = self.client
        if client is None:
            return
        msg = client.Message()
        msg["id"] = f"slix-{next(_ids)}"
        msg["gcm"]["json"] = text
        msg.send()

    def pump(self, timeout: float) -> bool:
        try:
            kind, item = self._inbox.get(timeout=max(timeout, 0.0)) if timeout > 0 else self._inbox.get_nowait()
        except queue.Empty:
            return False
        if kind == "gcm":
            self._file(item, may_ack=False)  # auto-ACKs went out on the slixmpp thread already
        elif kind == "disconnected":
            self.closed = True
        elif kind == "stream_error":
            self.stream_errors.append(item)
        return True

    def send_json(self, payload: dict | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self._loop.call_soon_threadsafe(self._send_now, text)

    def abort(self) -> None:
        """Drops the TCP connection without closing the stream."""
        if self.client is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self.client.abort)

    def disconnect(self, timeout: float = 5.0) -> None:
        """Closes the stream (</stream:stream>) and waits for the server to close."""
        if self.client is None or not self._loop.is_running():
            return

        async def _disc():
            await self.client.disconnect(wait=2.0)

        try:
            self._call(_disc(), timeout)
        except Exception:
            self.abort()

    def wait_closed(self, timeout: float = 20.0) -> None:
        self.wait(lambda: self.closed, timeout, "waiting for the server to close the connection")

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._loop.is_running():
            if self.client is not None and not self.closed:
                try:
                    self.disconnect(3.0)
                except Exception:
                    pass

            async def _cancel_rest():
                me = asyncio.current_task()
                rest = [t for t in asyncio.all_tasks() if t is not me]
                for t in rest:
                    t.cancel()
                await asyncio.gather(*rest, return_exceptions=True)

            try:
                self._call(_cancel_rest(), 5)
            except Exception:
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._loop.is_running():
            # slixmpp's XMLStream.__del__ schedules on its loop: let it go while the loop is open.
            self.client = None
            gc.collect()
            try:
                self._loop.close()
            except Exception:
                pass


# ---- raw TLS ----------------------------------------------------------------------------------------

class RawAppServer(AppServerClient):
    """An app server on the raw client (xmpp.py): keeps the exact text of every stanza."""

    def __init__(self, port: int, ca_cert: str, sender: str, key: str, *, resource: str | None = None,
                 name: str = "raw", auto_ack: bool = False):
        super().__init__(sender, key)
        self.name = name
        self.auto_ack = auto_ack
        self.conn = XmppConn(port, ca_cert)
        try:
            # Upstream traffic may start right after bind, before the (optional) session iq is
            # answered: send the session iq without waiting for its result, pump() files it.
            self.jid = self.conn.login(sender, key, resource=resource, session=False)
            self.conn.send(f'<iq type="set" id="sess_1"><session xmlns="{SESSION_NS}"/></iq>')
        except BaseException:
            self.conn.close()
            raise

    def pump(self, timeout: float) -> bool:
        if self.closed:
            if timeout > 0:
                time.sleep(min(timeout, 0.05))
            return False
        try:
            item = self.conn.next_item(timeout=max(timeout, 0.001))
        except AssertionError:  # ServerClosed included
            if self.conn.eof:
                self._server_closed()
                return True
            return False  # timeout
        if item.kind == "close":
            self._server_closed()
            return True
        if item.kind != "element":
            return True
        el = item.elem
        if el.tag == q(STREAM_NS, "error"):
            self.stream_errors.append(item.raw)
            return True
        if el.tag != q(CLIENT_NS, "message"):
            self.other.append(Received(None, dict(el.attrib), "", item.raw))
            return True
        g = el.find(q(GCM_NS, "gcm"))
        if g is None:
            self.other.append(Received(None, dict(el.attrib), "", item.raw))
            return True
        text = g.text or ""
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        self._file(Received(payload, dict(el.attrib), text, item.raw))
        return True

    def _server_closed(self) -> None:
        """As a well-behaved client does: the server ended the stream, so close the socket."""
        self.closed = True
        try:
            self.conn.sock.close()
        except Exception:
            pass

    def send_json(self, payload: dict | str) -> None:
        self.conn.send(gcm_stanza(payload, stanza_id=f"raw-{next(_ids)}"))

    def wait_closed(self, timeout: float = 20.0) -> None:
        self.wait(lambda: self.closed, timeout, "waiting for the server to close the connection")

    def close(self) -> None:
        self.conn.close()
        self.closed = True


# ---- devices --------------------------------------------------------------------------------------

def start_device(devices, srv, app: str, senders: list[str]) -> tuple[DeviceCLI, str]:
    """A device CLI, registered and connected; returns (cli, token)."""
    dev = devices(srv, app, senders)
    token = dev.expect("registered", timeout=30)["token"]
    dev.expect("connected", timeout=30)
    return dev, token


def send_upstream(dev: DeviceCLI, message_id: str, data: dict | None = None,
                  time_to_live: int | None = None, to: str | None = None) -> None:
    body: dict[str, Any] = {"data": {"n": message_id} if data is None else data, "message_id": message_id}
    if time_to_live is not None:
        body["time_to_live"] = time_to_live
    if to is not None:
        body["to"] = to
    dev.send({"upstream": body})


def expect_sent(dev: DeviceCLI, message_ids: Iterable[str], timeout: float = 30.0) -> None:
    """Waits for a `sent` event for every id; fails on any send_error for them."""
    want = set(message_ids)
    got = dev.collect(lambda e: e.get("event") in ("sent", "send_error") and e.get("message_id") in want,
                      quiet=timeout, timeout=timeout,
                      until=lambda evs: {e["message_id"] for e in evs} >= want)
    errors = [e for e in got if e["event"] != "sent"]
    assert not errors, f"device send_error for upstream messages: {errors[:5]}"
    missing = want - {e["message_id"] for e in got}
    assert not missing, (f"no `sent` within {timeout}s for {len(missing)} upstream messages, e.g. "
                         f"{sorted(missing)[:5]}; stderr: {dev.stderr_tail()!r}")


def send_many(dev: DeviceCLI, ids: list[str], timeout: float = 40.0, **kw) -> None:
    for mid in ids:
        send_upstream(dev, mid, **kw)
    expect_sent(dev, ids, timeout)


# ---- admin API --------------------------------------------------------------------------------------

def outbound(base: str, sender: str | None = None) -> list[dict]:
    status, body = http_json("GET", f"{base}/emulator/v1/outbound")
    assert status == 200, f"GET /emulator/v1/outbound -> {status} {body!r}"
    items = body["outbound"]
    return [o for o in items if sender is None or o.get("sender_id") == sender]


def outbound_ids(base: str, sender: str) -> dict[str, str | None]:
    """message_id → connection_id (None while waiting for a window) for the sender's outbound."""
    return {o["message_id"]: o.get("connection_id") for o in outbound(base, sender)}


def advance_clock(base: str, seconds: float) -> dict:
    status, body = http_json("POST", f"{base}/emulator/v1/clock/advance", {"seconds": seconds})
    assert status == 200, f"POST /emulator/v1/clock/advance -> {status} {body!r}"
    return body


def drain(base: str, connection_id: str) -> None:
    status, body = http_json("POST", f"{base}/emulator/v1/connections/{urllib.parse.quote(connection_id)}/drain")
    assert status == 202, f"drain {connection_id} -> {status} {body!r}"


def connection_id(base: str, jid: str, timeout: float = 10.0) -> str:
    """The admin API's id of the connection bound to this full JID."""
    found: list[str] = []

    def look() -> bool:
        found[:] = [c["id"] for c in list_connections(base) if c.get("jid") == jid]
        return bool(found)

    wait_until(look, timeout, lambda: f"no connection with jid {jid!r} in {list_connections(base)}")
    assert len(found) == 1, found
    return found[0]


def sender_connections(base: str, sender: str) -> list[dict]:
    return [c for c in list_connections(base) if c.get("sender_id") == sender]


# ---- raw device channel ---------------------------------------------------------------------------

class RawDevice:
    """The device channel spoken by hand (stream, SASL PLAIN device_id/secret, bind)."""

    DOMAIN = "devices.ccs-emulator"

    def __init__(self, srv, registration: dict):
        self.token = registration["token"]
        self.conn = XmppConn(srv.device_port, srv.ca_cert)
        c = self.conn
        c.open_stream(self.DOMAIN)
        payload = f"\0{registration['device_id']}\0{registration['device_secret']}".encode()
        c.send(f'<auth xmlns="{SASL_NS}" mechanism="PLAIN">{base64.b64encode(payload).decode()}</auth>')
        res = c.next_element()
        assert res.tag == q(SASL_NS, "success"), f"device SASL failed: {res!r}"
        c.open_stream(self.DOMAIN)
        c.send(f'<iq type="set" id="bind-1"><bind xmlns="{BIND_NS}"><resource>device</resource></bind></iq>')
        bound = c.next_element()
        assert bound.elem.get("type") == "result", f"device bind failed: {bound!r}"

    def upstream(self, payload: dict | str, timeout: float = 15.0) -> dict:
        """Sends one upstream message; returns the server's answer ({"message_type":"sent"|"send_error",…})."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self.conn.send(f'<message><gcm xmlns="{GCM_NS}">{_xml_text(text)}</gcm></message>')
        mid = payload.get("message_id") if isinstance(payload, dict) else None
        deadline = time.monotonic() + timeout
        while True:
            item = self.conn.next_element(max(deadline - time.monotonic(), 0.0))
            p = item.gcm()
            if p and p.get("message_type") in ("sent", "send_error") and (mid is None or p.get("message_id") == mid):
                return p

    def close(self) -> None:
        self.conn.close()


def _xml_text(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


__all__ = [
    "AppServerClient", "DRAINING_EXACT", "NO_SUCH_TOKEN", "RawAppServer", "RawDevice", "Received",
    "SlixAppServer", "UPSTREAM_HEAD", "UPSTREAM_TAIL", "advance_clock", "connection_id", "drain",
    "expect_sent", "outbound", "outbound_ids", "send_many", "send_upstream", "sender_connections",
    "settle", "start_device", "wait_until",
]
