"""Every stanza in Fixtures/stanzas/ gets the answer its index.json entry names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccs_support import new_key, new_sender_id, register_device

STANZAS = Path(__file__).resolve().parents[2] / "Fixtures" / "stanzas"
CASES = json.loads((STANZAS / "index.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_fixture_stanza_gets_its_answer(server, xmpp, case):
    sender = new_sender_id()
    token = register_device(server.http_base, "com.example.fixtures", [sender])["token"]
    c = xmpp(server)
    c.login(sender, new_key())
    c.send((STANZAS / case["file"]).read_text().strip().replace("TOKEN", token))
    if case["answer"] == "stanza-error":
        item = c.next_element(timeout=15)
        assert item.elem.get("type") == "error" and item.elem.get("id") == case["stanza_id"], item.raw
        return
    payload, _ = c.wait_gcm(case["message_id"], timeout=15)
    assert payload["message_type"] == case["answer"], payload
    if "error" in case:
        assert payload["error"] == case["error"], payload
