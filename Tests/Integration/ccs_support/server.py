"""Start and stop the real ccs-emulator binary for a test.

The server is started on port 0 everywhere, in a data dir of the test's choosing, and is
waited for through its --ready-file. Every process started here is registered so an atexit
hook can kill it if a test run is interrupted: no test leaks a server.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0

_live: set[subprocess.Popen] = set()


def _kill_leftovers() -> None:
    for proc in list(_live):
        if proc.poll() is None:
            try:
                proc.kill()
                proc.wait(5)
            except Exception:
                pass
        _live.discard(proc)


atexit.register(_kill_leftovers)


def track(proc: subprocess.Popen) -> subprocess.Popen:
    """Registers a child process for the atexit kill."""
    _live.add(proc)
    return proc


def untrack(proc: subprocess.Popen) -> None:
    _live.discard(proc)


def emulator_bin() -> str:
    """The binary under test: $CCS_EMULATOR_BIN, else the repo's .build/debug/ccs-emulator."""
    env = os.environ.get("CCS_EMULATOR_BIN")
    if env:
        return env
    repo = Path(__file__).resolve().parents[3]
    guess = repo / ".build" / "debug" / "ccs-emulator"
    if guess.exists():
        return str(guess)
    raise RuntimeError(
        "CCS_EMULATOR_BIN is not set and .build/debug/ccs-emulator does not exist; "
        "run scripts/test, or build and export CCS_EMULATOR_BIN=/abs/path/ccs-emulator"
    )


def _tail(path: Path, n: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-n:].decode("utf-8", "replace")


def postgres_url() -> str | None:
    """The throwaway PostgreSQL server of scripts/test ($CCS_TEST_POSTGRES_URL), if there is one."""
    return os.environ.get("CCS_TEST_POSTGRES_URL") or None


def create_database(name: str) -> str:
    """A database of this name on the test PostgreSQL server (made if missing); returns its URL."""
    base = postgres_url()
    assert base, "CCS_TEST_POSTGRES_URL is not set (scripts/test starts a throwaway server)"
    exists = subprocess.run(["psql", base, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{name}'"],
                            capture_output=True, text=True, check=True).stdout.strip()
    if exists != "1":
        subprocess.run(["psql", base, "-qc", f"CREATE DATABASE {name}"], capture_output=True, text=True, check=True)
    return base.rsplit("/", 1)[0] + "/" + name


def store_args(data_dir: Path) -> list[str]:
    """`--store URL` when CCS_TEST_STORE=postgres: the whole suite can run on the PostgreSQL backend,
    one database per data dir (a restart on the same data dir finds its state again)."""
    if os.environ.get("CCS_TEST_STORE", "sqlite") != "postgres":
        return []
    digest = hashlib.sha1(str(Path(data_dir).resolve()).encode()).hexdigest()[:20]
    return ["--store", create_database("ccs_srv_" + digest)]


class EmulatorServer:
    """One run of `ccs-emulator serve` (a context manager; restartable on the same data dir)."""

    def __init__(self, data_dir: Path, *, auth: str | None = None, config: Path | None = None,
                 extra_args: list[str] | None = None, log_dir: Path | None = None):
        self.data_dir = Path(data_dir)
        self.auth = auth
        self.config = config
        self.extra_args = list(extra_args or [])
        self.log_dir = Path(log_dir) if log_dir else self.data_dir.parent
        self.proc: subprocess.Popen | None = None
        self.ready: dict[str, Any] = {}
        self.runs = 0
        self.stdout_path: Path | None = None
        self.stderr_path: Path | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        assert self.proc is None or self.proc.poll() is not None, "server already running"
        self.runs += 1
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        tag = f"{self.data_dir.name}.run{self.runs}"
        ready_file = self.log_dir / f"{tag}.ready.json"
        if ready_file.exists():
            ready_file.unlink()
        self.stdout_path = self.log_dir / f"{tag}.stdout.log"
        self.stderr_path = self.log_dir / f"{tag}.stderr.log"
        args = [
            emulator_bin(), "serve",
            "--data-dir", str(self.data_dir),
            "--bind", "127.0.0.1",
            "--ccs-port", "0", "--device-port", "0", "--http-port", "0",
            "--apns-port", "0", "--apns-feedback-port", "0", "--apns-http2-port", "0",
            "--ready-file", str(ready_file),
        ]
        if self.auth:
            args += ["--auth", self.auth]
        if self.config:
            args += ["--config", str(self.config)]
        if not any(a == "--store" for a in self.extra_args):
            args += store_args(self.data_dir)
        # `scripts/test` runs the suite a second time with the devices over several shards.
        shards = os.environ.get("CCS_TEST_SHARDS")
        if shards and "--shards" not in self.extra_args:
            args += ["--shards", shards]
        args += self.extra_args
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = track(subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                               stderr=err, start_new_session=True))
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if ready_file.exists():
                text = ready_file.read_text()
                if text.strip().endswith("}"):
                    try:
                        self.ready = json.loads(text)
                        break
                    except ValueError:
                        pass  # partially written; read again
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"ccs-emulator serve exited with {self.proc.returncode} before it was ready; "
                    f"args={args}\nstderr:\n{_tail(self.stderr_path)}\nstdout:\n{_tail(self.stdout_path)}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(
                    f"ccs-emulator serve not ready within {READY_TIMEOUT:.0f}s; args={args}\n"
                    f"stderr:\n{_tail(self.stderr_path)}")
            time.sleep(0.05)
        return self.ready

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait, then SIGKILL if needed. Returns the exit status (None if never started)."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        untrack(proc)
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL (a crash), and reap."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(10)
        untrack(proc)

    def __enter__(self) -> "EmulatorServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- accessors ------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def ccs_port(self) -> int:
        return int(self.ready["ccs_port"])

    @property
    def device_port(self) -> int:
        return int(self.ready["device_port"])

    @property
    def http_port(self) -> int:
        return int(self.ready["http_port"])

    @property
    def ca_cert(self) -> str:
        return str(self.ready["ca_cert"])

    @property
    def http_base(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def stderr_tail(self, n: int = 4000) -> str:
        return _tail(self.stderr_path, n) if self.stderr_path else ""

    def stdout_text(self) -> str:
        return self.stdout_path.read_text("utf-8", "replace") if self.stdout_path else ""

    def rss_kib(self) -> int:
        """VmRSS of the server process, in KiB, from /proc/<pid>/status."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("VmRSS not found")
