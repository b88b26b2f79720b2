"""Reset, export and import (docs/admin-api.md#post-emulatorv1reset, docs/export-format.md), in the
Firebase Emulator Suite's manner: POST /emulator/v1/reset for everything or one sender; `serve
--export-on-exit DIR`, `serve --import DIR` and `ccs-emulator export --data-dir … DIR`. The state
is made by real traffic (raw CCS, the legacy HTTP API, Instance ID topic management, device-group
management); the round trip export → import → export must give the same text."""

from __future__ import annotations

import json
from pathlib import Path

import requests

from ccs_support import http_json, new_key, new_sender_id, register_device
from ccs_support.cli import run_cli
from ccs_support.semantics import VIRTUAL, advance, app_server, data_msg, send_ack

APP = "com.example.export"
EXPORT = "ccs-emulator-export.json"


def make_state(srv) -> dict:
    """Two senders with devices, queued messages, a topic, a device group, a shared device, a clock."""
    base = srv.http_base
    a, b = new_sender_id(), new_sender_id()
    key_a, key_b = new_key(), new_key()
    ca = app_server(srv, a, key_a)
    cb = app_server(srv, b, key_b)
    only_a = [register_device(base, APP, [a])["token"] for _ in range(2)]
    only_b = register_device(base, APP, [b])["token"]
    shared = register_device(base, APP, [a, b])["token"]
    for i, t in enumerate(only_a + [shared]):
        send_ack(ca, data_msg(t, f"a{i}", collapse_key="k" if i == 0 else None, time_to_live=3600))
    send_ack(cb, data_msg(only_b, "b0"))
    send_ack(cb, data_msg(shared, "b1"))
    r = requests.post(f"{base}/iid/v1:batchAdd", json={"to": "/topics/news", "registration_tokens": only_a + [shared]},
                      headers={"Authorization": f"key={key_a}"}, timeout=30)
    assert r.status_code == 200, r.text
    r = requests.post(f"{base}/fcm/notification", json={"operation": "create", "notification_key_name": "grp",
                                                         "registration_ids": only_a},
                      headers={"Authorization": f"key={key_a}", "project_id": a}, timeout=30)
    assert r.status_code == 200, r.text
    advance(base, 90)
    ca.close()
    cb.close()
    return {"a": a, "b": b, "only_a": only_a, "only_b": only_b, "shared": shared}


def test_reset_one_sender_keeps_the_others(start_server, xmpp):
    srv = start_server(extra_args=VIRTUAL)
    base = srv.http_base
    s = make_state(srv)
    status, body = http_json("POST", f"{base}/emulator/v1/reset", {"sender": s["a"]})
    assert status == 200 and body == {"devices_removed": 2, "sender": s["a"]}, body
    for t in s["only_a"]:
        assert http_json("GET", f"{base}/emulator/v1/devices/{t}")[0] == 404
    status, shared = http_json("GET", f"{base}/emulator/v1/devices/{s['shared']}")
    assert status == 200 and shared["senders"] == [s["b"]], shared
    assert len(shared["queue"]) == 1, "only sender b's message is left for the shared device"
    status, other = http_json("GET", f"{base}/emulator/v1/devices/{s['only_b']}")
    assert status == 200 and len(other["queue"]) == 1, other
    status, topics = http_json("GET", f"{base}/emulator/v1/topics?sender={s['a']}")
    assert status in (200, 404)
    if status == 200:
        assert not topics.get("topics"), topics
    for bad in ({"sender": "abc"}, {"sender": []}, "not json"):
        st, b = http_json("POST", f"{base}/emulator/v1/reset", bad)
        assert st == 400 and b["error"]["status"] == "INVALID_ARGUMENT", (bad, st, b)
    status, body = http_json("POST", f"{base}/emulator/v1/reset")
    assert status == 200 and body == {"devices_removed": 2}, body


def test_export_on_exit_import_and_export_command_round_trip(start_server, xmpp, tmp_path):
    first = start_server(base=tmp_path / "first", extra_args=VIRTUAL + ["--export-on-exit", str(tmp_path / "exp1")])
    s = make_state(first)
    clock_before = http_json("GET", f"{first.http_base}/emulator/v1/clock")[1]
    assert first.stop() == 0
    text1 = (tmp_path / "exp1" / EXPORT).read_text()
    header = json.loads(text1)
    assert header["format"] == "ccs-emulator-export" and header["version"] == 1, header
    tables = header["tables"]
    assert {r["token"] for r in tables["device"]} == set(s["only_a"] + [s["only_b"], s["shared"]])
    assert len(tables["queued_message"]) == 5 and len(tables["device_group"]) == 1
    assert len(tables["topic_subscription"]) == 3
    assert any(r["key"] == "virtual_clock_ms" for r in tables["meta"]), tables["meta"]

    second = start_server(base=tmp_path / "second", extra_args=VIRTUAL + ["--import", str(tmp_path / "exp1")])
    base = second.http_base
    assert http_json("GET", f"{base}/emulator/v1/clock")[1]["now_ms"] == clock_before["now_ms"]
    status, dev = http_json("GET", f"{base}/emulator/v1/devices/{s['shared']}")
    assert status == 200 and len(dev["queue"]) == 2, dev
    out = run_cli("export", "--data-dir", str(tmp_path / "second" / "data"), str(tmp_path / "exp2"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["file"].endswith(EXPORT)
    assert (tmp_path / "exp2" / EXPORT).read_text() == text1, "export → import → export changes nothing"


def test_bad_imports_are_refused(tmp_path):
    from ccs_support.cli import serve_must_fail
    cases = {
        "missing": None,
        "garbage": "{",
        "format": json.dumps({"format": "other", "version": 1}),
        "version": json.dumps({"format": "ccs-emulator-export", "version": 99}),
        "table": None,
    }
    for name, text in cases.items():
        d = tmp_path / name
        d.mkdir()
        if text is not None:
            (d / EXPORT).write_text(text)
        if name == "table":
            # A real header, an unknown table.
            ok = start_schema(tmp_path)
            doc = json.loads(ok)
            doc["tables"]["nope"] = []
            (d / EXPORT).write_text(json.dumps(doc))
        code, err = serve_must_fail(tmp_path / f"data-{name}", "--import", str(d))
        assert code != 0 and "--import" in err, (name, code, err)
    out = run_cli("export", "--data-dir", str(tmp_path / "no-such-dir"), str(tmp_path / "x"))
    assert out.returncode != 0 and b"no emulator state" in out.stderr, out.stderr


def start_schema(tmp_path: Path) -> str:
    """An empty data dir's export (made by starting and stopping a server)."""
    from ccs_support import EmulatorServer
    srv = EmulatorServer(tmp_path / "schema" / "data", log_dir=tmp_path / "schema")
    srv.start()
    srv.stop()
    out = run_cli("export", "--data-dir", str(tmp_path / "schema" / "data"), str(tmp_path / "schema-exp"))
    assert out.returncode == 0, out.stderr
    return (tmp_path / "schema-exp" / EXPORT).read_text()
