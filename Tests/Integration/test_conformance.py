"""`ccs-emulator conformance run` against the sample app servers (Fixtures/conformance/app-servers): the
careful one passes the built-in suite; breaking one client rule at a time fails exactly the scenario that
judges it, for that reason; the JUnit XML is parsed and checked. These are tests of the runner, the faults
and the audit together, through a real slixmpp client."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ccs_support import emulator_bin

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "Fixtures" / "conformance" / "app-servers" / "sample_app_server.py"
EXAMPLES = ROOT / "Fixtures" / "conformance" / "scenarios"


def run(tmp_path: Path, *args: str, app_args: str = "", timeout: float = 85) -> tuple[int, str, ET.Element]:
    junit = tmp_path / "junit.xml"
    cmd = [emulator_bin(), "conformance", "run", *args, "--data-dir", str(tmp_path / "runs"),
           "--app-server-cmd", f"{sys.executable} {SAMPLE} {app_args}", "--junit", str(junit)]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout)
    out = proc.stdout.decode()
    return proc.returncode, out, ET.parse(junit).getroot()


def cases(root: ET.Element) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in root.iter("testcase")}


def builtin_names() -> list[str]:
    import json
    proc = subprocess.run([emulator_bin(), "conformance", "show", "builtin"], capture_output=True, timeout=30)
    assert proc.returncode == 0
    return [s["name"] for s in json.loads(proc.stdout)]


def test_the_careful_app_server_passes_the_builtin_suite(tmp_path):
    status, out, root = run(tmp_path, "builtin")
    assert status == 0, out
    names = builtin_names()
    assert root.tag == "testsuites" and root.get("tests") == str(len(names)) and root.get("failures") == "0", out
    assert list(cases(root)) == names
    assert all(c.find("failure") is None for c in root.iter("testcase"))
    assert f"{len(names)} passed, 0 failed" in out, out


# (what the app server breaks, the scenario that must fail, what its failure must say)
ONE_AT_A_TIME = [
    ("ack-upstream", "ack-upstream", "(expect_acked)"),
    ("ack-receipts", "ack-upstream", "dr2:"),
    ("pending-limit", "pending-limit", "audit: broken pending-limit"),
    ("drain", "draining", "(expect_new_connection)"),
    ("retry-backoff", "retry-service-unavailable", "audit: broken retry-backoff"),
    ("retry-backoff", "retry-internal-server-error", "audit: broken retry-backoff"),
    ("no-resend-acked", "no-resend-acked", "audit: broken no-resend-acked"),
    ("drop-unregistered", "drop-unregistered", "audit: broken drop-unregistered"),
    ("use-canonical-id", "use-canonical-id", "audit: broken use-canonical-id"),
    ("resend-lost", "connection-lost", "(expect_downstream)"),
]


@pytest.mark.parametrize("way,scenario,reason", ONE_AT_A_TIME, ids=[f"{w}-{s}" for w, s, _ in ONE_AT_A_TIME])
def test_breaking_one_rule_fails_the_scenario_that_judges_it(tmp_path, way, scenario, reason):
    status, out, root = run(tmp_path, "builtin", "--filter", scenario, app_args=f"--break {way}")
    assert status == 1, out
    [case] = [c for name, c in cases(root).items() if name == scenario]
    failure = case.find("failure")
    assert failure is not None, out
    assert reason in failure.get("message"), (failure.get("message"), out)
    # The failure's text names the scenario's rules with their sources: public documents, and the
    # page in the repository that gives their addresses.
    assert "docs/sources.md" in (failure.text or "") and "GCM CCS guide" in (failure.text or ""), failure.text


def test_the_careless_app_server_fails_and_the_report_says_why(tmp_path):
    status, out, root = run(tmp_path, "builtin", "--filter", "round-trip", "--filter", "no-resend-acked",
                            "--filter", "drop-unregistered", app_args="--careless")
    assert status == 1, out
    outcome = {name: c.find("failure") is None for name, c in cases(root).items()}
    assert outcome == {"round-trip": True, "no-resend-acked": False, "drop-unregistered": False}, out
    assert root.get("tests") == "3" and root.get("failures") == "2"
    assert "FAIL builtin/drop-unregistered" in out and "finding drop-unregistered" in out, out
    # The app server's own log is in the report.
    assert any("session started" in (c.findtext("system-out") or "") for c in root.iter("testcase"))


def test_example_scenario_files_run(tmp_path):
    status, out, root = run(tmp_path, str(EXAMPLES))
    assert status == 0, out
    assert int(root.get("tests")) >= 2 and root.get("failures") == "0", out


def test_bad_scenario_files_are_refused_with_the_path(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name":"x","devices":["a"],"steps":[{"upstream":{"from":"nobody"}}]}')
    proc = subprocess.run([emulator_bin(), "conformance", "run", str(bad), "--app-server-cmd", "true"],
                          capture_output=True, timeout=30)
    assert proc.returncode != 0
    assert "steps[0].upstream.from" in proc.stderr.decode(), proc.stderr.decode()
