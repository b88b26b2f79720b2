"""Smoke runs of `ccs-emulator bench`: a second or two each, checking that the generator counts exactly.

No timing is asserted here (throughput and latency belong to scripts/bench, never to the tests).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from ccs_support import emulator_bin

RUN_TIMEOUT = 75


def bench(*args: str) -> dict:
    proc = subprocess.run([emulator_bin(), "bench", *args, "--json"], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=RUN_TIMEOUT)
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, f"bench {args} exited {proc.returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    # On a pipe: exactly one JSON line, and no progress line.
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert "\r" not in err and "\x1b[" not in err, err
    return json.loads(lines[0])


def assert_exact(result: dict, n: int) -> None:
    c = result["counts"]
    assert c == {"sent": n, "acked": n, "nacked": 0, "errors": 0, "delivered": n, "unexpected": 0}, result
    assert result["latency"]["ack"]["count"] == n, result
    assert result["latency"]["delivery"]["count"] == n, result
    assert "notes" not in result or not any("stopped waiting" in x for x in result["notes"]), result


def test_downstream_embedded_counts_exactly():
    r = bench("downstream", "--embedded", "--messages", "300", "--devices", "3", "--connections", "2")
    assert r["scenario"] == "downstream" and r["mode"] == "closed-loop"
    assert r["connections"] == 2 and r["devices"] == 3
    assert_exact(r, 300)
    # Embedded: the server is this process, and the result says so.
    assert r["server_process"]["includes_generator"] is True
    assert r["server_process"]["cpu_seconds"] > 0  # 300 messages over TLS cannot cost nothing


def test_upstream_embedded_counts_exactly():
    r = bench("upstream", "--embedded", "--messages", "200", "--devices", "4", "--connections", "2",
              "--payload-bytes", "100")
    assert r["scenario"] == "upstream"
    assert_exact(r, 200)


def test_open_loop_counts_exactly():
    r = bench("downstream", "--embedded", "--messages", "150", "--devices", "2", "--connections", "3",
              "--rate", "300")
    assert r["mode"] == "open-loop" and r["rate"] == 300
    assert_exact(r, 150)


def test_downstream_against_a_separate_server(start_server):
    srv = start_server()
    r = bench("downstream", "--server", f"http://127.0.0.1:{srv.http_port}", "--server-pid", str(srv.pid),
              "--messages", "250", "--devices", "5", "--connections", "2", "--window", "7")
    assert r["window"] == 7
    assert_exact(r, 250)
    usage = r["server_process"]
    assert usage["pid"] == srv.pid and usage["includes_generator"] is False
    assert usage["rss_peak_bytes"] > 0 and usage["cpu_seconds"] > 0
    assert usage["cpu_seconds_per_1000_delivered"] == pytest.approx(usage["cpu_seconds"] * 1000 / 250, abs=0.005)


def test_offline_devices_keep_their_messages(start_server):
    srv = start_server()
    r = bench("downstream", "--offline", "--server", f"http://127.0.0.1:{srv.http_port}",
              "--messages", "40", "--devices", "2", "--connections", "1")
    c = r["counts"]
    assert (c["sent"], c["acked"], c["delivered"], c["nacked"], c["errors"]) == (40, 40, 0, 0, 0), r


def test_idle_connections():
    r = bench("connections", "--embedded", "--connections", "20", "--duration", "0")
    f = r["connections_result"]
    assert f["requested"] == 20 and f["connected"] == 20 and f["failed"] == 0, r
    assert "server_rss_per_connection_bytes" in f


def test_idle_app_server_connections():
    # Each connection counts as open only once its CCS session is established (SASL, bind).
    r = bench("connections", "--app-servers", "--embedded", "--connections", "20", "--duration", "0")
    f = r["connections_result"]
    assert f["requested"] == 20 and f["connected"] == 20 and f["failed"] == 0, r
    assert "CCS port" in r["server"], r


def test_unreachable_server_fails_cleanly():
    proc = subprocess.run([emulator_bin(), "bench", "downstream", "--server", "http://127.0.0.1:1",
                           "--messages", "1", "--json"], capture_output=True, timeout=RUN_TIMEOUT)
    assert proc.returncode != 0
    assert b"cannot reach the emulator" in proc.stderr, proc.stderr


def bench_lines(*args: str) -> list[dict]:
    """Like bench(), for the HTTP scenarios: the API result, the no-op result and the ratio line."""
    proc = subprocess.run([emulator_bin(), "bench", *args, "--json"], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=RUN_TIMEOUT)
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, f"bench {args} exited {proc.returncode}\n{out[-3000:]}\n{proc.stderr.decode()[-3000:]}"
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("scenario", ["http-v1", "http-legacy"])
@pytest.mark.parametrize("tls", [False, True])
def test_http_scenarios_count_exactly(scenario, tls):
    args = [scenario, "--embedded", "--messages", "120", "--devices", "3", "--connections", "2"]
    api, noop, ratio = bench_lines(*args, *(["--tls"] if tls else []))
    assert api["scenario"] == scenario and f" at {'https' if tls else 'http'}://127.0.0.1:" in api["server"], api
    assert_exact(api, 120)
    assert noop["scenario"] == "http-noop"
    c = noop["counts"]
    assert c["sent"] == c["acked"] == 120 and c["errors"] == 0 and c["delivered"] == 0, noop
    assert ratio["scenario"] == f"{scenario}-vs-noop" and ratio["ratio"] > 0, ratio


def test_apns_counts_exactly():
    r = bench("apns", "--notifications", "3000", "--devices", "5", "--connections", "3")
    assert r["scenario"] == "apns" and r["connections"] == 3 and r["devices"] == 5
    assert (r["accepted"], r["delivered"], r["refused_connections"]) == (3000, 3000, 0), r
    assert r["latency_ms"]["p50"] <= r["latency_ms"]["p99"] <= r["latency_ms"]["max"], r


def test_apns_at_a_fixed_rate_counts_exactly():
    r = bench("apns", "--notifications", "400", "--devices", "2", "--connections", "2", "--rate", "2000")
    assert (r["accepted"], r["delivered"], r["rate"]) == (400, 400, 2000), r


def test_web_push_embedded_counts_exactly():
    # Every push is encrypted by the generator, accepted with 201 and decrypted by its browser.
    r = bench("web-push", "--embedded", "--messages", "200", "--devices", "5", "--connections", "2")
    assert r["scenario"] == "web-push"
    assert_exact(r, 200)


def test_apns_http2_counts_exactly():
    r = bench("apns-http2", "--notifications", "300", "--devices", "5", "--connections", "2")
    assert r["scenario"] == "apns-http2" and r["connections"] == 2 and r["devices"] == 5
    assert (r["accepted"], r["refused"], r["delivered"]) == (300, 0, 300), r
    assert r["latency_ms"]["p50"] <= r["latency_ms"]["p99"] <= r["latency_ms"]["max"], r


def test_engine_in_process_counts_exactly():
    # Every message sent is given to its device, confirmed, and answered; the devices over 3 shards.
    r = bench("engine", "--shards", "3", "--threads", "2", "--devices", "20", "--window", "10", "--duration", "0.3",
              "--live-write-delay", "1")
    assert r["scenario"] == "engine" and r["shards"] == 3 and r["threads"] == 2, r
    assert r["sent"] > 0 and r["refused"] == 0, r
    assert r["answered"] == r["sent"] == r["delivered"], r
