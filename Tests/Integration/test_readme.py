"""The README's Quick start, run as written: every snippet is read from README.md at test time (by
its fenced block, never copied here) and run against a test server. The server's data dir is
named .ccs-emulator and the snippets run in its parent directory, so the README's relative paths
(.ccs-emulator/tls/ca.pem) hold as they stand; only what the README tells the reader to change is
changed: the ports (the test server binds port 0), the binary's path and the token."""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

from ccs_support import EmulatorServer, emulator_bin
from ccs_support.cli import json_lines, run_cli
from ccs_support.server import track, untrack

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
RUN_TIMEOUT = 60


# -- reading the README ------------------------------------------------------------------------------

def fenced_blocks() -> list[tuple[str, str]]:
    """Every fenced block of README.md as (info string, text), the fence's indentation removed."""
    blocks: list[tuple[str, str]] = []
    lines = README.read_text("utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^( *)```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, info = m.group(1), m.group(2)
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        blocks.append((info, "\n".join(body) + "\n"))
        i += 1
    return blocks


def block(containing: str, info: str | None = None) -> str:
    """The one fenced block that contains `containing` (and has that info string, if given)."""
    found = [text for kind, text in fenced_blocks() if containing in text and (info is None or kind == info)]
    assert len(found) == 1, f"README.md: expected one fenced block containing {containing!r}, found {len(found)}"
    return found[0]


def substitute(text: str, old: str, new: str) -> str:
    """Replaces `old`, which the README must contain (a renamed default would otherwise go unnoticed)."""
    assert old in text, f"README snippet no longer contains {old!r}:\n{text}"
    return text.replace(old, new)


# -- the server and the device the snippets talk to ----------------------------------------------------

@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("readme")


@pytest.fixture(scope="module")
def readme_server(workdir) -> Iterator[EmulatorServer]:
    srv = EmulatorServer(workdir / ".ccs-emulator", log_dir=workdir / "logs")
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


class Lines:
    """A process whose stdout is read line by line on a thread; `next()` waits for the next line."""

    def __init__(self, argv: list[str], cwd: Path):
        self.proc = track(subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, start_new_session=True))
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)

    def next(self, timeout: float = 30) -> str:
        line = self.lines.get(timeout=timeout)
        assert line is not None, f"the process ended (status {self.proc.wait()}): {self.proc.stderr.read()!r}"
        return line

    def next_event(self, name: str, timeout: float = 30) -> dict:
        while True:
            event = json.loads(self.next(timeout))
            if event.get("event") == name:
                return event

    def end_stdin(self, timeout: float = 15) -> int:
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            untrack(self.proc)


def same_shape(actual: dict, documented: dict) -> None:
    """The README's example line and the real one have the same keys, recursively."""
    assert actual.keys() == documented.keys(), (actual, documented)
    for key, value in documented.items():
        if isinstance(value, dict) and key != "data":
            same_shape(actual[key], value)


# -- the tests ---------------------------------------------------------------------------------------

def test_quick_start_apns_http2_token_auth(readme_server, workdir):
    """Step 6 as written: apns-key, the iOS device, and apns.py (the port and binary path replaced)."""
    srv = readme_server
    binary = emulator_bin()
    lines = block("ccs-emulator apns-key --team-id").strip().splitlines()
    key_command = substitute(lines[0], ".build/release/ccs-emulator", binary)
    proc = subprocess.run(shlex.split(key_command) + ["--data-dir", str(srv.data_dir)], cwd=workdir,
                          capture_output=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, proc
    command = substitute(substitute(lines[1], ".build/release/ccs-emulator", binary), "http://127.0.0.1:8080",
                         srv.http_base)
    device = Lines(shlex.split(command), cwd=workdir)
    registered = device.next_event("registered")
    same_shape(registered, json.loads(lines[2]))
    assert json.loads(device.next()) == {"event": "connected"}
    script = block("# apns.py — run as: python apns.py APNS_TOKEN", info="python")
    script = substitute(script, "https://localhost:2197", f"https://localhost:{srv.ready['apns_http2_port']}")
    script = substitute(script, ".ccs-emulator/tls/ca.pem", srv.ready["ca_cert"])
    (workdir / "apns.py").write_text(script)
    proc = subprocess.run([sys.executable, "apns.py", registered["apns_token"]], cwd=workdir, capture_output=True,
                          timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, proc
    version, status, apns_id = proc.stdout.decode().split()[:3]
    assert (version, status) == ("HTTP/2", "200"), proc.stdout
    event = device.next_event("apns")
    assert event["alert"] == "Hello" and event["apns"]["apns_id"] == apns_id and event["presentation"] == "alert"
    device.end_stdin()


def test_quick_start_snippets(readme_server, workdir):
    srv = readme_server
    binary = emulator_bin()

    # Step 1: the ready line has the documented fields.
    ready = json.loads(block('{"event":"ready","ccs_port":5235').strip())
    assert srv.ready.keys() == ready.keys(), (srv.ready, ready)

    # Step 2: the device CLI, its first line run as written (binary path and HTTP port replaced).
    device_block = block("ccs-emulator device --emulator http://127.0.0.1:8080 --app com.example.app --sender").strip().splitlines()
    command = substitute(device_block[0], ".build/release/ccs-emulator", binary)
    command = substitute(command, "http://127.0.0.1:8080", srv.http_base)
    device = Lines(shlex.split(command), cwd=workdir)
    documented = [json.loads(line) for line in device_block[1:]]
    registered = device.next_event("registered")
    same_shape(registered, documented[0])
    assert {k: registered[k] for k in ("app", "platform", "senders")} == \
        {k: documented[0][k] for k in ("app", "platform", "senders")}, registered
    assert json.loads(device.next()) == documented[1]  # {"event":"connected"}
    token = registered["token"]

    # Step 3: ccs-emulator send; the README says to replace TOKEN, and to pass --server for another port.
    send_block = block("ccs-emulator send --to TOKEN").strip().splitlines()
    command = substitute(send_block[0], ".build/release/ccs-emulator", binary)
    command = substitute(command, "TOKEN", token) + f" --server 127.0.0.1:{srv.ccs_port}"
    proc = subprocess.run(shlex.split(command), cwd=workdir, capture_output=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, proc
    [ack] = json_lines(proc.stdout)
    documented_ack = json.loads(send_block[1])
    same_shape(ack, documented_ack)
    assert ack["message_type"] == "ack" and ack["from"] == token, ack

    message = device.next_event("message")
    documented_message = json.loads(block('{"event":"message","message":{"data":{"hello":"world"}').strip())
    same_shape(message, documented_message)
    assert message["message"]["data"] == documented_message["message"]["data"], message
    assert message["message"]["from"] == documented_message["message"]["from"], message

    # Step 4a: the aiofcm script, run the way its first line says, with the CCS port replaced.
    script = block("import aiofcm.connection", info="python")
    run_as = re.match(r"# send\.py — run as: SSL_CERT_FILE=(\S+) python send\.py TOKEN\n", script)
    assert run_as, script.splitlines()[0]
    (workdir / "send.py").write_text(substitute(script, "FCM_PORT = 5235", f"FCM_PORT = {srv.ccs_port}"))
    env = dict(os.environ, SSL_CERT_FILE=run_as.group(1))
    proc = subprocess.run([sys.executable, "send.py", token], cwd=workdir, env=env, capture_output=True,
                          timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, proc
    documented_output = re.search(r"# (SUCCESS None)", script).group(1)
    assert proc.stdout.decode().strip() == documented_output, proc
    message = device.next_event("message")
    assert message["message"]["data"] == {"hello": "world"}, message

    # Step 4b: the openssl s_client pipe, with the token and the port replaced.
    shell = block("openssl s_client")
    shell = substitute(shell, "TOKEN=…", f"TOKEN={shlex.quote(token)}")
    shell = substitute(shell, "127.0.0.1:5235", f"127.0.0.1:{srv.ccs_port}")
    proc = subprocess.run(["bash", "-c", shell], cwd=workdir, capture_output=True, timeout=RUN_TIMEOUT)
    output = proc.stdout.decode("utf-8", "replace")
    documented_ack = re.search(r"The last answer before `</stream:stream>` is the ACK:\n\s*`([^`]+)`",
                               README.read_text("utf-8")).group(1)
    expected = substitute(documented_ack, "<TOKEN>", token)
    assert expected in output, (expected, output, proc.stderr.decode("utf-8", "replace")[-2000:])
    message = device.next_event("message")
    assert message["message"]["data"] == {"hello": "world"}, message

    # Step 2's promise: the device exits when stdin ends.
    assert device.end_stdin() == 0


def test_install_line_pins_the_tested_versions():
    line = next(l for l in block("pip install aiofcm").splitlines() if l.startswith("pip install"))
    readme = dict(re.findall(r"(\S+)==(\S+)", line))
    names = [word.split("==")[0].lower() for word in line.split()[2:]]
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", REQUIREMENTS.read_text(), re.M))
    pins = {name.lower(): version for name, version in pins.items()}
    assert readme and all(pins.get(name.lower()) == version for name, version in readme.items()), (readme, pins)
    assert all(name in pins for name in names), (names, pins)
    assert {"aiofcm", "aioxmpp", "pyopenssl", "pytz"} <= set(names), names
    # The venv the tests run in is what the README promises to work.
    assert (3, 9) <= sys.version_info[:2] <= (3, 11) and "Python 3.9–3.11" in README.read_text("utf-8")


def test_config_file_example(start_server, tmp_path):
    config = tmp_path / "senders.json"
    config.write_text(block('"senders": [', info="json"))
    srv = start_server(auth="strict", config=config)
    for sender, key in [("123456789", "AAAA-my-test-key"), ("42", "another-key")]:
        # Logged in: the unknown token gets a NACK (exit 1), not a login failure (exit 2).
        proc = run_cli("send", "--server", f"127.0.0.1:{srv.ccs_port}", "--ca", srv.ca_cert,
                       "--sender", sender, "--key", key, "--to", "no-such-token")
        assert proc.returncode == 1 and json_lines(proc.stdout)[0]["error"] == "BAD_REGISTRATION", proc


def test_serve_help_is_current():
    documented = block("OVERVIEW: Run the emulator.")
    # Not on a terminal and without COLUMNS, the help is wrapped at 80 columns, as in the README.
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = run_cli("serve", "--help", env=env)
    assert proc.returncode == 0, proc
    actual = proc.stdout.decode().rstrip("\n")
    assert actual == documented.rstrip("\n"), "README's `serve --help` block differs from the binary's:\n" + actual


def test_admin_sdk_example_both_redirections(tmp_path):
    """Quick start step 5: v1.py as written, once with the base URL, once through proxy mode."""
    from ccs_support import get_device, register_device
    from ccs_support.fcm_http import closed_port

    script = block("# v1.py — run as:", info="python")
    (tmp_path / "v1.py").write_text(script)
    srv = EmulatorServer(tmp_path / ".ccs-emulator", log_dir=tmp_path / "logs", extra_args=["--proxy-port", "0"])
    srv.start()
    try:
        token = register_device(srv.http_base, "com.example.readme", ["123456789"])["token"]
        base_block = block("python v1.py sa.json TOKEN").strip().splitlines()
        proxy_block = block("python v1.py sa-google.json TOKEN").strip().splitlines()
        dead = f"http://127.0.0.1:{closed_port()}"
        runs = [
            # google-auth's background allowedLocations lookup must fail here rather than leave the machine.
            (base_block, {"HTTPS_PROXY": dead, "NO_PROXY": "127.0.0.1"}, [("http://127.0.0.1:8080", srv.http_base)]),
            (proxy_block, {}, [("http://127.0.0.1:3128", f"http://127.0.0.1:{srv.ready['proxy_port']}")]),
        ]
        for lines, extra_env, replacements in runs:
            credentials = substitute(lines[0], ".build/release/ccs-emulator", emulator_bin())
            credentials += f" --data-dir {srv.data_dir} --emulator {srv.http_base}"
            proc = subprocess.run(shlex.split(credentials), cwd=tmp_path, capture_output=True, timeout=RUN_TIMEOUT)
            assert proc.returncode == 0, proc
            command = substitute(lines[1], "TOKEN", token)
            for old, new in replacements:
                command = substitute(command, old, new)
            words = shlex.split(command)
            env = dict(os.environ, **extra_env)
            env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
            while "=" in words[0]:
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            assert words[0] == "python", words
            proc = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, env=env, capture_output=True,
                                  timeout=RUN_TIMEOUT)
            assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-3000:]
            assert re.fullmatch(r"projects/123456789/messages/0:\d+%[0-9a-f]+", proc.stdout.decode().strip()), proc

        status, device = get_device(srv.http_base, token)
        assert [q["payload"]["data"] for q in device["queue"]] == [{"hello": "v1"}, {"hello": "v1"}], device
    finally:
        srv.stop()


def test_apns_provider_example(readme_server, workdir):
    """The APNs section: apns-cert and the device as written, then provider.py (pushjack) with the
    emulator's ports in place of 2195/2196 and the device's token as its argument."""
    pytest.importorskip("pushjack")
    srv = readme_server
    sh = block("ccs-emulator apns-cert --bundle-id").strip().splitlines()
    cert = subprocess.run(shlex.split(substitute(sh[0], "ccs-emulator", emulator_bin())), cwd=workdir,
                          capture_output=True, timeout=RUN_TIMEOUT)
    assert cert.returncode == 0, cert
    command = substitute(substitute(sh[1], "ccs-emulator", emulator_bin()), "http://127.0.0.1:8080", srv.http_base)
    device = Lines(shlex.split(command), cwd=workdir)
    token = device.next_event("registered")["apns_token"]
    device.next_event("connected")
    script = block("# provider.py", info="python")
    script = substitute(script, '"127.0.0.1", 2195', f'"127.0.0.1", {srv.ready["apns_port"]}')
    script = substitute(script, '"127.0.0.1", 2196', f'"127.0.0.1", {srv.ready["apns_feedback_port"]}')
    (workdir / "provider.py").write_text(script)
    run = subprocess.run([sys.executable, "provider.py", token], cwd=workdir, capture_output=True, timeout=RUN_TIMEOUT)
    assert run.returncode == 0, run
    assert run.stdout.decode().strip() == "errors: [] expired: []", run
    event = device.next_event("apns")
    assert (event["alert"], event["badge"], event["sound"]) == ("Hello from APNs", 1, "default")
    assert device.end_stdin() == 0


def test_web_push_example(readme_server, workdir):
    """The Web Push section: the browser as written (the emulator's port changed), then
    webpush_send.py (pywebpush) with its subscription; the browser prints the push event."""
    pytest.importorskip("pywebpush")
    srv = readme_server
    line = block("--push-service emulator").strip().splitlines()[0]
    line = substitute(substitute(line, "ccs-emulator", emulator_bin()), "http://127.0.0.1:8080", srv.http_base)
    browser = Lines(shlex.split(line), workdir)
    try:
        subscription = browser.next_event("registered")["subscription"]
        browser.next_event("connected")
        script = workdir / "webpush_send.py"
        script.write_text(block("# webpush_send.py", info="python"))
        sent = subprocess.run([sys.executable, str(script), json.dumps(subscription)], cwd=workdir,
                              capture_output=True, timeout=RUN_TIMEOUT)
        assert sent.returncode == 0 and sent.stdout.startswith(b"201 "), sent
        push = browser.next_event("push")
        assert push["notification"] == {"title": "Hello"}, push
    finally:
        browser.end_stdin()
