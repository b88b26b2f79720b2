"""Runs pyfcm 2.x (unmodified, from PyPI) against the emulator: python pyfcm2_driver.py JOB.json.

pyfcm 2 has no base-URL setting (its v1 endpoint is https://fcm.googleapis.com, fixed), so the only
redirection its documentation offers is a proxy: the caller sets HTTPS_PROXY to the emulator's proxy
mode and REQUESTS_CA_BUNDLE to its CA (run_driver), and the service-account file keeps Google's
token_uri. pyfcm 2 is installed apart from pyfcm 1.x (requirements-pyfcm2.txt): its directory goes
first on the path, nothing else changes.

JOB: {"credentials": PATH, "project_id": P or null, "ops": [{"notify": {KWARGS of FCMNotification.notify}}, …]}
Prints one JSON line: {"results": [{"name": …} | {"error": CLASS, "message": …}, …]}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(sys.prefix) / "extra" / "pyfcm2"))

import pyfcm  # noqa: E402
from pyfcm import FCMNotification  # noqa: E402


def main() -> None:
    job = json.load(open(sys.argv[1]))
    assert pyfcm.__file__.startswith(str(Path(sys.prefix) / "extra" / "pyfcm2")), pyfcm.__file__
    fcm = FCMNotification(service_account_file=job["credentials"], project_id=job.get("project_id"))
    results = []
    for op in job["ops"]:
        try:
            results.append(fcm.notify(**op["notify"], timeout=30))
        except Exception as e:  # the test asserts on the class pyfcm raised
            results.append({"error": type(e).__name__, "message": str(e)})
    print(json.dumps({"results": results, "version": pyfcm.__version__}), flush=True)


if __name__ == "__main__":
    main()
