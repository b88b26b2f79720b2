"""Restricted XML on the CCS port: DOCTYPE/entities (billion laughs), comments and processing
instructions end the stream with restricted-xml; malformed XML with invalid-xml; an oversized
stanza with policy-violation. The server must stay small and keep accepting connections.
"""

from __future__ import annotations

import re

import pytest

from ccs_support import new_key, new_sender_id
from ccs_support.xmpp import STREAM_NS, q, stream_header

STREAMS = "urn:ietf:params:xml:ns:xmpp-streams"


def stream_error_exact(condition: str) -> str:
    return f'<stream:error><{condition} xmlns="{STREAMS}"/></stream:error></stream:stream>'


def billion_laughs_decls(levels: int = 10, fanout: int = 10) -> str:
    decls = ['<!ENTITY lol0 "lol">']
    for i in range(1, levels):
        decls.append(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * fanout}">')
    return "".join(decls)


def assert_stream_error_and_close(c, condition: str) -> None:
    c.wait_closed(15)
    assert stream_error_exact(condition) in c.received, \
        f"expected {stream_error_exact(condition)!r}; server sent: {c.received[-1500:]!r}"


def assert_still_serving(xmpp) -> None:
    header, feats = xmpp().open_stream()
    assert header.kind == "header" and feats.tag == q(STREAM_NS, "features")


RSS_LIMIT_KIB = 20 * 1024


def test_billion_laughs_after_stream_header(server, xmpp):
    xmpp().open_stream()  # warm up: the first connection's allocations are not the bomb's
    before = server.rss_kib()
    c = xmpp()
    c.open_stream()
    c.try_send(f"<!DOCTYPE lolz [{billion_laughs_decls()}]><message><body>&lol9;</body></message>")
    assert_stream_error_and_close(c, "restricted-xml")
    after = server.rss_kib()
    print(f"server VmRSS before={before} KiB after={after} KiB")
    assert after - before < RSS_LIMIT_KIB, f"RSS grew by {after - before} KiB"
    assert_still_serving(xmpp)


def test_billion_laughs_in_prolog(server, xmpp):
    """The classic shape: DOCTYPE with nested entities before the stream header, then used."""
    xmpp().open_stream()
    before = server.rss_kib()
    c = xmpp()
    c.try_send(f'<?xml version="1.0"?><!DOCTYPE stream:stream [{billion_laughs_decls()}]>'
               + stream_header() + "<message><body>&lol9;</body></message>")
    assert_stream_error_and_close(c, "restricted-xml")
    after = server.rss_kib()
    print(f"server VmRSS before={before} KiB after={after} KiB")
    assert after - before < RSS_LIMIT_KIB, f"RSS grew by {after - before} KiB"
    assert_still_serving(xmpp)


def test_external_entity_declaration(xmpp):
    c = xmpp()
    c.open_stream()
    c.try_send('<!DOCTYPE m [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><message><body>&xxe;</body></message>')
    assert_stream_error_and_close(c, "restricted-xml")
    assert "root:" not in c.received
    assert_still_serving(xmpp)


@pytest.mark.parametrize("payload", ["<!-- a comment -->", "<?php echo 1; ?>", "<?foo bar?>"])
def test_comment_or_pi_after_header(xmpp, payload):
    c = xmpp()
    c.open_stream()
    c.try_send(payload)
    assert_stream_error_and_close(c, "restricted-xml")
    assert_still_serving(xmpp)


def test_comment_inside_stanza_after_auth(xmpp):
    c = xmpp()
    c.login(new_sender_id(), new_key())
    c.try_send('<message id="c1"><!-- hidden --><gcm xmlns="google:mobile:data">{}</gcm></message>')
    assert_stream_error_and_close(c, "restricted-xml")
    assert_still_serving(xmpp)


@pytest.mark.parametrize("payload", [
    "<message><gcm></message>",
    "<message id=unquoted/>",
    '<message id="a" id="b"/>',
    "<message>\x01</message>",
    "</unopened>",
])
def test_malformed_xml_invalid_xml(xmpp, payload):
    c = xmpp()
    c.open_stream()
    c.try_send(payload)
    assert_stream_error_and_close(c, "invalid-xml")
    assert_still_serving(xmpp)


def test_malformed_xml_after_auth(xmpp):
    c = xmpp()
    c.login(new_sender_id(), new_key())
    c.try_send('<message id="1"><gcm xmlns="google:mobile:data">{"a":1}</gcmX></message>')
    assert_stream_error_and_close(c, "invalid-xml")
    assert_still_serving(xmpp)


def test_oversized_stanza_policy_violation(server, xmpp):
    c = xmpp()
    c.login(new_sender_id(), new_key())
    # Under the limit: just a NACK (data too big), the stream stays up.
    big_ok = '{"to":"x","message_id":"big-60k","data":{"k":"' + "y" * (60 * 1024) + '"}}'
    c.send(f'<message id="b1"><gcm xmlns="google:mobile:data">{big_ok}</gcm></message>')
    payload, item = c.wait_gcm("big-60k", timeout=15)
    assert payload.get("message_type") == "nack", item.raw[:300]

    huge = '{"to":"x","message_id":"big-70k","data":{"k":"' + "z" * (70 * 1024) + '"}}'
    c.try_send(f'<message id="b2"><gcm xmlns="google:mobile:data">{huge}</gcm></message>')
    c.wait_closed(15)
    assert re.search(rf'<stream:error><policy-violation xmlns="{STREAMS}"\s*/>.*?</stream:error>',
                     c.received, re.S), f"no policy-violation stream error: {c.received[-800:]!r}"
    assert "big-70k" not in c.received, "the oversized stanza was processed"
    assert_still_serving(xmpp)
