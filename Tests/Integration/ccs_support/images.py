"""A local image server for notification images (test_platforms.py, test_dashboard.py): small and
2 MB PNGs, a 404, a page that is not an image, and images held until the test releases them."""

from __future__ import annotations

import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def png(width: int = 2, height: int = 2, padding: int = 0) -> bytes:
    """A valid PNG; `padding` bytes of an ancillary chunk make it as large as wanted."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    extra = chunk(b"teXt", b"pad\x00" + b"x" * padding) if padding else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + extra
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


class ImageServer:
    """/pizza-monster.png, /big.png (2 MB), /png/WxH.png, /missing.png (404), /page.html, and
    /slow/NAME.png, held until release(NAME)."""

    def __init__(self):
        self.small = png()
        self.big = png(padding=2 * 1024 * 1024)
        self.gates: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, status: int, body: bytes, content_type: str):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the device gave up on it: what the test checks

            def do_GET(self):
                if self.path == "/pizza-monster.png":
                    self.answer(200, outer.small, "image/png")
                elif self.path == "/big.png":
                    self.answer(200, outer.big, "image/png")
                elif self.path == "/page.html":
                    self.answer(200, b"<!doctype html><html><body>not an image</body></html>", "text/html; charset=utf-8")
                elif self.path.startswith("/png/") and self.path.endswith(".png"):
                    # /png/WxH.png: a red image of that size (up to 1024 each way).
                    try:
                        w, h = (min(1024, max(1, int(n))) for n in self.path[5:-4].split("x"))
                    except ValueError:
                        return self.answer(404, b"not found", "text/plain")
                    self.answer(200, png(w, h), "image/png")
                elif self.path.startswith("/slow/"):
                    outer.gate(self.path).wait(60)
                    self.answer(200, outer.small, "image/png")
                else:
                    self.answer(404, b"not found", "text/plain")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def gate(self, path: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(path, threading.Event())

    def release(self, path: str) -> None:
        self.gate(path).set()

    def close(self) -> None:
        for gate in list(self.gates.values()):
            gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()
