"""The emulator's admin HTTP API through urllib (no third-party HTTP client)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TIMEOUT = 15.0


def http_json(method: str, url: str, body: Any = None, timeout: float = TIMEOUT) -> tuple[int, Any]:
    """Sends a request; returns (status, parsed JSON body or raw text or None). Never raises on 4xx/5xx."""
    data = b"" if method in ("POST", "PUT", "PATCH") else None  # explicit Content-Length: 0
    headers = {"Accept": "application/json"}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    if not raw:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode("utf-8", "replace")


def register_device(base: str, app: str, senders: list[str], platform: str = "android") -> dict:
    status, body = http_json("POST", f"{base}/emulator/v1/devices",
                             {"app": app, "senders": list(senders), "platform": platform})
    assert status == 201, f"POST /emulator/v1/devices -> {status} {body!r}"
    assert isinstance(body, dict) and body.get("token"), f"no token in {body!r}"
    return body


def get_device(base: str, token: str) -> tuple[int, Any]:
    # Tokens are [A-Za-z0-9_-] plus one ':', which is legal as is in a path segment.
    return http_json("GET", f"{base}/emulator/v1/devices/{urllib.parse.quote(token, safe=':')}")


def list_devices(base: str) -> list[dict]:
    status, body = http_json("GET", f"{base}/emulator/v1/devices")
    assert status == 200, f"GET /emulator/v1/devices -> {status} {body!r}"
    return body["devices"]


def list_connections(base: str) -> list[dict]:
    status, body = http_json("GET", f"{base}/emulator/v1/connections")
    assert status == 200, f"GET /emulator/v1/connections -> {status} {body!r}"
    return body["connections"]


def store_sync(base: str) -> dict:
    """POST /emulator/v1/store/sync: returns once everything the server accepted is durable, so a
    crash test kills the server on that fact rather than after a sleep."""
    status, body = http_json("POST", f"{base}/emulator/v1/store/sync")
    assert status == 200 and body.get("durable") is True, f"POST /emulator/v1/store/sync -> {status} {body!r}"
    return body
