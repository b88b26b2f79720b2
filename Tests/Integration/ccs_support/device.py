"""The simulated device CLI (`ccs-emulator device ...`) as a subprocess.

Its stdout (one JSON object per line) is read by a background thread into a queue;
`expect(predicate, timeout)` waits for the first not-yet-consumed event that matches.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .server import emulator_bin, track, untrack

_EOF = object()


class DeviceCLI:
    def __init__(self, http_port: int, app: str, senders: list[str], *, platform: str | None = None,
                 token: str | None = None, log_dir: Path | None = None, name: str = "device",
                 extra: list[str] | None = None, apns: bool = False):
        args = [emulator_bin(), "device", "--emulator", f"http://127.0.0.1:{http_port}", "--app", app]
        for s in senders:
            args += ["--sender", str(s)]
        if platform:
            args += ["--platform", platform]
        if token:
            args += [f"--token={token}"]  # a token may start with "-"
        args += extra or []
        if apns:
            args += ["--apns"]
        self.args = args
        self.stderr_path = (Path(log_dir) / f"{name}.{time.monotonic_ns()}.stderr.log") if log_dir else None
        err = open(self.stderr_path, "wb") if self.stderr_path else subprocess.DEVNULL
        try:
            self.proc = track(subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=err, start_new_session=True))
        finally:
            if self.stderr_path:
                err.close()
        self._q: queue.Queue = queue.Queue()
        self._pending: list[dict] = []   # read but not yet matched by expect()
        self.events: list[dict] = []     # everything ever read, in order
        self.eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"event": "_unparsed", "line": line}
            self._q.put(ev)
        self._q.put(_EOF)

    def _pull(self, timeout: float) -> bool:
        """Moves one event from the reader into _pending. False on timeout or EOF."""
        if self.eof:
            return False
        try:
            item = self._q.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return False
        if item is _EOF:
            self.eof = True
            return False
        self.events.append(item)
        self._pending.append(item)
        return True

    def expect(self, predicate: Callable[[dict], bool] | str, timeout: float = 20.0) -> dict:
        """The first unconsumed event matching predicate (or with that "event" name); consumes it."""
        if isinstance(predicate, str):
            name = predicate
            predicate = lambda e: e.get("event") == name  # noqa: E731
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self._pending):
                if predicate(ev):
                    return self._pending.pop(i)
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                raise AssertionError(
                    f"device CLI: no matching event within {timeout}s (exited={self.proc.poll()}); "
                    f"unmatched events: {self._pending[-20:]!r}; stderr: {self.stderr_tail()!r}")
            self._pull(left)

    def collect(self, predicate: Callable[[dict], bool], quiet: float, timeout: float,
                until: Callable[[list[dict]], bool] | None = None) -> list[dict]:
        """Consumes matching events until none arrived for `quiet` seconds (or `until` holds, or timeout)."""
        got: list[dict] = []
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline:
            keep = []
            for ev in self._pending:
                (got if predicate(ev) else keep).append(ev)
            if len(keep) != len(self._pending):
                last = time.monotonic()
            self._pending = keep
            if until is not None and until(got):
                break
            if time.monotonic() - last >= quiet:
                break
            if not self._pull(min(0.2, max(deadline - time.monotonic(), 0))) and self.eof:
                break
        return got

    def drain(self, timeout: float = 0.1, predicate: Callable[[dict], bool] | None = None) -> list[dict]:
        """Consumes and returns the matching events that arrive within `timeout` (default: messages)."""
        pred = predicate or (lambda e: e.get("event") == "message")
        deadline = time.monotonic() + timeout
        while self._pull(max(deadline - time.monotonic(), 0.0)):
            pass
        got = [e for e in self._pending if pred(e)]
        self._pending = [e for e in self._pending if not pred(e)]
        return got

    def messages(self, quiet: float = 3.0, timeout: float = 30.0,
                 until: Callable[[list[dict]], bool] | None = None) -> list[dict]:
        """The "message" objects of message events, until quiet."""
        evs = self.collect(lambda e: e.get("event") == "message", quiet, timeout, until)
        return [e["message"] for e in evs]

    def send(self, cmd: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()

    def close(self, timeout: float = 15.0) -> int:
        """Closes stdin (the CLI then disconnects and exits) and waits; kills it if it does not exit."""
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            rc = None
        self._reader.join(5)
        while self._pull(0):  # keep whatever it printed last
            pass
        untrack(self.proc)
        if rc is None:
            raise AssertionError(f"device CLI did not exit within {timeout}s after end of stdin")
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except Exception:
            pass
        untrack(self.proc)

    def stderr_tail(self, n: int = 2000) -> str:
        if not self.stderr_path:
            return ""
        try:
            return self.stderr_path.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self) -> "DeviceCLI":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            try:
                self.close(timeout=5)
            except Exception:
                self.kill()
        else:
            untrack(self.proc)
