"""GET /metrics (docs/admin-api.md#metrics): Prometheus text from swift-prometheus, parsed with
Prometheus's own parser (prometheus-client), after traffic from a raw CCS connection, the device
CLI and the legacy HTTP API; and `--log-format json`."""

from __future__ import annotations

import json

import requests
from prometheus_client.parser import text_string_to_metric_families

from ccs_support import new_key, new_sender_id, register_device
from ccs_support.semantics import app_server, data_msg, is_msg, send_ack, send_nack, start_device


def scrape(base: str) -> dict[tuple[str, tuple], float]:
    r = requests.get(f"{base}/metrics", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4"), r.headers
    samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_what_happened(start_server, xmpp, devices):
    srv = start_server()
    base = srv.http_base
    sender, key = new_sender_id(), new_key()
    c = app_server(srv, sender, key)
    dev, token = start_device(devices, srv, "com.example.metrics", [sender])
    before = scrape(base)
    assert value(before, "ccs_emulator_connections", kind="app_server") == 1
    assert value(before, "ccs_emulator_connections", kind="device") == 1

    for i in range(3):
        send_ack(c, data_msg(token, f"m{i}"))
        dev.expect(is_msg(f"m{i}"), timeout=20)
    assert send_nack(c, data_msg("not-a-token", "bad"))["error"] == "BAD_REGISTRATION"
    offline = register_device(base, "com.example.metrics", [sender])["token"]
    send_ack(c, data_msg(offline, "kept"))
    r = requests.post(f"{base}/fcm/send", json={"to": offline, "data": {"x": "1"}},
                      headers={"Authorization": f"key={key}"}, timeout=30)
    assert r.json()["success"] == 1

    after = scrape(base)
    assert value(after, "ccs_emulator_messages_total", api="ccs", outcome="accepted", code="") == 4
    assert value(after, "ccs_emulator_messages_total", api="ccs", outcome="refused", code="BAD_REGISTRATION") == 1
    assert value(after, "ccs_emulator_messages_total", api="legacy", outcome="accepted", code="") == 1
    assert value(after, "ccs_emulator_deliveries_total", platform="android") >= 3
    assert value(after, "ccs_emulator_queued_messages") == 2, "the two messages for the offline device wait"
    assert value(after, "ccs_emulator_registered_devices") == 2
    assert value(after, "ccs_emulator_send_duration_seconds_count", api="ccs") == 5
    assert value(after, "ccs_emulator_send_duration_seconds_bucket", api="ccs", le="+Inf") == 5
    assert value(after, "ccs_emulator_store_commit_duration_seconds_count") > 0
    assert value(after, "ccs_emulator_store_batch_ops_sum") > 0
    assert value(after, "ccs_emulator_journal_events_recorded") > 0


def test_log_format_json(start_server):
    srv = start_server(extra_args=["--log-format", "json", "--log-level", "info"])
    requests.post(f"{srv.http_base}/emulator/v1/devices", json={"app": "com.example.logs", "senders": [new_sender_id()]},
                  timeout=30)
    srv.stop()
    lines = [l for l in srv.stderr_path.read_text().splitlines() if l.strip()]
    assert lines, "info level logs something at start"
    for line in lines:
        entry = json.loads(line)
        assert {"time", "level", "label", "message", "source"} <= set(entry), entry
