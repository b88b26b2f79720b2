"""The APNs HTTP/2 provider API over real TLS and HTTP/2 (the `h2` package sends exactly the headers
a test gives): every status of Apple's table, the provider-token rules (ES256, kid, iss, iat, one
team per connection, 20-minute updates, topic-specific and environment-limited keys), certificate
auth, the rules no mock checks (topic suffix per push type, background priority and payload, VoIP
size, Live Activities with tokens only), one stream until a token verified, delivery to a simulated
iOS device, the journal, fault rules, and 503 Shutdown at a graceful stop. aioapns (an unmodified
client library) is in test_apns_aioapns.py."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
import uuid

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ccs_support import get_device, http_json, store_sync
from ccs_support.apns import issue_cert, register_ios
from ccs_support.apns_http2 import PRODUCTION, SANDBOX, H2Provider, issue_key, provider_token, proxy_tunnel

APP = "com.example.h2app"
OTHER = "com.example.h2other"
TEAM, KEY = "TEAMH20001", "KEYH200001"


@pytest.fixture(scope="module")
def keys(server, tmp_path_factory):
    out = tmp_path_factory.mktemp("apns-keys")
    made = {
        "team": (issue_key(server.data_dir, TEAM, KEY, out / "team.p8"), out / "team.p8", KEY, TEAM),
        "other_team": (issue_key(server.data_dir, "TEAMH20002", "KEYH200002", out / "other.p8"),
                       out / "other.p8", "KEYH200002", "TEAMH20002"),
        "topic": (issue_key(server.data_dir, TEAM, "KEYH200003", out / "topic.p8", topics=[OTHER]),
                  out / "topic.p8", "KEYH200003", TEAM),
        "sandbox": (issue_key(server.data_dir, "TEAMH20004", "KEYH200004", out / "sandbox.p8",
                              environment="sandbox"), out / "sandbox.p8", "KEYH200004", "TEAMH20004"),
    }
    return {name: {"line": m[0], "p8": m[1], "kid": m[2], "team": m[3]} for name, m in made.items()}


def bearer(key: dict, **kw) -> tuple[str, str]:
    return ("authorization", "bearer " + provider_token(key["p8"], key["kid"], key["team"], **kw))


def connect(server, host: str = SANDBOX, cert: str | None = None) -> H2Provider:
    return H2Provider(int(server.ready["apns_http2_port"]), server.ready["ca_cert"], host=host, cert=cert)


def alert(text: str = "Hello", **aps) -> bytes:
    return json.dumps({"aps": {"alert": text, **aps}}, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def device_token(server) -> str:
    return register_ios(server.http_base, APP)["apns_token"]


@pytest.fixture(scope="module")
def other_token(server) -> str:
    return register_ios(server.http_base, OTHER)["apns_token"]


@pytest.fixture
def authed(server, keys, device_token):
    """A token connection whose first request was accepted (1,000 streams open)."""
    c = connect(server)
    auth = bearer(keys["team"])
    status, _, _ = c.post(f"/3/device/{device_token}", [auth, ("apns-topic", APP)], alert())
    assert status == 200
    c.auth = auth
    yield c
    c.close()


def test_ready_line_and_info_name_the_port(server):
    port = int(server.ready["apns_http2_port"])
    assert port > 0
    status, info = http_json("GET", f"{server.http_base}/emulator/v1/info")
    assert status == 200 and info["apns_http2_port"] == port


def test_apns_key_writes_a_private_p8_the_provider_loads(keys):
    p8 = keys["team"]["p8"]
    assert oct(p8.stat().st_mode & 0o777) == "0o600"
    text = p8.read_text()
    assert text.startswith("-----BEGIN PRIVATE KEY-----")
    key = serialization.load_pem_private_key(text.encode(), password=None)
    assert isinstance(key.curve, ec.SECP256R1)
    assert keys["topic"]["line"]["topics"] == [OTHER] and keys["sandbox"]["line"]["environment"] == "sandbox"


def test_one_stream_until_a_token_verified_then_1000(server, keys, device_token):
    with connect(server) as c:
        c.wait_for_settings(lambda s: 3 in s)
        assert c.max_concurrent_streams == 1
        status, _, body = c.post(f"/3/device/{device_token}", [("apns-topic", APP)], alert())
        assert (status, body) == (403, {"reason": "MissingProviderToken"})
        assert c.max_concurrent_streams == 1
        status, _, _ = c.post(f"/3/device/{device_token}", [bearer(keys["team"]), ("apns-topic", APP)], alert())
        assert status == 200
        c.wait_for_settings(lambda s: s.get(3) == 1000)


def test_accepted_notification_reaches_the_ios_device(server, keys, devices):
    dev = devices(server, APP, [], platform="ios", apns=True)
    token = dev.expect("registered")["apns_token"]
    dev.expect("connected")
    apns_id = str(uuid.uuid4()).upper()
    auth = bearer(keys["team"])  # one token for the connection's life, as providers do
    with connect(server) as c:
        status, headers, body = c.post(f"/3/device/{token}", [
            auth, ("apns-topic", APP), ("apns-id", apns_id), ("apns-push-type", "alert"),
            ("apns-priority", "10"), ("apns-collapse-id", "score")], alert("Goal!", badge=2))
        assert status == 200 and body is None
        assert headers["apns-id"] == apns_id
        uuid.UUID(headers["apns-unique-id"])  # the sandbox host adds it
        event = dev.expect("apns")
        assert event["alert"] == "Goal!" and event["badge"] == 2 and event["presentation"] == "alert"
        assert event["apns"]["apns_id"] == apns_id and event["apns"]["push_type"] == "alert"
        assert event["apns"]["collapse_id"] == "score" and event["apns"]["topic"] == APP
        # A made-up apns-id when the provider sends none; a background push wakes the app silently.
        status, headers, _ = c.post(f"/3/device/{token}", [
            auth, ("apns-topic", APP), ("apns-push-type", "background"), ("apns-priority", "5")],
            json.dumps({"aps": {"content-available": 1}, "k": "v"}).encode())
        assert status == 200
        uuid.UUID(headers["apns-id"])
        event = dev.expect("apns")
        assert event["presentation"] == "background_wakeup" and event["payload"]["k"] == "v"
        status, _, _ = c.post(f"/3/device/{token}", [
            auth, ("apns-topic", APP + ".voip"), ("apns-push-type", "voip")],
            json.dumps({"aps": {}, "caller": "x" * 4900}).encode())
        assert status == 200  # 5 KB for VoIP
        assert dev.expect("apns")["presentation"] == "voip_call"
        status, _, _ = c.post(f"/3/device/{token}", [
            auth, ("apns-topic", APP + ".push-type.liveactivity"),
            ("apns-push-type", "liveactivity")],
            json.dumps({"aps": {"timestamp": int(time.time()), "event": "update",
                                "content-state": {"score": 2}}}).encode())
        assert status == 200
        assert dev.expect("apns")["presentation"] == "live_activity_update"


def test_metrics_and_the_journal_see_accepted_notifications(server, keys, device_token):
    with connect(server) as c:
        status, headers, _ = c.post(f"/3/device/{device_token}", [bearer(keys["team"]), ("apns-topic", APP)], alert())
        assert status == 200
    status, journal = http_json("GET", f"{server.http_base}/emulator/v1/messages?sender={APP}")
    assert status == 200 and any(m["api"] == "apns_http2" for m in journal["messages"]), journal
    with urllib.request.urlopen(f"{server.http_base}/metrics", timeout=20) as r:
        text = r.read().decode()
    assert any(line.startswith("ccs_") and 'api="apns_http2"' in line for line in text.splitlines()), text[:2000]


def test_store_and_forward_keeps_the_newest_and_expiration_0_is_now_or_never(server, keys):
    device = register_ios(server.http_base, APP)  # registered, never connected: offline
    auth = bearer(keys["team"])
    ids = [str(uuid.uuid4()).upper() for _ in range(3)]
    with connect(server) as c:
        for i, apns_id in enumerate(ids[:2]):
            status, _, _ = c.post(f"/3/device/{device['apns_token']}", [
                auth, ("apns-topic", APP), ("apns-id", apns_id), ("apns-collapse-id", f"c{i}"),
                ("apns-expiration", str(int(time.time()) + 3600))], alert(f"n{i}"))
            assert status == 200
        status, _, _ = c.post(f"/3/device/{device['apns_token']}", [
            auth, ("apns-topic", APP), ("apns-id", ids[2]), ("apns-expiration", "0")], alert("now or never"))
        assert status == 200  # accepted, and not stored: the device is offline
    store_sync(server.http_base)
    status, record = get_device(server.http_base, device["token"])
    assert status == 200
    assert [m["payload"]["apns"]["apns_id"] for m in record["queue"]] == [ids[1]], record["queue"]


def test_the_production_host_has_no_unique_id(server, keys, device_token):
    with connect(server, host=PRODUCTION) as c:
        status, headers, _ = c.post(f"/3/device/{device_token}", [bearer(keys["team"]), ("apns-topic", APP)], alert())
        assert status == 200 and "apns-unique-id" not in headers


# -- provider tokens ---------------------------------------------------------------------------------

def test_provider_token_errors(server, keys, device_token, tmp_path):
    path = f"/3/device/{device_token}"
    now = int(time.time())
    stranger = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    cases = [
        ("signed by another key", "bearer " + jwt.encode({"iss": TEAM, "iat": now}, stranger, algorithm="ES256",
                                                          headers={"kid": KEY}), "InvalidProviderToken"),
        ("unknown kid", "bearer " + provider_token(keys["team"]["p8"], "ZZZZZZZZZZ", TEAM), "InvalidProviderToken"),
        ("iss not the key's team", "bearer " + provider_token(keys["team"]["p8"], KEY, "TEAMH20009"),
         "InvalidProviderToken"),
        ("HS256", "bearer " + jwt.encode({"iss": TEAM, "iat": now}, "s" * 32, algorithm="HS256",
                                         headers={"kid": KEY}), "InvalidProviderToken"),
        ("not a JWT", "bearer abc", "InvalidProviderToken"),
        ("issued in the future", "bearer " + provider_token(keys["team"]["p8"], KEY, TEAM, iat=now + 600),
         "InvalidProviderToken"),
        ("older than an hour", "bearer " + provider_token(keys["team"]["p8"], KEY, TEAM, iat=now - 3700),
         "ExpiredProviderToken"),
        ("no bearer scheme", "basic abc", "MissingProviderToken"),
    ]
    for what, value, reason in cases:
        with connect(server) as c:
            status, _, body = c.post(path, [("authorization", value), ("apns-topic", APP)], alert())
            assert (status, body) == (403, {"reason": reason}), what


def test_one_team_per_connection_and_20_minute_updates(server, keys, device_token, authed):
    path = f"/3/device/{device_token}"
    status, _, body = authed.post(path, [bearer(keys["other_team"]), ("apns-topic", APP)], alert())
    assert (status, body) == (403, {"reason": "InvalidProviderToken"})
    # The same team's new token, minutes after the first: too many updates.
    status, _, body = authed.post(path, [bearer(keys["team"], iat=int(time.time()) - 60), ("apns-topic", APP)],
                                  alert())
    assert (status, body) == (429, {"reason": "TooManyProviderTokenUpdates"})
    status, _, _ = authed.post(path, [authed.auth, ("apns-topic", APP)], alert())
    assert status == 200  # the connection's token still serves


def test_topic_specific_and_environment_limited_keys(server, keys, device_token, other_token):
    topic_key = bearer(keys["topic"])
    with connect(server) as c:
        status, _, body = c.post(f"/3/device/{device_token}", [topic_key, ("apns-topic", APP)], alert())
        assert (status, body) == (400, {"reason": "TopicDisallowed"})
        status, _, _ = c.post(f"/3/device/{other_token}", [topic_key, ("apns-topic", OTHER)], alert())
        assert status == 200
    with connect(server, host=PRODUCTION) as c:
        status, _, body = c.post(f"/3/device/{device_token}", [bearer(keys["sandbox"]), ("apns-topic", APP)], alert())
        assert (status, body) == (403, {"reason": "BadEnvironmentKeyInToken"})


def test_a_key_made_while_the_server_runs_is_known_at_once(server, device_token, tmp_path):
    issue_key(server.data_dir, "TEAMH20005", "KEYH200005", tmp_path / "late.p8")
    with connect(server) as c:
        status, _, _ = c.post(f"/3/device/{device_token}", [
            ("authorization", "bearer " + provider_token(tmp_path / "late.p8", "KEYH200005", "TEAMH20005")),
            ("apns-topic", APP)], alert())
        assert status == 200


def test_the_admin_route_makes_keys_too(server, device_token, tmp_path):
    status, made = http_json("POST", f"{server.http_base}/emulator/v1/apns/keys",
                             {"team_id": "TEAMH20006", "key_id": "KEYH200006", "topics": [APP], "environment": "both"})
    assert status == 201 and made["key_id"] == "KEYH200006" and made["topics"] == [APP], made
    p8 = tmp_path / "admin.p8"
    p8.write_text(made["p8"])
    with connect(server) as c:
        status, _, _ = c.post(f"/3/device/{device_token}", [
            ("authorization", "bearer " + provider_token(p8, "KEYH200006", "TEAMH20006")), ("apns-topic", APP)], alert())
        assert status == 200
    for bad in [{"team_id": "x", "key_id": "KEYH200007"}, {"key_id": "KEYH200007"},
                {"team_id": "TEAMH20006", "key_id": "KEYH200006"},
                {"team_id": "TEAMH20006", "key_id": "KEYH200008", "environment": "staging"},
                {"team_id": "TEAMH20006", "key_id": "KEYH200008", "topics": "com.example.app"}]:
        status, body = http_json("POST", f"{server.http_base}/emulator/v1/apns/keys", bad)
        assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT", (bad, body)


# -- Apple's table -----------------------------------------------------------------------------------

def test_every_400_of_the_table(server, device_token, other_token, authed):
    path = f"/3/device/{device_token}"
    a = authed.auth
    cases = [
        ("BadCollapseId", path, [a, ("apns-topic", APP), ("apns-collapse-id", "c" * 65)], alert()),
        ("BadDeviceToken", f"/3/device/{'ab' * 31}", [a, ("apns-topic", APP)], alert()),
        ("BadDeviceToken", f"/3/device/{'0' * 64}", [a, ("apns-topic", APP)], alert()),
        ("BadExpirationDate", path, [a, ("apns-topic", APP), ("apns-expiration", "soon")], alert()),
        ("BadMessageId", path, [a, ("apns-topic", APP), ("apns-id", "not-a-uuid")], alert()),
        ("BadPriority", path, [a, ("apns-topic", APP), ("apns-priority", "7")], alert()),
        ("BadTopic", path, [a, ("apns-topic", "")], alert()),
        ("DeviceTokenNotForTopic", f"/3/device/{other_token}", [a, ("apns-topic", APP)], alert()),
        ("DuplicateHeaders", path, [a, ("apns-topic", APP), ("apns-topic", APP)], alert()),
        ("InvalidPushType", path, [a, ("apns-topic", APP), ("apns-push-type", "banner")], alert()),
        ("MissingDeviceToken", "/3/device/", [a, ("apns-topic", APP)], alert()),
        ("MissingTopic", path, [a], alert()),
        ("PayloadEmpty", path, [a, ("apns-topic", APP)], b""),
    ]
    for reason, p, headers, body in cases:
        status, _, answer = authed.post(p, headers, body)
        assert (status, answer) == (400, {"reason": reason}), reason


def test_404_405_413(server, device_token, authed):
    status, _, body = authed.post("/3/devices/" + device_token, [authed.auth, ("apns-topic", APP)], alert())
    assert (status, body) == (404, {"reason": "BadPath"})
    status, _, body = authed.post(f"/3/device/{device_token}", [authed.auth, ("apns-topic", APP)], method="GET")
    assert (status, body) == (405, {"reason": "MethodNotAllowed"})
    status, _, body = authed.post(f"/3/device/{device_token}", [authed.auth, ("apns-topic", APP)],
                                  alert("x" * 4096))
    assert (status, body) == (413, {"reason": "PayloadTooLarge"})
    status, _, body = authed.post(f"/3/device/{device_token}", [
        authed.auth, ("apns-topic", APP + ".voip"), ("apns-push-type", "voip")], alert("x" * 5200))
    assert (status, body) == (413, {"reason": "PayloadTooLarge"})


def test_410_unregistered_with_the_feedback_services_timestamp(server, authed):
    device = register_ios(server.http_base, APP)
    status, _ = http_json("POST", f"{server.http_base}/emulator/v1/devices/{device['token']}/uninstall")
    assert status in (200, 204)
    before = int(time.time()) * 1000
    status, headers, body = authed.post(f"/3/device/{device['apns_token']}", [authed.auth, ("apns-topic", APP)],
                                        alert())
    assert status == 410 and body["reason"] == "Unregistered" and "apns-id" in headers
    assert isinstance(body["timestamp"], int) and before - 1000 <= body["timestamp"] <= int(time.time()) * 1000


def test_429_and_500_from_fault_rules_and_the_journal_sees_them(server, device_token, authed):
    for reason, status_wanted in [("TooManyRequests", 429), ("InternalServerError", 500)]:
        status, rule = http_json("POST", f"{server.http_base}/emulator/v1/faults", {
            "action": "apns_error", "apns_reason": reason, "token": device_token, "times": 1})
        assert status == 201, rule
        status, _, body = authed.post(f"/3/device/{device_token}", [authed.auth, ("apns-topic", APP)], alert())
        assert (status, body) == (status_wanted, {"reason": reason})
    status, journal = http_json("GET", f"{server.http_base}/emulator/v1/messages?token={device_token}&status=refused")
    assert status == 200
    refused = [m for m in journal["messages"] if m["api"] == "apns_http2"]
    assert refused, journal
    status, one = http_json("GET", f"{server.http_base}/emulator/v1/messages/{refused[0]['message_id']}")
    assert status == 200 and "HTTP 500 InternalServerError" in json.dumps(one), one


# -- rules no mock checks ----------------------------------------------------------------------------

def test_topic_suffix_must_match_the_push_type(server, device_token, authed):
    pairs = [("voip", ".voip"), ("complication", ".complication"), ("fileprovider", ".pushkit.fileprovider"),
             ("liveactivity", ".push-type.liveactivity"), ("location", ".location-query"),
             ("pushtotalk", ".voip-ptt")]
    for push_type, suffix in pairs:
        status, _, body = authed.post(f"/3/device/{device_token}", [
            authed.auth, ("apns-topic", APP), ("apns-push-type", push_type)], alert())
        assert (status, body) == (400, {"reason": "BadTopic"}), push_type
        status, _, body = authed.post(f"/3/device/{device_token}", [
            authed.auth, ("apns-topic", APP + suffix), ("apns-push-type", "alert")], alert())
        assert (status, body) == (400, {"reason": "BadTopic"}), suffix
        status, _, _ = authed.post(f"/3/device/{device_token}", [
            authed.auth, ("apns-topic", APP + suffix), ("apns-push-type", push_type)], alert())
        assert status == 200, push_type


def test_background_needs_priority_5_and_a_silent_payload(server, device_token, authed):
    silent = json.dumps({"aps": {"content-available": 1}}).encode()
    headers = [authed.auth, ("apns-topic", APP), ("apns-push-type", "background")]
    status, _, body = authed.post(f"/3/device/{device_token}", headers + [("apns-priority", "10")], silent)
    assert (status, body) == (400, {"reason": "BadPriority"})
    for aps in [{"content-available": 1, "alert": "x"}, {"content-available": 1, "sound": "default"},
                {"content-available": 1, "badge": 1}, {}]:
        status, _, body = authed.post(f"/3/device/{device_token}", headers + [("apns-priority", "5")],
                                      json.dumps({"aps": aps}).encode())
        assert (status, body) == (400, {"reason": "InvalidPushType"}), aps
    status, _, _ = authed.post(f"/3/device/{device_token}", headers + [("apns-priority", "5")], silent)
    assert status == 200


# -- certificate auth --------------------------------------------------------------------------------

def test_certificate_auth(server, device_token, tmp_path):
    app = issue_cert(server.data_dir, APP, tmp_path / "app")
    dev_cert = issue_cert(server.data_dir, APP, tmp_path / "dev", sandbox=True)
    path = f"/3/device/{device_token}"
    with connect(server, cert=app["combined"]) as c:
        c.wait_for_settings(lambda s: s.get(3) == 1000)  # a certificate opens every stream at once
        # The topic defaults to the certificate's bundle id; a bearer token is ignored.
        status, _, _ = c.post(path, [("authorization", "bearer nonsense")], alert())
        assert status == 200
        status, _, body = c.post(path, [("apns-topic", OTHER)], alert())
        assert (status, body) == (400, {"reason": "BadTopic"})
        status, _, body = c.post(path, [("apns-topic", APP + ".push-type.liveactivity"),
                                        ("apns-push-type", "liveactivity")], alert())
        assert (status, body) == (403, {"reason": "Forbidden"})
        status, _, _ = c.post(path, [("apns-topic", APP + ".voip"), ("apns-push-type", "voip")], alert())
        assert status == 200
    with connect(server, host=PRODUCTION, cert=dev_cert["combined"]) as c:
        status, _, body = c.post(path, [("apns-topic", APP)], alert())
        assert (status, body) == (403, {"reason": "BadCertificateEnvironment"})


def test_a_certificate_without_a_bundle_id_is_bad(server, device_token, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID
    import datetime
    ca_key = serialization.load_pem_private_key((server.data_dir / "tls" / "ca-key.pem").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((server.data_dir / "tls" / "ca.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "no uid")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = tmp_path / "nouid.pem"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with connect(server, cert=str(pem)) as c:
        status, _, body = c.post(f"/3/device/{device_token}", [("apns-topic", APP)], alert())
        assert (status, body) == (403, {"reason": "BadCertificate"})


# -- proxy mode --------------------------------------------------------------------------------------

def test_proxy_mode_tunnels_apples_hosts_on_443_and_2197(start_server, tmp_path):
    srv = start_server(extra_args=["--proxy-port", "0"])
    token = register_ios(srv.http_base, APP)["apns_token"]
    issue_key(srv.data_dir, TEAM, KEY, tmp_path / "k.p8")
    auth = ("authorization", "bearer " + provider_token(tmp_path / "k.p8", KEY, TEAM))
    for host in [PRODUCTION, SANDBOX, "api.development.push.apple.com"]:
        for port in [443, 2197]:
            raw = proxy_tunnel(int(srv.ready["proxy_port"]), host, port)
            with H2Provider(0, srv.ready["ca_cert"], host=host, raw=raw) as c:
                status, _, _ = c.post(f"/3/device/{token}", [auth, ("apns-topic", APP)], alert())
                assert status == 200, (host, port)


# -- graceful stop -----------------------------------------------------------------------------------

def test_503_shutdown_on_a_graceful_stop(start_server, tmp_path):
    srv = start_server()
    token = register_ios(srv.http_base, APP)["apns_token"]
    issue_key(srv.data_dir, TEAM, KEY, tmp_path / "k.p8")
    auth = ("authorization", "bearer " + provider_token(tmp_path / "k.p8", KEY, TEAM))
    with connect(srv) as c:
        status, _, _ = c.post(f"/3/device/{token}", [auth, ("apns-topic", APP)], alert())
        assert status == 200
        srv.proc.send_signal(signal.SIGTERM)
        # Accepted until the server learns of the stop; then 503 Shutdown until its GOAWAY.
        while True:
            status, _, body = c.post(f"/3/device/{token}", [auth, ("apns-topic", APP)], alert())
            if status != 200:
                break
        assert (status, body) == (503, {"reason": "Shutdown"})
        while c.goaway is None:
            assert c._pump(), "closed without a GOAWAY"
        assert json.loads(c.goaway.additional_data) == {"reason": "Shutdown"}
