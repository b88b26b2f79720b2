"""Sends a batch of HTTP v1 messages the way older firebase-admin versions' `send_all` did:
googleapiclient's BatchHttpRequest (multipart/mixed to POST /batch), one HttpRequest per message,
authorised with google-auth through google-auth-httplib2: python batch_driver.py JOB.json.

JOB: {"credentials": PATH, "base": "http://127.0.0.1:PORT", "project": P, "messages": [MSG…]}, MSG the
v1 message JSON. Prints one JSON line {"responses": [{"id": REQUEST_ID, "name": …} or
{"id": …, "status": HTTP, "error": GOOGLE_ERROR}…]} in the order the callbacks ran.
"""

from __future__ import annotations

import json
import sys

import google_auth_httplib2
import httplib2
from google.oauth2 import service_account
from googleapiclient import http as apiclient_http


def main() -> None:
    job = json.load(open(sys.argv[1]))
    creds = service_account.Credentials.from_service_account_file(
        job["credentials"], scopes=["https://www.googleapis.com/auth/firebase.messaging"])
    # No proxy from the environment: the base URL points at the emulator's HTTP port.
    transport = google_auth_httplib2.AuthorizedHttp(creds, http=httplib2.Http(proxy_info=None, timeout=30))
    responses = []

    def callback(request_id, response, exception):
        if exception is None:
            responses.append({"id": request_id, "name": response["name"]})
        else:
            responses.append({"id": request_id, "status": exception.resp.status,
                              "error": json.loads(exception.content.decode())["error"]})

    batch = apiclient_http.BatchHttpRequest(callback=callback, batch_uri=job["base"] + "/batch")
    url = f'{job["base"]}/v1/projects/{job["project"]}/messages:send'
    for i, message in enumerate(job["messages"]):
        request = apiclient_http.HttpRequest(
            http=transport, postproc=lambda resp, content: json.loads(content.decode()), uri=url, method="POST",
            body=json.dumps({"message": message}), headers={"content-type": "application/json"})
        batch.add(request, request_id=f"m{i}")
    batch.execute(http=transport)
    print(json.dumps({"responses": responses}), flush=True)


if __name__ == "__main__":
    main()
