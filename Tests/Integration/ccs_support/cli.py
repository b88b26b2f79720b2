"""One-shot runs of the ccs-emulator binary (send, serve that must fail, --help) and ports in a known state."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

from .server import emulator_bin, track, untrack

RUN_TIMEOUT = 60.0


def run_cli(*args: str, timeout: float = RUN_TIMEOUT, cwd: Path | str | None = None,
            input: bytes | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs `ccs-emulator ARGS…` to completion; stdin is empty unless `input` is given."""
    proc = track(subprocess.Popen([emulator_bin(), *args], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True))
    try:
        out, err = proc.communicate(input or b"", timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"ccs-emulator {' '.join(args)} did not exit within {timeout}s\n"
                             f"stdout:\n{out.decode('utf-8', 'replace')[-3000:]}\n"
                             f"stderr:\n{err.decode('utf-8', 'replace')[-3000:]}") from None
    finally:
        untrack(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def json_lines(stdout: bytes) -> list[dict]:
    """Every stdout line as JSON (each must parse)."""
    return [json.loads(line) for line in stdout.decode("utf-8").splitlines() if line.strip()]


def serve_must_fail(data_dir: Path, *args: str, timeout: float = RUN_TIMEOUT) -> tuple[int, str]:
    """Runs `serve` on data_dir (port 0 everywhere unless args say otherwise) and waits for it to
    exit; fails the test if it becomes ready instead. Returns (exit status, stderr)."""
    data_dir = Path(data_dir)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    ready = data_dir.parent / f"{data_dir.name}.must-fail.ready.json"
    ready.unlink(missing_ok=True)
    ports = {"--ccs-port": "0", "--device-port": "0", "--http-port": "0", "--apns-port": "0",
             "--apns-feedback-port": "0", "--apns-http2-port": "0"}
    for i, a in enumerate(args):
        if a in ports:
            ports[a] = args[i + 1]
    argv = [emulator_bin(), "serve", "--data-dir", str(data_dir), "--ready-file", str(ready)]
    for option, port in ports.items():
        if option not in args:
            argv += [option, port]
    argv += list(args)
    err_path = data_dir.parent / f"{data_dir.name}.must-fail.stderr.log"
    with open(err_path, "wb") as err:
        proc = track(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                      start_new_session=True))
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            if ready.exists():
                proc.kill()
                proc.wait(10)
                raise AssertionError(f"serve started although it should not have: {argv}\n"
                                     f"{err_path.read_text('utf-8', 'replace')[-3000:]}")
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait(10)
                raise AssertionError(f"serve neither failed nor became ready within {timeout}s: {argv}")
            time.sleep(0.05)
    finally:
        untrack(proc)
    return proc.returncode, err_path.read_text("utf-8", "replace")


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for as long as the block runs: bound by us, not
    listening, so nothing else can take it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]
    finally:
        s.close()


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A loopback port with a listener on it (which never accepts): binding it again fails with
    EADDRINUSE, and a client's connection is accepted by the kernel and then left unanswered."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]
    finally:
        s.close()
