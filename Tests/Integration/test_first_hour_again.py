"""The first hour, again (issue 46): a foreign service-account key under --auth strict says why and
is logged; scripts/serve starts at once when nothing changed; every document the repository cites
is in it."""

from __future__ import annotations

import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


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
