"""Stanza-level transcripts of the emulator's own conversations (Fixtures/conformance/transcripts/*.scan),
each run over real TLS against the module's server; the format is in that directory's README."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccs_support.transcript import Runner, parse

TRANSCRIPTS = sorted((Path(__file__).resolve().parents[2] / "Fixtures" / "conformance" / "transcripts").glob("*.scan"))


def test_there_are_transcripts():
    assert len(TRANSCRIPTS) >= 20, [p.name for p in TRANSCRIPTS]


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript(server, devices, path):
    transcript = parse(path)
    assert transcript.title, f"{path.name}: the first comment line is its title"
    runner = Runner(server, devices)
    try:
        runner.run(transcript)
    finally:
        runner.close()
