"""`ccs-emulator conformance run builtin-http` against the sample HTTP app servers
(Fixtures/conformance/app-servers): the firebase-admin (v1) one and the `requests` (legacy) one pass
the suite when careful; each `--break WAY` fails the scenario that judges that way, for that reason,
and the JUnit XML (parsed) names the rule, its public source and the requests with their times."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ccs_support import emulator_bin

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "Fixtures" / "conformance" / "app-servers"
EXAMPLES = ROOT / "Fixtures" / "conformance" / "scenarios-http"
V1 = SAMPLES / "sample_http_v1_app_server.py"
LEGACY = SAMPLES / "sample_http_legacy_app_server.py"


def run(tmp_path: Path, sample: Path, *args: str, app_args: str = "", suite: str = "builtin-http",
        timeout: float = 300) -> tuple[int, str, ET.Element]:
    junit = tmp_path / "junit.xml"
    cmd = [emulator_bin(), "conformance", "run", suite, *args, "--data-dir", str(tmp_path / "runs"),
           "--app-server-cmd", f"{sys.executable} {sample} {app_args}", "--junit", str(junit)]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout)
    out = proc.stdout.decode() + proc.stderr.decode()
    return proc.returncode, out, ET.parse(junit).getroot()


def suite_names() -> list[str]:
    proc = subprocess.run([emulator_bin(), "conformance", "show", "builtin-http"], capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr.decode()
    return [s["name"] for s in json.loads(proc.stdout)]


@pytest.mark.parametrize("sample", [V1, LEGACY], ids=["v1", "legacy"])
def test_the_careful_sample_passes_builtin_http(tmp_path, sample):
    status, out, root = run(tmp_path, sample)
    names = suite_names()
    assert status == 0, out
    assert root.get("tests") == str(len(names)) and root.get("failures") == "0", out
    assert [c.get("name") for c in root.iter("testcase")] == names
    assert f"{len(names)} passed, 0 failed" in out, out


@pytest.mark.parametrize("sample", [V1, LEGACY], ids=["v1", "legacy"])
def test_example_http_scenario_files_run(tmp_path, sample):
    status, out, root = run(tmp_path, sample, suite=str(EXAMPLES))
    assert status == 0, out
    assert int(root.get("tests")) == len(list(EXAMPLES.glob("*.json"))) and root.get("failures") == "0", out


def test_the_v1_sample_passes_through_proxy_mode(tmp_path):
    """firebase-admin left pointing at https://fcm.googleapis.com reaches the emulator through the
    contract's HTTPS_PROXY and REQUESTS_CA_BUNDLE, and is judged the same."""
    status, out, root = run(tmp_path, V1, "--filter", "http-round-trip", "--filter", "http-retry-unavailable",
                            app_args="--via-proxy")
    assert status == 0 and root.get("tests") == "2" and root.get("failures") == "0", out
    status, out, root = run(tmp_path, V1, "--filter", "http-retry-unavailable", app_args="--via-proxy --break retry-at-once")
    assert status == 1 and "audit: broken retry-backoff" in out, out


# (sample, the way it breaks, the scenario that must fail, the rule its failure names)
ONE_AT_A_TIME = [
    (V1, "retry-at-once", "http-retry-unavailable", "retry-backoff"),
    (V1, "ignore-retry-after", "http-retry-after-unavailable", "retry-backoff"),
    (V1, "retry-invalid", "http-no-retry-invalid", "no-retry-invalid"),
    (V1, "keep-unregistered", "http-drop-unregistered", "drop-unregistered"),
    (V1, "no-limits", "http-message-limits", "message-limits"),
    (V1, "token-per-send", "http-reuse-access-token", "reuse-access-token"),
    (V1, "stale-token", "http-refresh-access-token", "refresh-access-token"),
    (LEGACY, "retry-at-once", "http-retry-internal", "retry-backoff"),
    (LEGACY, "ignore-retry-after", "http-retry-after-quota", "retry-backoff"),
    (LEGACY, "retry-invalid", "http-no-retry-invalid", "no-retry-invalid"),
    (LEGACY, "keep-unregistered", "http-drop-unregistered", "drop-unregistered"),
    (LEGACY, "ignore-canonical", "http-use-canonical-id", "use-canonical-id"),
    (LEGACY, "no-limits", "http-message-limits", "message-limits"),
]


@pytest.mark.parametrize("sample,way,scenario,rule", ONE_AT_A_TIME,
                         ids=[f"{'v1' if s == V1 else 'legacy'}-{w}" for s, w, _, _ in ONE_AT_A_TIME])
def test_breaking_one_way_fails_the_scenario_that_judges_it(tmp_path, sample, way, scenario, rule):
    status, out, root = run(tmp_path, sample, "--filter", scenario, app_args=f"--break {way}")
    assert status == 1, out
    [case] = [c for c in root.iter("testcase") if c.get("name") == scenario]
    failure = case.find("failure")
    assert failure is not None, out
    text = failure.text or ""
    # The rule is named with its finding and evidence: each request with the emulator's time.
    assert f"finding {rule} [" in text, text
    evidence = [line for line in text.splitlines() if line.startswith("  at ")]
    assert evidence and all(line.split()[1].isdigit() for line in evidence), text
    assert any("request" in line or "access token" in line for line in evidence), text
    # Findings about HTTP requests cite Google's public pages, never a file outside the repository.
    assert f"finding {rule} [https://" in text, text


def test_http_scenarios_need_an_app_server_command(tmp_path):
    with socket.socket() as s:   # a free port for --ccs-port, which the runner needs without a command
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([emulator_bin(), "conformance", "run", "builtin-http", "--filter", "http-round-trip",
                           "--ccs-port", str(port), "--data-dir", str(tmp_path / "runs")], capture_output=True, timeout=60)
    assert proc.returncode == 1
    assert "HTTP scenarios need --app-server-cmd" in proc.stdout.decode(), proc.stdout.decode()


def test_an_http_app_server_that_exits_is_reported_with_its_status(tmp_path):
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([emulator_bin(), "conformance", "run", "builtin-http", "--filter", "http-round-trip",
                           "--data-dir", str(tmp_path / "runs"), "--junit", str(junit),
                           "--app-server-cmd", f"{sys.executable} -c 'import sys; sys.exit(3)'"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 1
    [failure] = ET.parse(junit).getroot().iter("failure")
    assert "the app server exited (status 3)" in failure.get("message"), failure.get("message")


def test_a_send_step_needs_an_http_scenario(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name":"x","devices":["a"],"steps":[{"send":{"to":"a"}}]}')
    proc = subprocess.run([emulator_bin(), "conformance", "run", str(bad), "--app-server-cmd", "true"],
                          capture_output=True, timeout=30)
    assert proc.returncode != 0
    assert "steps[0].send" in proc.stderr.decode(), proc.stderr.decode()
