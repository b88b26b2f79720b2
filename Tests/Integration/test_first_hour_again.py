"""The first hour, again (issue 46): a foreign service-account key under --auth strict says why and
is logged; scripts/serve starts at once when nothing changed; every document the repository cites
is in it."""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from ccs_support import new_sender_id
from ccs_support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]


# -- a foreign service-account key in strict mode -----------------------------------------------------

def token_request(srv, info: dict) -> tuple[int, dict]:
    """POST /token with an assertion signed by `info`'s private key, as google-auth makes it."""
    from google.auth import crypt, jwt
    now = int(time.time())
    assertion = jwt.encode(crypt.RSASigner.from_service_account_info(info), {
        "iss": info["client_email"], "aud": "https://oauth2.googleapis.com/token",
        "scope": "https://www.googleapis.com/auth/firebase.messaging", "iat": now, "exp": now + 3600,
    }).decode()
    body = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                   "assertion": assertion}).encode()
    request = urllib.request.Request(srv.http_base + "/token", data=body, method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def issue_credentials(data_dir: Path, project: str, out: Path) -> dict:
    proc = run_cli("credentials", "--project", project, "--data-dir", str(data_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    return json.loads(out.read_text())


def test_a_foreign_key_in_strict_mode_is_logged_and_answered_with_a_hint(start_server, tmp_path):
    sender = new_sender_id()
    config = tmp_path / "senders.json"
    config.write_text(json.dumps({"senders": [{"sender_id": sender, "server_key": "k"}]}))
    srv = start_server(auth="strict", config=config)
    ours = issue_credentials(srv.data_dir, sender, tmp_path / "ours.json")
    # A file from somewhere else (Google, another emulator's data dir): a key this one never issued.
    foreign = issue_credentials(tmp_path / "elsewhere", sender, tmp_path / "foreign.json")

    status, answer = token_request(srv, ours)
    assert status == 200 and answer.get("access_token"), answer

    status, answer = token_request(srv, foreign)
    assert status == 400, answer
    # Google's code and text, then the hint: which keys the emulator knows, how to get one.
    assert answer["error"] == "invalid_grant", answer
    description = answer["error_description"]
    assert description.startswith("Invalid JWT Signature. (ccs-emulator"), description
    assert f'"{foreign["private_key_id"]}" is not a key this emulator issued' in description, description
    assert f'{ours["private_key_id"]} (project {sender})' in description, description
    assert "POST /emulator/v1/credentials" in description and "ccs-emulator credentials" in description, description

    # Logged at the default level, with the key id. The line is written before the answer is sent.
    log = srv.stderr_path.read_text()
    refusals = [line for line in log.splitlines() if "OAuth2 token refused" in line]
    assert refusals and foreign["private_key_id"] in refusals[0], log[-3000:]


# -- scripts/serve starts at once when nothing changed ------------------------------------------------

FAKE_EMULATOR = '#!/bin/sh\necho "fake ccs-emulator $*"\n'
# Records its arguments; builds nothing (as a build that finds nothing to do), and succeeds.
FAKE_SWIFT = '#!/bin/sh\necho "$*" >> "$(dirname "$0")/swift-calls"\n'


def serve(scratch: Path, fake_bin: Path, *args: str) -> tuple[str, str]:
    """scripts/serve ARGS with CCS_SCRATCH_PATH=scratch and a `swift` on PATH that only records."""
    import os
    import subprocess
    env = dict(os.environ, CCS_SCRATCH_PATH=str(scratch), PATH=f"{fake_bin}:{os.environ['PATH']}")
    env.pop("CCS_SERVE_BUILD", None)
    proc = subprocess.run([str(REPO / "scripts" / "serve"), *args], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=300)
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    return out, err


def fake_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    import os
    scratch, fake_bin = tmp_path / "scratch", tmp_path / "bin"
    (scratch / "release").mkdir(parents=True)
    fake_bin.mkdir()
    swift = fake_bin / "swift"
    swift.write_text(FAKE_SWIFT)
    swift.chmod(0o755)
    emulator = scratch / "release" / "ccs-emulator"
    emulator.write_text(FAKE_EMULATOR)
    emulator.chmod(0o755)
    # Newer than every source, manifest and resolved file: now, and a second later than the newest.
    newest = max(p.stat().st_mtime for p in [REPO / "Package.swift", REPO / "Package.resolved",
                                              *(REPO / "Sources").rglob("*")])
    os.utime(emulator, (max(newest, time.time()) + 1,) * 2)
    return scratch, fake_bin, emulator


def test_serve_starts_at_once_when_nothing_changed(tmp_path):
    scratch, fake_bin, _ = fake_tree(tmp_path)
    out, err = serve(scratch, fake_bin, "--ccs-port", "0")
    assert out == "fake ccs-emulator serve --ccs-port 0\n", out
    assert "newer than every source, manifest and resolved file: starting it without a build" in err, err
    assert not (fake_bin / "swift-calls").exists(), (fake_bin / "swift-calls").read_text()


def test_serve_builds_when_a_source_is_newer(tmp_path):
    import os
    scratch, fake_bin, emulator = fake_tree(tmp_path)
    # A binary from long ago: every source is newer (as after a pull or an edit).
    os.utime(emulator, (946684800, 946684800))
    out, err = serve(scratch, fake_bin, "--ccs-port", "0")
    assert f"is newer than {scratch}/release/ccs-emulator: building the release binary" in err, err
    calls = (fake_bin / "swift-calls").read_text().splitlines()
    assert calls == [f"build -c release --scratch-path {scratch} --product ccs-emulator"], calls
    assert out == "fake ccs-emulator serve --ccs-port 0\n", out

    # That build changed nothing (the binary is as old as before), yet the next start knows it is
    # current: the stamp of the last successful build, dated when it started.
    (fake_bin / "swift-calls").unlink()
    out, err = serve(scratch, fake_bin)
    assert "starting it without a build" in err, err
    assert not (fake_bin / "swift-calls").exists()
    assert out == "fake ccs-emulator serve\n", out


# -- every document the repository cites is in it, or public --------------------------------------------

# The notes the emulator was built from, beside the repository on its developers' machines but not in
# a clone: a citation of them sends a reader nowhere (docs/sources.md maps their sections to the
# public documents instead).
# The private notes' file names; one the repository's own docs/ also has (docs/web-push.md) is
# that document when cited, and test_every_file_the_docs_name_exists checks it is there.
PRIVATE_NAMES = [n for n in ("ccs-protocol.md", "fcm-http.md", "apns-legacy.md", "apns-http2.md", "web-push.md",
                             "design.md") if not (REPO / "docs" / n).exists()]
OUTSIDE = re.compile(r"\.\./shared|shared/(spec|seeds|design)" + "".join("|" + re.escape(n) for n in PRIVATE_NAMES))
# Paths from the repository's root, as the docs write them: `Sources/X/Y.swift`, docs/z.md.
ROOTED = re.compile(r"(?<![\w./-])((?:docs|Sources|Tests|Fixtures|scripts)/[\w./+-]*[\w])")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
MD_NAME = re.compile(r"(?<![\w/.-])([\w-]+\.md)\b")


def cited_texts() -> list[Path]:
    """The texts a reader follows citations from: docs/, the READMEs, Fixtures/ (transcripts, the
    sample app server), the sources (the audit's findings, the built-in suite), the scripts."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for top, patterns in [("Fixtures", ["*.md", "*.scan", "*.py", "*.txt", "*.json"]), ("Sources", ["*.swift", "*.md"]),
                          ("scripts", ["*"])]:
        for pattern in patterns:
            files += sorted(p for p in (REPO / top).rglob(pattern) if p.is_file())
    return files


def test_no_citation_points_outside_the_repository():
    found = []
    for path in cited_texts():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:160]}")
    assert not found, "citations of files that are not in the repository (cite the public document, " \
                      "or docs/sources.md):\n" + "\n".join(found)


def test_every_file_the_docs_name_exists():
    names = {p.name for p in REPO.rglob("*") if ".build" not in p.parts and ".venv" not in p.parts}
    missing = []
    for path in cited_texts():
        text = path.read_text(errors="replace")
        if path.suffix == ".md":
            for target in MARKDOWN_LINK.findall(text):
                if re.match(r"[a-z]+:|#", target):
                    continue
                if not (path.parent / target.split("#")[0]).exists():
                    missing.append(f"{path.relative_to(REPO)}: link {target}")
        for rooted in ROOTED.findall(text):
            if any(c in rooted for c in "*+") or re.search(r"/[A-Z_]+(/|$|\.)", rooted):
                continue  # a pattern or a placeholder (Fixtures/fuzz/TARGET/), not a path
            if not (REPO / rooted).exists():
                missing.append(f"{path.relative_to(REPO)}: {rooted}")
        for name in MD_NAME.findall(text):
            if name not in names:
                missing.append(f"{path.relative_to(REPO)}: {name}")
    assert not missing, "named but not in the repository:\n" + "\n".join(sorted(set(missing)))


def test_findings_cite_public_documents_and_a_page_in_the_repository(server):
    """Every audit rule's source, as GET /emulator/v1/audit lists it (and every finding repeats it)."""
    from ccs_support import http_json
    status, audit = http_json("GET", server.http_base + "/emulator/v1/audit")
    assert status == 200, audit
    rules = audit["rules"]
    assert len(rules) >= 9, rules
    for rule in rules:
        source = rule["source"]
        assert not OUTSIDE.search(source), rule
        if source.startswith("https://"):
            # The HTTP rules name Google's public pages by their addresses (docs/conformance.md).
            assert all(re.match(r"https://(firebase|developers)\.google\.com/", s.strip()) for s in source.split(";")), rule
            continue
        assert "docs/sources.md" in source and (REPO / "docs" / "sources.md").exists(), rule
        assert any(doc in source for doc in ["GCM CCS guide", "FCM XMPP reference", "FCM legacy HTTP reference"]), rule


def test_each_sample_app_server_has_its_requirements_beside_it():
    samples = sorted((REPO / "Fixtures" / "conformance" / "app-servers").glob("*.py"))
    assert samples
    pinned = {line.split("==")[0].lower(): line for line in
              (REPO / "Tests" / "Integration" / "requirements.txt").read_text().splitlines() if "==" in line}
    for sample in samples:
        # The CCS sample's requirements.txt; each HTTP sample's requirements-http-*.txt (the shared
        # http_sample.py needs nothing beyond the standard library).
        kind = next((k for k in ("v1", "legacy") if f"http_{k}" in sample.name), None)
        requirements = sample.parent / (f"requirements-http-{kind}.txt" if kind else "requirements.txt")
        assert requirements.exists(), f"{sample.name} has no {requirements.name} beside it"
        wanted = [l for l in requirements.read_text().splitlines() if l.strip() and not l.startswith("#")]
        assert wanted
        # The same pins as the tests' venv, which scripts/setup installs both into.
        for line in wanted:
            assert pinned.get(line.split("==")[0].lower()) == line, (line, requirements)
        for module in re.findall(r"^import (\w+)", sample.read_text(), re.M):
            if module not in sys.stdlib_module_names:
                # A distribution's name may spell the module with "-" (firebase-admin: firebase_admin).
                assert any(l.lower().replace("-", "_").startswith(module.lower()) for l in wanted), (module, requirements)
    conformance = (REPO / "docs" / "conformance.md").read_text()
    assert "Fixtures/conformance/app-servers/requirements.txt" in conformance and "slixmpp" in conformance
    assert "app-servers/requirements.txt" in (REPO / "scripts" / "setup").read_text()


# -- every long build shows the same one-line progress ------------------------------------------------

def test_every_long_build_shows_one_progress_line(tmp_path):
    import subprocess
    for name in ["serve", "test", "tsan"]:
        text = (REPO / "scripts" / name).read_text()
        assert ". scripts/lib/quiet-build.sh" in text, name
        lines = text.splitlines()
        # Every build runs through quiet_build; only --show-bin-path (which builds nothing) runs bare.
        assert any(re.search(r"\bquiet_build \w+ .* swift build\b", line) for line in lines), name
        bare = [line for line in lines if line.lstrip().startswith("swift build") and "--show-bin-path" not in line]
        assert not bare, (name, bare)

    # Off a terminal: the first progress line at once, then one a minute; the full output in the log.
    fake_build = "echo '[1/3] Compiling A a.swift'; echo 'warning: not ours'; echo '[2/3] Compiling B b.swift'; echo 'Build complete! (1.00s)'"
    log = tmp_path / "build.log"
    proc = subprocess.run(["bash", "-c", f'. scripts/lib/quiet-build.sh; quiet_build tsan "{log}" sh -c "$0"', fake_build],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("tsan: building: 0m0") and lines[0].endswith("[1/3] Compiling A a.swift"), lines
    assert "Build complete! (1.00s)" in lines and not any("[2/3]" in line for line in lines), lines
    assert log.read_text().count("\n") == 4

    # A failure: its status, and the end of the log without the progress lines.
    proc = subprocess.run(["bash", "-c", f'. scripts/lib/quiet-build.sh; quiet_build tsan "{log}" sh -c "$0"',
                           "echo '[1/2] Compiling A a.swift'; echo 'error: no such module'; exit 3"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc
    assert f"tsan: the build failed (exit status 3). The end of {log}" in proc.stderr, proc.stderr
    assert proc.stderr.rstrip().endswith("error: no such module"), proc.stderr


def test_scripts_test_says_what_it_will_do_and_how_long(tmp_path):
    """The plan every run prints at its start, which `scripts/test --plan` prints alone."""
    import os
    import subprocess

    def plan(*args: str, **env: str) -> str:
        proc = subprocess.run([str(REPO / "scripts" / "test"), "--plan", *args], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    everything = plan(CCS_TEST_TSAN="1")
    for phase in ["setup", "swift build --build-tests", "6-15 min", "swift unit tests", "integration tests",
                  "Thread Sanitizer (scripts/tsan)", "up to 26 min", "CCS_TEST_TSAN=0 skips it", "about 28 min",
                  "integration tests over 3 shards"]:
        assert phase in everything, (phase, everything)
    assert "over 3 shards" not in plan(CCS_TEST_SHARDS_PASS="0")
    assert "skipped (CCS_TEST_TSAN=0)" in plan(CCS_TEST_TSAN="0")
    unit = plan("--unit")
    assert "swift unit tests" in unit and "integration tests" not in unit and "Thread Sanitizer" not in unit, unit
    some = plan("-k", "aiofcm")
    assert "integration tests" in some and "swift unit tests" not in some and "over 3 shards" not in some, some
    # The plan is the first thing a run prints.
    assert "\nplan\nif [ \"$plan_only\" = 1 ]; then exit 0; fi\nphase \"setup\"" in (REPO / "scripts" / "test").read_text()
