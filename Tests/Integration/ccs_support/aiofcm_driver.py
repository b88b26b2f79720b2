"""Runs the unmodified aiofcm client against the emulator, in its own process.

Usage: python aiofcm_driver.py JOB.json   (prints one JSON object on stdout)

JOB: {"host": "127.0.0.1", "port": N, "sender_id": "123", "api_key": "k",
      "messages": [{"device_token": T, "message_id": M, "data": {...}, "time_to_live": n, ...}],
      "timeout": 30}
Output: {"responses": [{"message_id", "status", "description", "is_successful"} | {"message_id", "exception"}]}

Why a separate process: aiofcm's only knobs are the class attributes FCM_HOST/FCM_PORT, and
aioxmpp's TLS layer trusts what OpenSSL's default verify paths say. aioxmpp builds a pyOpenSSL
context (security_layer.default_ssl_context) and its PKIXCertificateVerifier calls
ctx.set_default_verify_paths(), which reads $SSL_CERT_FILE at that moment; the verifier then
checks the leaf certificate against the TLS server_hostname, which aioxmpp sets to the JID's
domain (gcm.googleapis.com), not to FCM_HOST. So the parent sets SSL_CERT_FILE=<emulator CA>
in this process's environment and nothing of aiofcm/aioxmpp is patched beyond host and port.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys


async def run(job: dict) -> dict:
    import aiofcm
    import aiofcm.connection
    from aiofcm import FCM, Message

    aiofcm.connection.FCMXMPPConnection.FCM_HOST = job.get("host", "127.0.0.1")
    aiofcm.connection.FCMXMPPConnection.FCM_PORT = int(job["port"])

    # max_connection_attempts bounds aiofcm's reconnect loop if the server refuses us.
    fcm = FCM(job["sender_id"], job["api_key"], max_connection_attempts=2)
    timeout = float(job.get("timeout", 30))

    async def one(spec: dict) -> dict:
        msg = Message(**spec)
        try:
            resp = await asyncio.wait_for(fcm.send_message(msg), timeout)
        except Exception as e:  # report, the test decides
            return {"message_id": spec.get("message_id"), "exception": f"{type(e).__name__}: {e}"}
        return {"message_id": resp.message_id, "status": resp.status,
                "description": resp.description, "is_successful": resp.is_successful}

    try:
        if job.get("sequential"):
            responses = [await one(spec) for spec in job["messages"]]
        else:
            responses = list(await asyncio.gather(*(one(spec) for spec in job["messages"])))
    finally:
        fcm.pool.close()
        await asyncio.sleep(0.2)  # let aioxmpp send its stream footer
    return {"responses": responses}


def main() -> None:
    with open(sys.argv[1]) as f:
        job = json.load(f)
    assert os.environ.get("SSL_CERT_FILE"), "SSL_CERT_FILE must point at the emulator's CA"
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    result = asyncio.run(run(job))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
