#!/usr/bin/env python3
"""A small CCS app server on slixmpp that follows the conformance runner's contract
(docs/conformance.md, "The contract"), in two manners:

  sample_app_server.py                  careful: keeps every client obligation of CCS; passes the built-in suite
  sample_app_server.py --careless       careless on purpose in every way below: fails the built-in suite
  sample_app_server.py --break A,B,...  careless in those ways only: ack-upstream, ack-receipts,
                                        pending-limit, drain, retry-backoff, no-resend-acked,
                                        drop-unregistered, use-canonical-id, resend-lost

Environment (set by `ccs-emulator conformance run`): CCS_HOST, CCS_PORT, CCS_SENDER_ID, CCS_SERVER_KEY,
CCS_CA_FILE. Test mode: an upstream message whose data has send_to: TOKEN makes it send one downstream
message to TOKEN (with a delivery receipt requested). One line per event on stderr. SIGTERM ends it.

Requirements: Python 3.9-3.11 and slixmpp, in requirements.txt beside this file (./scripts/setup
installs them into .venv/).

Each careless behaviour is marked CARELESS with the rule it breaks; the section numbers (§N) are the
CCS sections docs/sources.md maps to Google's public documents;
`--break` lets a test break one rule at a time and see exactly the scenario that judges it fail.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import signal
import sys
from pathlib import Path
from xml.sax.saxutils import escape

import slixmpp
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

GCM = "google:mobile:data"
CLIENT = "jabber:client"
WINDOW = 100                     # unanswered downstream messages per connection (§4)
RETRYABLE = {"SERVICE_UNAVAILABLE", "INTERNAL_SERVER_ERROR", "DEVICE_MESSAGE_RATE_EXCEEDED",
             "TOPICS_MESSAGE_RATE_EXCEEDED", "QUOTA_EXCEEDED"}
MAX_ATTEMPTS = 6
WAYS = ("ack-upstream", "ack-receipts", "pending-limit", "drain", "retry-backoff", "no-resend-acked",
        "drop-unregistered", "use-canonical-id", "resend-lost")


def log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


class Connection:
    """One CCS connection: TLS from the first byte, SASL PLAIN, bind."""

    def __init__(self, server: "AppServer", number: int):
        self.server = server
        self.number = number
        self.pending: dict[str, dict] = {}   # sent, not yet ACKed or NACKed
        self.ready = False
        self.draining = False
        self.closed = False
        env = server.env
        client = slixmpp.ClientXMPP(f"{env['CCS_SENDER_ID']}@gcm.googleapis.com", env["CCS_SERVER_KEY"])
        client.enable_direct_tls = True
        client.enable_starttls = False
        client.enable_plaintext = False
        client.ca_certs = Path(env["CCS_CA_FILE"])
        client.use_ipv6 = False
        client.whitespace_keepalive = False
        # slixmpp's "message" event wants a <body>; CCS messages carry <gcm> (or <data:gcm>) instead.
        client.register_handler(Callback("gcm", MatchXPath(f"{{{CLIENT}}}message/{{{GCM}}}gcm"), self.on_gcm))
        client.add_event_handler("session_start", self.on_session)
        client.add_event_handler("disconnected", self.on_disconnected)
        client.add_event_handler("failed_auth", lambda _: log(f"conn {number}: SASL refused"))
        self.client = client
        client.connect(host=env["CCS_HOST"], port=int(env["CCS_PORT"]))

    def send(self, payload: dict) -> None:
        self.client.send_raw('<message><gcm xmlns="google:mobile:data">' + escape(json.dumps(payload)) + "</gcm></message>")

    def ack(self, payload: dict) -> None:
        self.send({"to": payload.get("from"), "message_id": payload["message_id"], "message_type": "ack"})

    def on_session(self, _event) -> None:
        self.ready = True
        log(f"conn {self.number}: session started")
        self.server.connected(self)

    def on_disconnected(self, _reason) -> None:
        if self.closed:
            return
        self.closed = True
        log(f"conn {self.number}: closed with {len(self.pending)} unanswered")
        self.server.lost(self)

    def on_gcm(self, msg) -> None:
        element = msg.xml.find(f"{{{GCM}}}gcm")
        try:
            payload = json.loads(element.text or "")
        except ValueError:
            log(f"conn {self.number}: not JSON: {element.text!r}")
            return
        if msg.xml.get("type") == "error":
            log(f"conn {self.number}: stanza error: {payload}")  # a bug of ours: logged, not retried
            return
        kind = payload.get("message_type")
        if kind == "ack":
            self.server.acked(self, payload)
        elif kind == "nack":
            self.server.nacked(self, payload)
        elif kind == "control":
            self.server.control(self, payload)
        elif kind == "receipt":
            self.server.receipt(self, payload)
        elif kind is None:
            self.server.upstream(self, payload)


class AppServer:
    def __init__(self, env: dict, broken: set[str]):
        self.env = env
        self.broken = broken
        self.connections: list[Connection] = []
        self.active: Connection | None = None
        self.waiting: collections.deque[dict] = collections.deque()   # not yet sent
        self.ids = itertools.count(1)
        self.attempts: dict[str, int] = {}
        self.forgotten: set[str] = set()
        self.canonical: dict[str, str] = {}

    def open_connection(self) -> None:
        self.connections.append(Connection(self, len(self.connections) + 1))

    def connected(self, conn: Connection) -> None:
        if not conn.draining:
            self.active = conn
        self.pump()

    def lost(self, conn: Connection) -> None:
        unanswered = list(conn.pending.values())
        conn.pending.clear()
        # No ACK or NACK came: the messages may not have arrived; send them again, same ids (§4).
        if "resend-lost" not in self.broken:
            self.waiting.extendleft(reversed(unanswered))
        # CARELESS (resend-lost): what was unanswered is forgotten.
        if conn is self.active:
            self.active = None
            self.open_connection()   # reconnect at once after a lost connection (§1.7)
        self.pump()

    def pump(self) -> None:
        conn = self.active
        while conn and conn.ready and not conn.closed and self.waiting:
            if "pending-limit" not in self.broken and len(conn.pending) >= WINDOW:
                return  # never more than 100 unanswered (§4)
            # CARELESS (pending-limit): sends whatever it has at once.
            if conn.draining:
                return  # nothing new on a draining connection (§1.7)
            payload = self.waiting.popleft()
            token = self.canonical.get(payload["to"], payload["to"])
            if token in self.forgotten:
                log(f"not sending {payload['message_id']}: {token[:16]}… is unregistered")
                continue
            payload["to"] = token
            conn.pending[payload["message_id"]] = payload
            conn.send(payload)

    def submit(self, payload: dict) -> None:
        self.waiting.append(payload)
        self.pump()

    # -- from CCS ------------------------------------------------------------------------------

    def upstream(self, conn: Connection, payload: dict) -> None:
        if "ack-upstream" not in self.broken:
            conn.ack(payload)  # on the connection that delivered it (§4, §5.1)
        # CARELESS (ack-upstream): never ACKs upstream messages.
        token = (payload.get("data") or {}).get("send_to")
        if not token:
            return
        if "no-resend-acked" in self.broken:
            # CARELESS (no-resend-acked): one id per token, so a second request resends an ACKed id.
            message_id = f"reply-{token[:24]}"
        else:
            message_id = f"sample-{os.getpid()}-{next(self.ids)}"
        self.submit({"to": token, "message_id": message_id, "data": {"reply_to": payload["message_id"]},
                     "delivery_receipt_requested": True})

    def receipt(self, conn: Connection, payload: dict) -> None:
        if "ack-receipts" not in self.broken:
            conn.ack(payload)  # receipts too, with their dr2: id (§5.2)
        # CARELESS (ack-receipts): never ACKs receipts.

    def acked(self, conn: Connection, payload: dict) -> None:
        message_id = payload.get("message_id")
        sent = conn.pending.pop(message_id, None)
        self.attempts.pop(message_id, None)
        canonical = payload.get("registration_id")
        if sent and canonical and "use-canonical-id" not in self.broken:
            self.canonical[sent["to"]] = canonical  # the token to use from now on (§3.1)
        # CARELESS (use-canonical-id): keeps sending to the old token.
        self.pump()

    def nacked(self, conn: Connection, payload: dict) -> None:
        message_id, code = payload.get("message_id"), payload.get("error")
        sent = conn.pending.pop(message_id, None)
        log(f"conn {conn.number}: NACK {code} for {message_id}")
        if sent is None:
            return
        if code in RETRYABLE or code not in KNOWN_CODES:
            attempt = self.attempts.get(message_id, 0) + 1
            self.attempts[message_id] = attempt
            if "retry-backoff" in self.broken:
                # CARELESS (retry-backoff): again at once, up to 20 times.
                if attempt <= 20:
                    self.waiting.appendleft(sent)
            elif attempt < MAX_ATTEMPTS:
                delay = 2 ** (attempt - 1)   # exponential backoff from 1 s (§3.3)
                asyncio.get_running_loop().call_later(delay, self.submit, sent)
            else:
                log(f"giving up on {message_id} after {attempt} attempts")
        elif code == "CONNECTION_DRAINING":
            if "drain" not in self.broken:
                self.waiting.appendleft(sent)  # at once, on the new connection (§1.7)
            else:
                # CARELESS: back onto the same draining connection, up to 20 times.
                attempt = self.attempts.get(message_id, 0) + 1
                self.attempts[message_id] = attempt
                if attempt <= 20:
                    self.waiting.appendleft(sent)
        elif code in ("DEVICE_UNREGISTERED", "BAD_REGISTRATION"):
            if "drop-unregistered" not in self.broken:
                self.forgotten.add(sent["to"])  # never again (§3.3)
            # CARELESS (drop-unregistered): keeps the token.
        self.pump()

    def control(self, conn: Connection, payload: dict) -> None:
        if payload.get("control_type") != "CONNECTION_DRAINING":
            return
        log(f"conn {conn.number}: draining")
        if "drain" in self.broken:
            return  # CARELESS (drain-reconnect, drain-no-send): carries on as if nothing was said.
        conn.draining = True
        # A new connection for new messages; the old one stays open for ACKs and upstream until CCS
        # closes it (§1.7).
        self.active = None
        self.open_connection()


KNOWN_CODES = RETRYABLE | {"BAD_ACK", "BAD_REGISTRATION", "CONNECTION_DRAINING", "DEVICE_UNREGISTERED", "INVALID_JSON"}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--careless", action="store_true", help="break every rule below on purpose")
    parser.add_argument("--break", dest="ways", default="", help="break only these, comma-separated: " + ", ".join(WAYS))
    args = parser.parse_args()
    broken = set(WAYS) if args.careless else {w for w in args.ways.split(",") if w}
    if broken - set(WAYS):
        sys.exit(f"unknown --break: {', '.join(sorted(broken - set(WAYS)))}")
    missing = [k for k in ("CCS_HOST", "CCS_PORT", "CCS_SENDER_ID", "CCS_SERVER_KEY", "CCS_CA_FILE") if not os.environ.get(k)]
    if missing:
        sys.exit(f"missing environment: {', '.join(missing)} (see docs/conformance.md)")
    server = AppServer(dict(os.environ), broken)
    server.open_connection()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for conn in server.connections:
        if not conn.closed:
            conn.closed = True
            conn.client.disconnect()
    log("stopped")


if __name__ == "__main__":
    asyncio.run(main())
