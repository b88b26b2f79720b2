"""Runs stanza-level transcripts (Fixtures/conformance/transcripts/*.scan, format in the README there)
against a running emulator over TLS, in the spirit of Prosody's scansion."""

from __future__ import annotations

import base64
import json
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from . import new_key, new_sender_id, register_device
from .admin_api import http_json
from .xmpp import CLIENT_NS, GCM_DOMAIN, STREAM_NS, XmppConn, plain_payload, q

WILD = "{*}"
CAPTURE = re.compile(r"^\{=([A-Z_][A-Z0-9_]*)\}$")


class TranscriptFailure(AssertionError):
    pass


@dataclass
class Step:
    line: int
    verb: str
    body: str = ""


@dataclass
class Transcript:
    path: Path
    title: str
    steps: list[Step] = field(default_factory=list)


def parse(path: Path) -> Transcript:
    lines = path.read_text().splitlines()
    title = ""
    steps: list[Step] = []
    for n, raw in enumerate(lines, 1):
        if raw.startswith("#"):
            if not title:
                title = raw.lstrip("# ").strip()
            continue
        if not raw.strip():
            continue
        if raw[0] in " \t":
            if not steps or not steps[-1].verb.endswith(":"):
                raise TranscriptFailure(f"{path.name}:{n}: an indented line belongs after 'sends:' or 'receives:'")
            steps[-1].body += raw.strip()
            continue
        steps.append(Step(n, raw.strip()))
    return Transcript(path, title, steps)


class Runner:
    """One transcript against one server: its own sender, devices and connections."""

    def __init__(self, server, devices_factory):
        self.server = server
        self.devices_factory = devices_factory
        self.vars: dict[str, str] = {"SENDER": new_sender_id(), "KEY": new_key(), "DOMAIN": GCM_DOMAIN}
        self.conns: dict[str, XmppConn] = {}
        self.cli: dict[str, object] = {}

    # -- substitution ------------------------------------------------------------------------------
    def subst(self, text: str) -> str:
        def b64(m: re.Match) -> str:
            inner = self.subst_vars(m.group(1)).replace("\\0", "\0")
            return base64.b64encode(inner.encode()).decode()
        return re.sub(r"\{b64:([^}]*)\}", b64, self.subst_vars(text))

    def subst_vars(self, text: str) -> str:
        def var(m: re.Match) -> str:
            name = m.group(1)
            if name not in self.vars:
                raise TranscriptFailure(f"unknown variable ${name}")
            return self.vars[name]
        return re.sub(r"\$([A-Z_][A-Z0-9_]*)", var, text)

    # -- matching ------------------------------------------------------------------------------------
    def match_value(self, expected: str, actual: str | None, where: str) -> None:
        if expected == WILD:
            return
        m = CAPTURE.match(expected)
        if m:
            self.vars[m.group(1)] = actual or ""
            return
        if (actual or "") != expected:
            raise TranscriptFailure(f"{where}: expected {expected!r}, got {actual!r}")

    def match_json(self, expected, actual, where: str) -> None:
        if isinstance(expected, str) and (expected == WILD or CAPTURE.match(expected)):
            self.match_value(expected, actual if isinstance(actual, str) else json.dumps(actual), where)
            return
        if isinstance(expected, dict):
            if not isinstance(actual, dict):
                raise TranscriptFailure(f"{where}: expected an object, got {actual!r}")
            if set(expected) != set(actual):
                raise TranscriptFailure(f"{where}: keys differ: expected {sorted(expected)}, got {sorted(actual)}")
            for k in expected:
                self.match_json(expected[k], actual[k], f"{where}.{k}")
            return
        if isinstance(expected, list):
            if not isinstance(actual, list) or len(expected) != len(actual):
                raise TranscriptFailure(f"{where}: expected {expected!r}, got {actual!r}")
            for i, (e, a) in enumerate(zip(expected, actual)):
                self.match_json(e, a, f"{where}[{i}]")
            return
        if expected != actual:
            raise TranscriptFailure(f"{where}: expected {expected!r}, got {actual!r}")

    def match_element(self, expected: ET.Element, actual: ET.Element, where: str) -> None:
        if expected.tag != actual.tag:
            raise TranscriptFailure(f"{where}: expected <{expected.tag}>, got <{actual.tag}>")
        where = f"{where}/{expected.tag.split('}')[-1]}"
        if set(expected.attrib) != set(actual.attrib):
            raise TranscriptFailure(f"{where}: attributes differ: expected {sorted(expected.attrib)}, got {sorted(actual.attrib)}")
        for name, value in expected.attrib.items():
            self.match_value(value, actual.attrib.get(name), f"{where}@{name}")
        exp_text, act_text = (expected.text or "").strip(), (actual.text or "").strip()
        if exp_text == WILD and len(expected) == 0:
            return  # <x>{*}</x>: any content, text or children
        if expected.tag == "{google:mobile:data}gcm" and exp_text not in ("", WILD) and not CAPTURE.match(exp_text):
            try:
                actual_json = json.loads(act_text)
            except ValueError:
                raise TranscriptFailure(f"{where}: not JSON: {act_text!r}") from None
            self.match_json(json.loads(exp_text), actual_json, f"{where} JSON")
        else:
            self.match_value(exp_text, act_text, f"{where} text")
        exp_children, act_children = list(expected), list(actual)
        if len(exp_children) != len(act_children):
            raise TranscriptFailure(f"{where}: expected {len(exp_children)} children, got {len(act_children)}: "
                                    f"{[c.tag for c in act_children]}")
        for e, a in zip(exp_children, act_children):
            self.match_element(e, a, where)

    @staticmethod
    def parse_xml(text: str) -> ET.Element:
        wrapped = f'<w xmlns="{CLIENT_NS}" xmlns:stream="{STREAM_NS}">{text}</w>'
        return ET.fromstring(wrapped)[0]

    # -- steps ---------------------------------------------------------------------------------------
    def conn(self, name: str) -> XmppConn:
        if name not in self.conns:
            raise TranscriptFailure(f"'{name}' has not connected")
        return self.conns[name]

    def run(self, t: Transcript) -> None:
        for step in t.steps:
            try:
                self.step(step)
            except TranscriptFailure as e:
                raise TranscriptFailure(f"{t.path.name}:{step.line}: {step.verb} {step.body}\n  {e}") from None
            except AssertionError as e:
                raise TranscriptFailure(f"{t.path.name}:{step.line}: {step.verb} {step.body}\n  {e}") from None

    def step(self, step: Step) -> None:
        words = step.verb.split()
        base = self.server.http_base
        if words[:1] == ["device"]:                      # device NAME [uninstalled]
            name = words[1]
            token = register_device(base, "com.example.transcript", [self.vars["SENDER"]])["token"]
            self.vars[name] = token
            if words[2:] == ["uninstalled"]:
                status, _ = http_json("POST", f"{base}/emulator/v1/devices/{token}/uninstall")
                assert status == 200
            return
        if words[:2] == ["online", "device"]:            # online device NAME: a device CLI, connected
            dev = self.devices_factory(self.server, "com.example.transcript", [self.vars["SENDER"]])
            self.vars[words[2]] = dev.expect("registered", timeout=30)["token"]
            dev.expect("connected", timeout=30)
            self.cli[words[2]] = dev
            return
        if len(words) >= 3 and words[1:3] == ["sends", "upstream"]:   # DEV sends upstream {json}
            dev = self.cli[words[0]]
            body = json.loads(self.subst(step.verb.split("upstream", 1)[1]))
            dev.send({"upstream": body})
            dev.expect(lambda e: e.get("event") == "sent" and e.get("message_id") == body["message_id"], timeout=20)
            return
        if words[:2] == ["admin", "drains"]:             # admin drains: every connection of $SENDER
            status, body = http_json("GET", f"{base}/emulator/v1/connections")
            mine = [c for c in body["connections"] if c["sender_id"] == self.vars["SENDER"]]
            assert mine, "no connection to drain"
            for c in mine:
                status, _ = http_json("POST", f"{base}/emulator/v1/connections/{c['id']}/drain")
                assert status == 202
            return
        if words[1:] == ["connects"]:                    # NAME connects (to the CCS port)
            self.conns[words[0]] = XmppConn(self.server.ccs_port, self.server.ca_cert)
            return
        if words[1:] == ["logs", "in"]:                  # NAME logs in: stream, PLAIN, restart, bind, session
            self.conn(words[0]).login(self.vars["SENDER"], self.vars["KEY"])
            return
        if words[1:] == ["pings"]:                       # a round trip: all before it was read and answered
            c = self.conn(words[0])
            c.send('<iq type="get" id="transcript-ping"><ping xmlns="urn:xmpp:ping"/></iq>')
            item = c.next_element()
            assert item.elem.get("type") == "result" and item.elem.get("id") == "transcript-ping", \
                f"expected the ping's result, got {item.raw[:300]!r}"
            return
        if words[1:] == ["is", "closed"]:                # the server ends the stream and closes
            c = self.conn(words[0])
            deadline = time.monotonic() + 15
            while True:
                try:
                    item = c.next_item(max(0.1, deadline - time.monotonic()))
                except AssertionError as e:
                    if "closed the connection" in str(e):
                        return
                    raise
                if item.kind != "close":
                    raise TranscriptFailure(f"expected the stream to end, got {item.raw[:300]!r}")
        if step.verb.endswith("sends:"):
            self.conn(words[0]).send(self.subst(step.body))
            return
        if step.verb.endswith("receives header:"):
            item = self.conn(words[0]).next_item()
            if item.kind != "header":
                raise TranscriptFailure(f"expected the server's stream header, got {item.raw[:300]!r}")
            expected = dict(re.findall(r'([\w:]+)=["\']([^"\']*)["\']', self.subst(step.body)))
            if set(expected) != set(item.attrs):
                raise TranscriptFailure(f"header attributes differ: expected {sorted(expected)}, got {sorted(item.attrs)}")
            for k, v in expected.items():
                self.match_value(v, item.attrs.get(k), f"header@{k}")
            return
        if step.verb.endswith("receives raw:"):
            item = self.conn(words[0]).next_item()
            pattern = "^" + ".*?".join(re.escape(p) for p in self.subst(step.body).split(WILD)) + "$"
            if not re.match(pattern, item.raw, re.S):
                raise TranscriptFailure(f"expected exactly {step.body!r}, got {item.raw!r}")
            return
        if step.verb.endswith("receives:"):
            item = self.conn(words[0]).next_item()
            if item.kind != "element":
                raise TranscriptFailure(f"expected a stanza, got {item.raw[:300]!r}")
            self.match_element(self.parse_xml(self.subst(step.body)), item.elem, "")
            return
        raise TranscriptFailure(f"unknown step: {step.verb}")

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
