"""What a new user meets first (issue 11): one server per data dir, a taken port, config file
mistakes, the device CLI pointed at the wrong port, --reset-state, --version and the bench help.
Every failure must say what is wrong and what to do, in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ccs_support import get_device, http_json, list_devices, new_sender_id, register_device
from ccs_support.cli import busy_port, json_lines, refused_port, run_cli, serve_must_fail


# -- one server per data dir ------------------------------------------------------------------------

def test_second_server_on_the_same_data_dir_is_refused(start_server, tmp_path):
    base = tmp_path / "shared"
    first = start_server(base=base)
    data_dir = (base / "data").resolve()
    assert (data_dir / "lock").read_text().strip() == str(first.pid)

    status, stderr = serve_must_fail(base / "data")
    assert status == 1, stderr
    assert f"could not start: data dir {data_dir} is in use by PID {first.pid}" in stderr, stderr
    assert first.alive

    # The lock ends with its process, even a killed one: the next start takes it over.
    first.kill()
    first.start()
    assert (data_dir / "lock").read_text().strip() == str(first.pid)


# -- ports in use -----------------------------------------------------------------------------------

@pytest.mark.parametrize("option", ["--ccs-port", "--device-port", "--http-port", "--apns-port", "--apns-feedback-port",
                                    "--apns-http2-port"])
def test_port_in_use_names_the_option_and_the_port(tmp_path, option):
    with busy_port() as port:
        status, stderr = serve_must_fail(tmp_path / "data", option, str(port))
    assert status == 1, stderr
    expected = (f"could not start: {option} {port} on 127.0.0.1 is already in use (another ccs-emulator?); "
                f"pass {option} 0 to pick a free port, or another port")
    assert expected in stderr, stderr
    assert "errno" not in stderr and "descriptor" not in stderr, stderr


def test_a_failed_start_releases_the_data_dir(start_server, tmp_path):
    with busy_port() as port:
        status, _ = serve_must_fail(tmp_path / "srv" / "data", "--ccs-port", str(port))
    assert status == 1
    start_server(base=tmp_path / "srv")  # the same data dir starts now


# -- the config file --------------------------------------------------------------------------------

def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_invalid_json_says_where(tmp_path):
    cfg = write(tmp_path, "trailing.json",
                '{\n  "senders": [\n    {"sender_id": "1", "server_key": "k"},\n  ]\n}\n')
    status, stderr = serve_must_fail(tmp_path / "data", "--config", str(cfg))
    assert status == 1, stderr
    assert (f"--config {cfg} is not valid JSON: Unexpected character (]) at line 4, column 3 "
            "(a trailing comma? JSON allows none)") in stderr, stderr

    cfg = write(tmp_path, "truncated.json", '{"senders": [{"sender_id": "1"')
    status, stderr = serve_must_fail(tmp_path / "data", "--config", str(cfg))
    assert status == 1, stderr
    assert f"--config {cfg} is not valid JSON: Unexpected end of input at line 1, column 31" in stderr, stderr


def test_top_level_must_be_an_object(tmp_path):
    cfg = write(tmp_path, "array.json", '[{"sender_id": "1", "server_key": "k"}]')
    status, stderr = serve_must_fail(tmp_path / "data", "--config", str(cfg))
    assert status == 1, stderr
    assert f"--config {cfg}: the top level is an array, expected a JSON object" in stderr, stderr


def test_permissive_mode_warns_about_an_unknown_key(start_server, tmp_path):
    cfg = write(tmp_path, "typo.json", '{"sender": [{"sender_id": "1", "server_key": "k"}], "comment": "x"}')
    srv = start_server(config=cfg)
    stderr = srv.stderr_tail()
    assert f'--config {cfg}: ignoring the unknown top-level key "sender" (did you mean "senders"?)' in stderr, stderr
    assert f'ignoring the unknown top-level key "comment" (the only key read is "senders")' in stderr, stderr


def test_strict_mode_says_the_file_lists_no_senders(tmp_path):
    cfg = write(tmp_path, "typo.json", '{"sender": [{"sender_id": "1", "server_key": "k"}]}')
    status, stderr = serve_must_fail(tmp_path / "data", "--auth", "strict", "--config", str(cfg))
    assert status == 1, stderr
    assert (f'could not start: --auth strict: --config {cfg} lists no senders '
            f'(found keys: sender; did you mean "senders"?)') in stderr, stderr
    assert "needs --config" not in stderr, stderr

    cfg = write(tmp_path, "empty.json", '{"senders": []}')
    status, stderr = serve_must_fail(tmp_path / "data", "--auth", "strict", "--config", str(cfg))
    assert status == 1, stderr
    assert f'--config {cfg} lists no senders ("senders" is empty)' in stderr, stderr

    status, stderr = serve_must_fail(tmp_path / "data", "--auth", "strict")
    assert status == 1, stderr
    assert "--auth strict needs --config FILE listing at least one sender" in stderr, stderr


def test_a_bad_sender_entry_is_named(tmp_path):
    cfg = write(tmp_path, "bad.json", '{"senders": [{"sender_id": "1", "server_key": "k"}, {"sender_id": "x2", "server_key": "k"}]}')
    status, stderr = serve_must_fail(tmp_path / "data", "--config", str(cfg))
    assert status == 1, stderr
    assert f'--config {cfg}: senders[1]: "sender_id" "x2" is not 1 to 32 digits' in stderr, stderr


# -- the device CLI pointed at the wrong port -------------------------------------------------------

def device_error(url: str) -> dict:
    proc = run_cli("device", "--emulator", url, "--app", "com.example.app", "--sender", "123456789")
    assert proc.returncode == 1, proc
    lines = json_lines(proc.stdout)
    assert len(lines) == 1, proc.stdout
    assert proc.stderr == b"", proc.stderr
    return lines[0]


def test_device_cli_at_the_ccs_port(server):
    url = f"http://127.0.0.1:{server.ccs_port}"
    event = device_error(url)
    assert event["event"] == "error", event
    assert event["error"].startswith(f"no emulator HTTP API at {url}: is this the --http-port? ("), event


def test_device_cli_where_nothing_listens():
    with refused_port() as port:
        url = f"http://127.0.0.1:{port}"
        event = device_error(url)
    assert event["error"] == (f"no emulator HTTP API at {url}: is this the --http-port? "
                              "(connection refused: nothing listens there)"), event


def test_device_cli_prints_offline_before_disconnected(server, devices):
    dev = devices(server, "com.example.order", [new_sender_id()])
    dev.expect("connected", timeout=30)
    dev.send({"go": "offline"})
    dev.expect("disconnected", timeout=20)
    names = [e["event"] for e in dev.events]
    assert names.index("offline") < names.index("disconnected"), names
    assert dev.close() == 0


# -- --reset-state ----------------------------------------------------------------------------------

def test_reset_state_keeps_the_ca(start_server, tmp_path):
    srv = start_server(base=tmp_path / "reset")
    ca = Path(srv.ca_cert).read_bytes()
    token = register_device(srv.http_base, "com.example.reset", [new_sender_id()])["token"]

    srv.stop()
    srv.start()  # a plain restart keeps the device
    assert get_device(srv.http_base, token)[0] == 200

    srv.stop()
    srv.extra_args = ["--reset-state"]
    srv.start()
    assert get_device(srv.http_base, token)[0] == 404
    assert list_devices(srv.http_base) == []
    assert Path(srv.ca_cert).read_bytes() == ca
    assert "--reset-state: deleted ccs-emulator.sqlite" in srv.stderr_tail(), srv.stderr_tail()


# -- small things -----------------------------------------------------------------------------------

def test_version():
    proc = run_cli("--version")
    assert proc.returncode == 0, proc
    version = proc.stdout.decode().strip()
    assert version and version[0].isdigit() and version.count(".") == 2, version


def test_bench_scenario_help_lists_its_own_options_with_defaults():
    def help_of(scenario: str) -> str:
        proc = run_cli("bench", scenario, "--help")
        assert proc.returncode == 0, proc
        return proc.stdout.decode()

    downstream = help_of("downstream")
    assert "--connections <connections>" in downstream and "(default: 2)" in downstream, downstream
    assert "(default: 100)" in downstream, downstream
    for foreign in ("--xmpp", "--domain", "--user-prefix", "--device-window"):
        assert foreign not in downstream, (foreign, downstream)

    upstream = help_of("upstream")
    assert "--device-window" in upstream and "--offline" not in upstream, upstream

    connections = help_of("connections")
    assert "(default: 1000)" in connections, connections
    assert "--payload-bytes" not in connections and "--devices" not in connections, connections

    chat = help_of("xmpp-chat")
    assert "--embedded" not in chat and "--sender-id" not in chat, chat
    assert "(default: 127.0.0.1:5222)" in chat, chat

    bench = run_cli("bench", "--help").stdout.decode()
    assert "--reset-state" in bench, bench


def test_serve_help_mentions_reset_state():
    proc = run_cli("serve", "--help")
    assert proc.returncode == 0
    assert "--reset-state" in proc.stdout.decode()
