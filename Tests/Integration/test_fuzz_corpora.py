"""The fuzz corpora as regression tests: in the normal build each fuzz target replays files instead of
fuzzing (Sources/Fuzz/), so every seed and every crash reproducer under Fixtures/fuzz/TARGET/ runs here,
against the code as it is now (scripts/fuzz is the fuzzing itself; docs/hardening.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ccs_support import emulator_bin

ROOT = Path(__file__).resolve().parents[2]
TARGETS = sorted(p.name for p in (ROOT / "Fixtures" / "fuzz").iterdir() if p.is_dir())


def test_every_target_has_a_corpus():
    assert TARGETS == ["apns-frames", "apns-http2", "http-bodies", "json", "stanza", "topic-condition", "xml-stream"]


@pytest.mark.parametrize("target", TARGETS)
def test_corpus_replays_without_a_crash(target):
    binary = Path(emulator_bin()).parent / f"fuzz-{target}"
    corpus = ROOT / "Fixtures" / "fuzz" / target
    files = [p for p in corpus.iterdir() if not p.name.startswith(".")]
    proc = subprocess.run([str(binary), str(corpus)], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert proc.stdout.decode().strip() == f"{len(files)} inputs, no crash", proc.stdout
