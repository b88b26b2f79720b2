"""A deliberately small XMPP client over ssl + socket, for byte-exact checks of the CCS endpoint.

It keeps the raw text the server sent and cuts it into items: the stream header, each
top-level element (stanza, features, SASL result, stream error) with its exact raw text and
an ElementTree parse of it, and the stream close. Nothing here is lenient on the server's
behalf: the tests decide what to accept.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import ssl
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

STREAM_NS = "http://etherx.jabber.org/streams"
CLIENT_NS = "jabber:client"
SASL_NS = "urn:ietf:params:xml:ns:xmpp-sasl"
BIND_NS = "urn:ietf:params:xml:ns:xmpp-bind"
SESSION_NS = "urn:ietf:params:xml:ns:xmpp-session"
TLS_NS = "urn:ietf:params:xml:ns:xmpp-tls"
STANZAS_NS = "urn:ietf:params:xml:ns:xmpp-stanzas"
STREAMS_NS = "urn:ietf:params:xml:ns:xmpp-streams"
GCM_NS = "google:mobile:data"
PING_NS = "urn:xmpp:ping"
ROSTER_NS = "jabber:iq:roster"

GCM_DOMAIN = "gcm.googleapis.com"

# A tag, with quoted attribute values that may contain '>'.
_TAG_RE = re.compile(r"""<(?:[^>"']|"[^"]*"|'[^']*')*>""")
_ATTR_RE = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def q(ns: str, tag: str) -> str:
    return f"{{{ns}}}{tag}"


def unescape_attr(v: str) -> str:
    return (v.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
             .replace("&apos;", "'").replace("&amp;", "&"))


def parse_attrs(tag: str) -> dict[str, str]:
    """Attributes of a start tag as written (prefixed names kept, e.g. 'xmlns:stream')."""
    inner = tag[1:-1]
    m = re.match(r"\s*[^\s/>]+", inner)
    rest = inner[m.end():] if m else inner
    return {a.group(1): unescape_attr(a.group(2) if a.group(2) is not None else a.group(3))
            for a in _ATTR_RE.finditer(rest)}


def stream_header(to: str | None = GCM_DOMAIN, extra: str = "") -> str:
    to_attr = f' to="{escape(to, {chr(34): "&quot;"})}"' if to is not None else ""
    return (f'<stream:stream{to_attr} version="1.0" xmlns="{CLIENT_NS}" '
            f'xmlns:stream="{STREAM_NS}"{extra}>')


def plain_payload(authzid: str, authcid: str, password: str) -> bytes:
    return f"{authzid}\0{authcid}\0{password}".encode()


def gcm_stanza(payload: dict | str, stanza_id: str | None = "", escape_quotes: bool = False,
               attrs: str = "") -> str:
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    body = escape(text, {'"': "&quot;"}) if escape_quotes else escape(text)
    id_attr = "" if stanza_id is None else f' id="{escape(stanza_id, {chr(34): "&quot;"})}"'
    return f'<message{id_attr}{attrs}><gcm xmlns="{GCM_NS}">{body}</gcm></message>'


@dataclass
class Item:
    kind: str                 # "header" | "element" | "close"
    raw: str
    elem: ET.Element | None = None
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        return self.elem.tag if self.elem is not None else ""

    def gcm(self) -> dict | None:
        """The JSON inside the <gcm> child of a message, or None."""
        if self.elem is None or self.elem.tag != q(CLIENT_NS, "message"):
            return None
        g = self.elem.find(q(GCM_NS, "gcm"))
        if g is None:
            return None
        return json.loads(g.text or "")

    def __repr__(self) -> str:
        return f"Item({self.kind}, {self.raw[:300]!r})"


class ServerClosed(AssertionError):
    pass


class XmppConn:
    """One TLS connection to the CCS port."""

    def __init__(self, port: int, ca_cert: str | None, *, host: str = "127.0.0.1",
                 server_hostname: str = GCM_DOMAIN, timeout: float = 10.0):
        ctx = ssl.create_default_context(cafile=ca_cert) if ca_cert else ssl._create_unverified_context()
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        raw = socket.create_connection((host, port), timeout=timeout)
        try:
            self.sock = ctx.wrap_socket(raw, server_hostname=server_hostname)
        except Exception:
            raw.close()
            raise
        self.timeout = timeout
        self.buf = ""             # received, decoded, not yet consumed
        self.received = ""        # everything received, for diagnostics and byte-exact checks
        self._undecoded = b""
        self.eof = False
        self.eof_error: str | None = None
        self.items: list[Item] = []  # every item cut so far
        self.jid: str | None = None

    # -- bytes -------------------------------------------------------------------------------------
    def send(self, data: str | bytes) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def try_send(self, data: str | bytes) -> bool:
        """Sends, tolerating a server that already closed (returns False then)."""
        try:
            self.send(data)
            return True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return False

    def _recv(self, timeout: float) -> bool:
        """Reads once. True if data arrived; False on timeout or end of stream."""
        if self.eof:
            return False
        self.sock.settimeout(max(timeout, 0.001))
        try:
            chunk = self.sock.recv(65536)
        except (socket.timeout, TimeoutError):
            return False
        except ssl.SSLWantReadError:
            return False
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError) as e:
            self.eof, self.eof_error = True, f"{type(e).__name__}: {e}"
            return False
        if not chunk:
            self.eof = True
            return False
        data = self._undecoded + chunk
        try:
            text = data.decode("utf-8")
            self._undecoded = b""
        except UnicodeDecodeError as e:
            if e.start >= len(data) - 3:
                text, self._undecoded = data[:e.start].decode("utf-8"), data[e.start:]
            else:
                raise
        self.buf += text
        self.received += text
        return True

    def read_until(self, needle: str, timeout: float | None = None) -> str:
        """Consumes and returns the text up to and including `needle`."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while needle not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                raise ServerClosed(f"{needle!r} not received (eof={self.eof} {self.eof_error or ''}); "
                                   f"pending text: {self.buf[-2000:]!r}") if self.eof else \
                    AssertionError(f"{needle!r} not received within timeout; pending text: {self.buf[-2000:]!r}")
            self._recv(left)
        i = self.buf.index(needle) + len(needle)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def wait_closed(self, timeout: float | None = None) -> str:
        """Reads until the server ends the connection; returns the text received meanwhile."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        start = len(self.received)
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"server did not close the connection within the timeout; "
                                     f"received meanwhile: {self.received[start:][-2000:]!r}")
            self._recv(left)
        return self.received[start:]

    def is_open(self, wait: float = 0.3) -> bool:
        """True if the server has not closed within `wait` seconds (data read meanwhile is kept)."""
        deadline = time.monotonic() + wait
        while not self.eof and time.monotonic() < deadline:
            self._recv(deadline - time.monotonic())
        return not self.eof

    # -- items -------------------------------------------------------------------------------------
    def _cut(self) -> Item | None:
        s = self.buf.lstrip()
        if not s:
            return None
        if s.startswith("<?"):
            end = s.find("?>")
            if end < 0:
                return None
            self.buf = s[end + 2:]
            return self._cut()
        m = _TAG_RE.match(s)
        if not m:
            if not s.startswith("<"):
                raise AssertionError(f"unexpected text between stanzas: {s[:200]!r}")
            return None
        first = m.group(0)
        name = re.match(r"</?\s*([^\s/>]+)", first).group(1)
        if first.startswith("</"):
            if name.endswith("stream") or name == "stream":
                self.buf = s[m.end():]
                return Item("close", first)
            raise AssertionError(f"unexpected end tag: {first!r}")
        if name.split(":")[-1] == "stream" and not first.endswith("/>"):
            self.buf = s[m.end():]
            return Item("header", first, attrs=parse_attrs(first))
        depth = 0
        pos = 0
        while True:
            m = _TAG_RE.search(s, pos)
            if not m:
                return None
            t = m.group(0)
            if t.startswith("</"):
                depth -= 1
            elif t.startswith("<?") or t.startswith("<!"):
                pass
            elif not t.endswith("/>"):
                depth += 1
            pos = m.end()
            if depth == 0:
                break
        raw = s[:pos]
        self.buf = s[pos:]
        wrapped = f'<w xmlns="{CLIENT_NS}" xmlns:stream="{STREAM_NS}">{raw}</w>'
        try:
            elem = ET.fromstring(wrapped)[0]
        except ET.ParseError as e:
            raise AssertionError(f"server sent XML that does not parse ({e}): {raw[:500]!r}") from None
        return Item("element", raw, elem)

    def next_item(self, timeout: float | None = None) -> Item:
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            item = self._cut()
            if item is not None:
                self.items.append(item)
                return item
            left = deadline - time.monotonic()
            if self.eof:
                raise ServerClosed(f"server closed the connection ({self.eof_error or 'EOF'}); "
                                   f"pending text: {self.buf[-2000:]!r}")
            if left <= 0:
                raise AssertionError(f"nothing complete received within the timeout; pending text: "
                                     f"{self.buf[-2000:]!r}")
            self._recv(left)

    def next_element(self, timeout: float | None = None) -> Item:
        item = self.next_item(timeout)
        assert item.kind == "element", f"expected a stanza, got {item!r}"
        return item

    def wait_gcm(self, message_id: str | None = None, timeout: float | None = None,
                 skip_other: bool = False) -> tuple[dict, Item]:
        """The next <message> with a <gcm> payload (for message_id if given)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            item = self.next_item(max(deadline - time.monotonic(), 0.0))
            payload = item.gcm() if item.kind == "element" else None
            if payload is not None and (message_id is None or payload.get("message_id") == message_id):
                return payload, item
            if not skip_other:
                raise AssertionError(f"expected the gcm response for {message_id!r}, got {item!r}")

    # -- protocol steps ----------------------------------------------------------------------------
    def open_stream(self, to: str | None = GCM_DOMAIN, *, prefix: str = "",
                    extra: str = "") -> tuple[Item, Item]:
        """Sends a stream header; returns (server header, features)."""
        self.send(prefix + stream_header(to, extra))
        header = self.next_item()
        assert header.kind == "header", f"expected the server's stream header, got {header!r}"
        features = self.next_element()
        assert features.tag == q(STREAM_NS, "features"), f"expected stream features, got {features!r}"
        return header, features

    def auth_plain(self, payload: bytes, mechanism: str = "PLAIN") -> Item:
        b64 = base64.b64encode(payload).decode() if payload else "="
        self.send(f'<auth xmlns="{SASL_NS}" mechanism="{mechanism}">{b64}</auth>')
        return self.next_element()

    def bind(self, resource: str | None = None, iq_id: str = "bind_1") -> Item:
        res = f"<resource>{escape(resource)}</resource>" if resource is not None else ""
        self.send(f'<iq type="set" id="{iq_id}"><bind xmlns="{BIND_NS}">{res}</bind></iq>')
        return self.next_element()

    def login(self, sender: str, key: str, *, resource: str | None = "test",
              session: bool = True, to: str = GCM_DOMAIN) -> str:
        """Stream, SASL PLAIN as SENDER@gcm.googleapis.com, restart, bind, session. Returns the JID."""
        self.open_stream(to)
        res = self.auth_plain(plain_payload("", f"{sender}@{GCM_DOMAIN}", key))
        assert res.tag == q(SASL_NS, "success"), f"SASL PLAIN failed: {res!r}"
        _, feats = self.open_stream(to)
        assert feats.elem.find(q(BIND_NS, "bind")) is not None, f"no bind feature: {feats!r}"
        bound = self.bind(resource)
        assert bound.elem.get("type") == "result" and bound.elem.get("id") == "bind_1", f"bind: {bound!r}"
        jid_el = bound.elem.find(f"{q(BIND_NS, 'bind')}/{q(BIND_NS, 'jid')}")
        assert jid_el is not None and jid_el.text, f"bind result without jid: {bound!r}"
        self.jid = jid_el.text
        if session:
            self.send(f'<iq type="set" id="sess_1"><session xmlns="{SESSION_NS}"/></iq>')
            s = self.next_element()
            assert s.elem.get("type") == "result" and s.elem.get("id") == "sess_1", f"session: {s!r}"
        return self.jid

    def send_gcm(self, payload: dict | str, stanza_id: str | None = "", **kw) -> None:
        self.send(gcm_stanza(payload, stanza_id, **kw))

    def downstream(self, payload: dict | str, message_id: str | None = None,
                   timeout: float | None = None, **kw) -> tuple[dict, Item]:
        """Sends one downstream message and returns its ACK/NACK."""
        if message_id is None and isinstance(payload, dict):
            message_id = payload.get("message_id")
        self.send_gcm(payload, **kw)
        return self.wait_gcm(message_id, timeout)

    def close(self) -> None:
        try:
            if not self.eof:
                self.try_send("</stream:stream>")
        finally:
            try:
                self.sock.close()
            except Exception:
                pass

    def __enter__(self) -> "XmppConn":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
