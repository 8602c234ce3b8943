"""The regulator's HTTPS API, end to end: a real TLS server over an archive sealed by
the real Sealer, and real TLS clients (``http.client`` with client certificates and tokens)."""

from __future__ import annotations

import asyncio
import base64
import gc
import hashlib
import http.client
import io
import json
import shutil
import socket
import ssl
import subprocess
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from coffre_regulator.api import (
    DEFAULT_TIMEOUTS,
    ConnectionTimeouts,
    start_regulator_api,
    stop_regulator_api,
)
from coffre_regulator.archive_index import ArchiveIndex, ArchiveInvalid, NotFound, read_manifest
from coffre_regulator.readonly import ArchiveReadOnly, open_archive
from coffre_vault.sealer import Sealer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from lxml import etree

from coffre.adapters.access_log import REDACTED
from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage, S3ObjectLockStorage, validate_key
from coffre.adapters.tls import DEVELOPMENT_CLIENT_SUBJECT, DevelopmentTls, api_tls_material, development_tls
from coffre.commands.verify import verify_archive
from coffre.config import Settings
from coffre.domain.codec import canonical_bytes
from coffre.domain.lot import parse_document, read_checkpoint, read_lot
from coffre.domain.normalize import normalize
from coffre.domain.proofs import InclusionProof, check_inclusion
from coffre.domain.signing import Signer, TrustStore, generate_key_and_certificate, key_id, verify

from audit_hands import RecordingStorage
from events import POINSCRIT
from xmlsec_tool import xmlsec1_verify

COFFRES = (("0099", 7), ("0099", 8), ("0042", 3))
EVENTS = 10
SECRET = b"SECRET-OUTSIDE-THE-ARCHIVE"
T0 = (datetime.now(UTC) - timedelta(days=12)).replace(hour=10, minute=0, second=0, microsecond=0)


def event(oper: str, coffre: int, id_evt: int) -> bytes:
    raw = (
        POINSCRIT.replace(b"<IDOper>0099<", f"<IDOper>{oper}<".encode())
        .replace(b"<IDCoffre>7<", f"<IDCoffre>{coffre}<".encode())
        .replace(b"<IDJoueur>p-1<", f"<IDJoueur>a-{coffre}-{id_evt}<".encode())
    )
    return canonical_bytes(normalize(raw, id_evt=id_evt))


class Clock:
    """Every seal and checkpoint 5 hours after the previous one: lots land on several days."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(hours=5)
        return self.now


def seal(storage: Any, signer: Signer, journal_dir: Path, coffres=COFFRES, events=EVENTS, lot=3) -> None:
    with JournalSet(journal_dir) as journals:
        sealer = Sealer(storage, signer, journals, max_events=lot, max_age=3600, clock=Clock(T0))
        for oper, coffre in coffres:
            journal = journals.journal(oper, coffre)
            for n in range(1, events + 1):
                journal.append(n, event(oper, coffre, n))
            journal.sync()
            sealer.recorded(oper, coffre)
        sealer.seal_due()
        sealer.seal_all()


@dataclass
class Archive:
    root: Path
    signer: Signer
    cert: Path
    trust: TrustStore

    def lots(self, oper: str, coffre: int) -> list[Path]:
        return sorted(
            (p for p in (self.root / oper / str(coffre)).rglob("*.xml") if p.parent.name != "checkpoints"),
            key=lambda p: p.name,
        )

    def days(self) -> list[date]:
        return sorted(
            {
                date(*map(int, p.parent.relative_to(p.parents[3]).parts))
                for o, c in COFFRES
                for p in self.lots(o, c)
            }
        )


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Archive:
    base = tmp_path_factory.mktemp("archive")
    key, cert = generate_key_and_certificate("api test vault", "ecdsa", not_before=T0 - timedelta(days=1))
    (base / "cert.pem").write_bytes(cert)
    signer = Signer.from_pem(key, cert)
    root = base / "root"
    root.mkdir()
    seal(LocalStorage(root), signer, base / "journal")
    (base / "secret.xml").write_bytes(SECRET)  # next to the archive, never to be served
    (root / "0099" / "secret.xml").write_bytes(SECRET)  # inside, but not a lot: never served either
    return Archive(root, signer, base / "cert.pem", TrustStore.from_pem_files([base / "cert.pem"]))


# -- the server and its clients -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ApiServer:
    """The API on its own event loop in a thread (``coffre regulator-api`` runs it on its own)."""

    def __init__(
        self, settings: Settings, storage: Any, archive: Archive, timeouts: ConnectionTimeouts
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.port = settings.api_port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner = asyncio.run_coroutine_threadsafe(
            start_regulator_api(settings, storage, archive.trust, archive.signer, timeouts=timeouts),
            self.loop,
        ).result(20)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(stop_regulator_api(self.runner), self.loop).result(20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def client_context(ca: Path, cert: tuple[Path, Path] | None = None, tls12: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    if tls12:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    return context


def call(
    server: ApiServer,
    path: str,
    *,
    cert: tuple[Path, Path] | None = None,
    token: str | None = None,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    ca: Path | None = None,
    tls12: bool = False,
) -> Reply:
    tls = api_tls_material(server.settings)
    context = client_context(
        ca or (tls.development.ca_cert if tls.development else tls.server_cert), cert, tls12
    )
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=20)
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, path, headers=sent)
        response = connection.getresponse()
        return Reply(response.status, response.headers, response.read())
    finally:
        connection.close()


def issue(ca: DevelopmentTls, subject: str, directory: Path, name: str) -> tuple[Path, Path]:
    """A client certificate for ``subject`` from the development CA."""
    ca_key = serialization.load_pem_private_key(ca.ca_key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(ca.ca_cert.read_bytes())
    return _issue(ca_key, ca_cert.subject, x509.Name.from_rfc4514_string(subject), directory, name)


def _issue(
    ca_key: Any, issuer: x509.Name, subject: x509.Name, directory: Path, name: str
) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}-cert.pem", directory / f"{name}-key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def dev(data_dir) -> DevelopmentTls:
    return development_tls(data_dir / "tls")


@pytest.fixture(scope="module")
def regulator(dev) -> tuple[Path, Path]:
    return dev.client_cert, dev.client_key


@pytest.fixture(scope="module")
def start(archive, data_dir):
    """Start an API over the archive (``either`` by default); every server is stopped at the end."""
    servers: list[ApiServer] = []

    def make(
        storage: Any = None, timeouts: ConnectionTimeouts = DEFAULT_TIMEOUTS, **overrides: Any
    ) -> ApiServer:
        options = {
            "data_dir": data_dir,
            "archive_dir": archive.root,
            "api_host": "127.0.0.1",
            "api_port": free_port(),
            "api_auth": "either",
            "access_log_dir": data_dir / f"access-{uuid.uuid4().hex[:8]}",
            **overrides,
        }
        server = ApiServer(Settings(**options), storage or RecordingStorage(archive.root), archive, timeouts)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def api(start) -> ApiServer:
    return start()


def log_lines(server: ApiServer) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(server.settings.access_log_root.glob("regulator-access-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


# -- development TLS material --------------------------------------------------------------------------


def test_development_tls_is_generated_once_reused_and_never_overwritten(tmp_path):
    first = development_tls(tmp_path / "tls")
    files = sorted(p for p in (tmp_path / "tls").iterdir() if p.name != ".lock")
    before = {p.name: p.read_bytes() for p in files}
    again = development_tls(tmp_path / "tls")
    assert again == first
    assert {p.name: p.read_bytes() for p in files} == before
    modes = {p.name: p.stat().st_mode & 0o777 for p in files}
    assert (
        modes["ca-key.pem"] == modes["server-key.pem"] == modes["client-key.pem"] == modes["tokens"] == 0o600
    )
    for name in ("ca-cert.pem", "server-cert.pem", "client-cert.pem"):
        common_name = x509.load_pem_x509_certificate(before[name]).subject.get_attributes_for_oid(
            NameOID.COMMON_NAME
        )[0]
        assert "DEVELOPMENT" in str(common_name.value)
    client = x509.load_pem_x509_certificate(before["client-cert.pem"])
    assert (
        client.subject.rfc4514_string() == DEVELOPMENT_CLIENT_SUBJECT == "CN=regulator (DEVELOPMENT),O=coffre"
    )
    server = x509.load_pem_x509_certificate(before["server-cert.pem"])
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    assert first.token() and before["tokens"].decode().count("regulator-dev:") == 1
    # Part of the material gone: refused, and what is left is not replaced.
    (tmp_path / "tls" / "server-cert.pem").unlink()
    with pytest.raises(ValueError, match="remove the directory"):
        development_tls(tmp_path / "tls")
    assert (tmp_path / "tls" / "server-key.pem").read_bytes() == before["server-key.pem"]


def test_configured_material_wins_and_development_fills_in_only_what_is_missing(tmp_path, dev):
    tokens = tmp_path / "tokens"
    tokens.write_text("auditor:" + "x" * 32 + "\n")
    only_tokens = api_tls_material(Settings(data_dir=tmp_path, api_tokens_file=tokens))
    assert only_tokens.development is not None
    assert only_tokens.tokens_file == tokens
    assert only_tokens.client_ca == only_tokens.development.ca_cert
    assert only_tokens.allowed_subjects == (DEVELOPMENT_CLIENT_SUBJECT,)
    configured = api_tls_material(
        Settings(
            data_dir=tmp_path / "other",
            api_tls_cert=dev.server_cert,
            api_tls_key=dev.server_key,
            api_client_ca=dev.ca_cert,
            api_allowed_subjects="CN=a,O=b;CN=c,O=d",
        )
    )
    assert configured.development is None
    assert configured.allowed_subjects == ("CN=a,O=b", "CN=c,O=d")
    assert configured.tokens_file is None
    assert not (tmp_path / "other" / "tls").exists()


def test_an_api_port_of_zero_serves_nothing(archive, data_dir):
    settings = Settings(data_dir=data_dir, api_port=0)
    assert (
        asyncio.run(start_regulator_api(settings, LocalStorage(archive.root), archive.trust, archive.signer))
        is None
    )


def test_unusable_credentials_stop_the_start_with_a_clear_error(archive, data_dir, dev, tmp_path):
    def start_with(**options: Any) -> None:
        settings = Settings(
            data_dir=data_dir, api_port=free_port(), access_log_dir=tmp_path / "access", **options
        )
        asyncio.run(start_regulator_api(settings, LocalStorage(archive.root), archive.trust, archive.signer))

    production = {"api_tls_cert": dev.server_cert, "api_tls_key": dev.server_key}
    with pytest.raises(ValueError, match="needs COFFRE_API_CLIENT_CA or COFFRE_API_TOKENS_FILE"):
        start_with(**production)
    with pytest.raises(ValueError, match="tokens file"):
        start_with(api_auth="token", api_tokens_file=tmp_path / "missing")
    with pytest.raises(ValueError, match="not an RFC 4514 name"):
        start_with(api_allowed_subjects="no equals sign here")
    with pytest.raises(ValueError, match="server certificate"):
        start_with(api_tls_cert=dev.client_cert, api_tls_key=dev.server_key, api_client_ca=dev.ca_cert)


# -- authentication --------------------------------------------------------------------------------------


def test_an_allowed_client_certificate_lists_the_coffres(api, regulator, archive):
    reply = call(api, "/v1/coffres", cert=regulator)
    assert reply.status == 200, reply.body
    assert reply.headers["Content-Type"].startswith("application/json")
    coffres = reply.json()["coffres"]
    assert [(c["id_oper"], c["id_coffre"]) for c in coffres] == sorted(COFFRES)
    for summary in coffres:
        lots = archive.lots(summary["id_oper"], summary["id_coffre"])
        assert summary["lots"] == summary["last_lot"] == len(lots) == 4
        assert summary["events"] == EVENTS
        assert summary["last_sealed_day"] == "-".join(lots[-1].parent.relative_to(lots[-1].parents[3]).parts)
        assert summary["last_checkpoint_at"].endswith("Z")


def test_a_certificate_from_another_ca_fails_the_handshake(api, tmp_path):
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = x509.Name.from_rfc4514_string(DEVELOPMENT_CLIENT_SUBJECT)  # same subject, wrong CA
    cert = _issue(other_key, other, other, tmp_path, "stranger")
    before = len(log_lines(api))
    for tls12 in (True, False):  # TLS 1.2 fails in the handshake; TLS 1.3 on the first read
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
            call(api, "/v1/coffres", cert=cert, tls12=tls12)
    assert len(log_lines(api)) == before  # no request was ever made


def test_no_credentials_or_a_bad_token_is_401(api, dev):
    nothing = call(api, "/v1/coffres")
    assert nothing.status == 401
    assert nothing.headers["WWW-Authenticate"].startswith("Bearer")
    assert nothing.json()["error"] == "unauthorized"
    bad = call(api, "/v1/coffres", token=dev.token() + "x")
    assert bad.status == 401 and 'error="invalid_token"' in bad.headers["WWW-Authenticate"]
    basic = call(api, "/v1/coffres", headers={"Authorization": "Basic " + base64.b64encode(b"a:b").decode()})
    assert basic.status == 401
    unknown_route = call(api, "/v1/nothing-here")  # routes are not revealed without credentials
    assert unknown_route.status == 401


def test_a_good_token_without_certificate_is_enough_in_either_mode(api, dev):
    reply = call(api, "/v1/coffres", token=dev.token())
    assert reply.status == 200 and len(reply.json()["coffres"]) == len(COFFRES)


def test_both_mode_needs_the_certificate_and_the_token(start, dev, regulator):
    server = start(api_auth="both")
    assert call(server, "/v1/certificates", cert=regulator).status == 401
    assert call(server, "/v1/certificates", token=dev.token()).status == 401
    assert call(server, "/v1/certificates", cert=regulator, token=dev.token() + "x").status == 401
    assert call(server, "/v1/certificates", cert=regulator, token=dev.token()).status == 200


def test_mtls_and_token_modes_take_only_their_credential(start, dev, regulator):
    mtls = start(api_auth="mtls")
    assert call(mtls, "/v1/certificates", token=dev.token()).status == 401
    assert call(mtls, "/v1/certificates", cert=regulator).status == 200
    token = start(api_auth="token")
    assert call(token, "/v1/certificates", cert=regulator).status == 401
    assert call(token, "/v1/certificates", token=dev.token()).status == 200


def test_a_verified_certificate_whose_subject_is_not_allowed_is_403(api, dev, tmp_path, start):
    intruder = issue(dev, "CN=intruder,O=coffre", tmp_path, "intruder")
    reply = call(api, "/v1/coffres", cert=intruder)
    assert reply.status == 403 and reply.json()["error"] == "forbidden"
    assert "CN=intruder,O=coffre" in reply.json()["message"]
    # Subjects match whatever the order of their attributes and the spacing they are written with.
    auditor = issue(dev, "CN=auditor,OU=controle,O=ANJ", tmp_path, "auditor")
    server = start(api_auth="mtls", api_allowed_subjects="o=ANJ, OU=controle, cn=auditor")
    assert call(server, "/v1/coffres", cert=auditor).status == 200
    assert call(server, "/v1/coffres", cert=intruder).status == 403


def test_a_rotated_tokens_file_applies_without_restart(start, tmp_path):
    tokens = tmp_path / "tokens"
    old, new = "old-" + "a" * 30, "new-" + "b" * 30
    tokens.write_text(f"# the regulator's tokens\n\nauditor:{old}\nshort:abc\n")
    server = start(api_auth="token", api_tokens_file=tokens)
    assert call(server, "/v1/certificates", token=old).status == 200
    assert call(server, "/v1/certificates", token="abc").status == 401  # too short: ignored
    replacement = tmp_path / "tokens.new"
    replacement.write_text(f"auditor-2026:{new}\n")
    replacement.replace(tokens)  # as a Secret update swaps the file
    assert call(server, "/v1/certificates", token=old).status == 401
    assert call(server, "/v1/certificates", token=new).status == 200
    assert log_lines(server)[-1]["token"] == "auditor-2026"


PARSED_METHODS = ("CONNECT", "PUT", "DELETE", "PATCH", "OPTIONS", "POST", "HEAD", "PROPFIND")
UNKNOWN_METHODS = ("BREW", "X-COFFRE")
"""Methods aiohttp's HTTP parser (llhttp) does not know: refused before any header is read."""


def test_every_method_but_get_is_one_405_with_allow_and_is_logged(start, dev):
    server = start()
    for method in PARSED_METHODS + UNKNOWN_METHODS:
        reply = call(server, "/v1/coffres/0099/7/lots/1?token=" + "s" * 20, token=dev.token(), method=method)
        assert reply.status == 405, (method, reply.status, reply.body)
        assert reply.headers["Allow"] == "GET", method
        if method in PARSED_METHODS:  # the others are answered as HTTP/1.0: closed anyway
            assert reply.headers["Connection"] == "close", method
        if method != "HEAD":  # a HEAD answer has no body
            body = reply.json()
            assert body["error"] == "method_not_allowed" and "GET only" in body["message"], method
    # Without credentials, a method the parser knows is still a 401: authentication comes first.
    assert call(server, "/v1/coffres", method="PUT").status == 401
    lines = log_lines(server)
    assert [line["status"] for line in lines] == [405] * (len(PARSED_METHODS) + len(UNKNOWN_METHODS)) + [401]
    assert all(line["outcome"] == "method_not_allowed" for line in lines[:-1])
    parsed, unknown = lines[: len(PARSED_METHODS)], lines[len(PARSED_METHODS) : -1]
    assert [line["method"] for line in parsed] == list(PARSED_METHODS)
    assert all(line["token"] == "regulator-dev" for line in parsed)
    assert all(line["path"] == "/v1/coffres/0099/7/lots/1" for line in parsed)
    assert all(line["query"] == f"token={REDACTED}" for line in parsed)
    assert all(line["method"] is None and line["path"] is None for line in unknown)


# -- inputs ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v1/coffres/../../secret.xml",
        "/v1/coffres/%2e%2e/%2e%2e/lots",
        "/v1/coffres/0099/%2e%2e/lots/1",
        "/v1/coffres/0099/7/lots/..%2f..%2f..%2fsecret.xml",
        "/v1/coffres/0099%2f7/lots",
        "/v1/coffres/..%2fsecret.xml/7/checkpoint",
        "/v1/coffres/" + "9" * 300 + "/7/lots",
        "/v1/coffres/0099/" + "9" * 40 + "/lots/1",
        "/v1/coffres/0099/07/lots/1",
        "/v1/coffres/0099/-1/lots/1",
        "/v1/coffres/0x99/7/checkpoint",
        "/v1/coffres/0099/7/lots/0",
        "/v1/coffres/0099/7/lots/1.xml",
        "/v1/coffres/0099/7/events/0/proof",
        "/v1/coffres/0099/7/lots?from=..%2f..&to=2026-01-01",
        "/v1/exports/..%2f..%2fsecret.xml",
        "/v1/exports/2026-02-30",
        "/v1/exports/2026-11-22?oper=..%2f0099",
    ],
)
def test_malformed_or_traversing_inputs_never_reach_storage(api, dev, path):
    api.storage.calls.clear()
    reply = call(api, path, token=dev.token())
    assert reply.status in (400, 404), (reply.status, reply.body)
    assert reply.json()["error"] in ("bad_request", "not_found")
    assert SECRET not in reply.body
    assert api.storage.calls == []


def test_a_lot_that_does_not_exist_is_404(api, dev):
    for path in (
        "/v1/coffres/0099/7/lots/5",
        "/v1/coffres/0099/9/lots/1",
        "/v1/coffres/0099/7/lots/9999999999",
    ):
        reply = call(api, path, token=dev.token())
        assert reply.status == 404 and reply.json()["error"] == "not_found", path
    assert call(api, "/v1/coffres/0077/1/checkpoint", token=dev.token()).status == 404
    # Every key asked of the storage was one of the archive's own.
    assert all(validate_key(key) for kind, key in api.storage.calls if kind == "read")


def test_a_huge_or_reversed_date_range_is_400(api, dev):
    huge = call(api, "/v1/coffres/0099/7/lots?from=2000-01-01&to=2026-01-01", token=dev.token())
    assert huge.status == 400 and "at most 366 days" in huge.json()["message"]
    backwards = call(api, "/v1/coffres/0099/7/lots?from=2026-01-02&to=2026-01-01", token=dev.token())
    assert backwards.status == 400
    for query in (
        "from=2026-1-1&to=2026-01-02",
        "frm=2026-01-01",
        "page_size=0",
        "page_size=1001",
        "page_token=zz",
    ):
        reply = call(api, f"/v1/coffres/0099/7/lots?{query}", token=dev.token())
        assert reply.status == 400, query


@pytest.mark.parametrize("query", ["from=9999-06-01", "from=9999-12-31", "to=0001-01-01", "to=0001-12-30"])
def test_a_range_whose_default_end_falls_off_the_calendar_is_400(api, dev, query):
    reply = call(api, f"/v1/coffres/0099/7/lots?{query}", token=dev.token())
    assert reply.status == 400, reply.body
    body = reply.json()
    assert body["error"] == "bad_request"
    missing = "'to'" if query.startswith("from") else "'from'"
    assert f"give {missing} as well" in body["message"] and "366 days" in body["message"]
    assert log_lines(api)[-1]["status"] == 400


def test_ranges_at_the_ends_of_the_calendar_are_answered(api, dev):
    for query in ("from=9999-12-31&to=9999-12-31", "from=0001-01-01&to=0001-01-01", "to=9999-12-31"):
        reply = call(api, f"/v1/coffres/0099/7/lots?{query}&page_size=1", token=dev.token())
        assert reply.status == 200, (query, reply.body)
        assert reply.json()["lots"] == []
    assert call(api, "/v1/exports/0001-01-01", token=dev.token()).status == 200
    assert call(api, "/v1/exports/9999-12-31", token=dev.token()).status == 404


def test_a_year_folder_no_date_can_hold_is_not_part_of_the_archive(archive, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(archive.root, copy)
    stray = copy / "0099" / "7" / "0000" / "01" / "01"
    stray.mkdir(parents=True)
    (stray / "0099-7-0000000009.xml").write_bytes(b"<not-a-lot/>")
    index = ArchiveIndex(LocalStorage(copy), archive.trust, archive.signer)
    try:
        assert [(c.id_oper, c.id_coffre, c.lots) for c in index.coffres()] == [
            (oper, coffre, 4) for oper, coffre in sorted(COFFRES)
        ]
        assert index.checkpoint("0099", 7).key.endswith("0099-7-0000000004.xml")
        assert index.lot("0099", 7, 4).key == archive.lots("0099", 7)[-1].relative_to(archive.root).as_posix()
        assert index.inclusion_proof("0099", 7, 10)["lot"] == 4
        assert [lot.number for lot in index.lots("0099", 7, date(1, 1, 1), date(1, 12, 31)).lots] == []
    finally:
        index.close()


UNKNOWN_COFFRES = (("0099", 5), ("0077", 1))


@pytest.mark.parametrize(
    "endpoint",
    [
        "lots",
        "lots?from=2026-01-01&to=2026-01-31",
        "lots?to=2026-11-01",
        "lots/1",
        "checkpoint",
        "events/1/proof",
    ],
)
def test_an_unknown_coffre_is_the_same_404_on_every_endpoint(api, dev, endpoint):
    for oper, coffre in UNKNOWN_COFFRES:
        reply = call(api, f"/v1/coffres/{oper}/{coffre}/{endpoint}", token=dev.token())
        assert reply.status == 404, (oper, coffre, endpoint, reply.body)
        assert reply.json() == {
            "error": "not_found",
            "message": f"coffre {oper}/{coffre} is not in the archive: it has no sealed lot",
        }
        assert reply.headers["Content-Type"].startswith("application/json")


def test_a_known_coffre_with_nothing_in_the_range_is_an_empty_200(api, dev):
    reply = call(api, "/v1/coffres/0099/7/lots?from=2020-01-01&to=2020-01-31", token=dev.token())
    assert reply.status == 200
    assert reply.json() == {"id_oper": "0099", "id_coffre": 7, "lots": [], "next_page_token": None}


# -- lots, checkpoints, proofs, certificates ----------------------------------------------------------------


def listing(api: ApiServer, token: str, oper: str, coffre: int, page_size: int, **extra: str) -> list[dict]:
    first, last = T0.date().isoformat(), (T0 + timedelta(days=10)).date().isoformat()
    lots: list[dict] = []
    token_query = ""
    for _ in range(100):
        reply = call(
            api,
            f"/v1/coffres/{oper}/{coffre}/lots?from={first}&to={last}&page_size={page_size}{token_query}",
            token=token,
        )
        assert reply.status == 200, reply.body
        body = reply.json()
        assert len(body["lots"]) <= page_size
        lots += body["lots"]
        if body["next_page_token"] is None:
            return lots
        token_query = f"&page_token={body['next_page_token']}"
    raise AssertionError("the pages never end")


def test_pagination_returns_every_lot_exactly_once(api, dev, archive):
    api.storage.calls.clear()
    for oper, coffre in COFFRES:
        expected = [p.relative_to(archive.root).as_posix() for p in archive.lots(oper, coffre)]
        for page_size in (1, 3, 1000):
            lots = listing(api, dev.token(), oper, coffre, page_size)
            assert [lot["path"] for lot in lots] == expected
            assert [lot["lot"] for lot in lots] == [1, 2, 3, 4]
            assert [(lot["first_id_evt"], lot["last_id_evt"]) for lot in lots] == [
                (1, 3),
                (4, 6),
                (7, 9),
                (10, 10),
            ]
            assert [lot["sealed_day"].replace("-", "/") in lot["path"] for lot in lots] == [True] * 4
    # Only the day folders of the range were listed, never a whole coffre or the whole archive.
    assert all(len(prefix.split("/")) >= 5 for kind, prefix in api.storage.calls if kind == "list")
    # A narrower range: only the lots filed on those days.
    day = archive.days()[1].isoformat()
    reply = call(api, f"/v1/coffres/0099/7/lots?from={day}&to={day}", token=dev.token())
    assert all(lot["sealed_day"] == day for lot in reply.json()["lots"])
    # A page token belongs to its range.
    first = call(
        api, f"/v1/coffres/0099/7/lots?from={T0.date()}&to={T0.date() + timedelta(days=10)}&page_size=1"
    )
    assert first.status == 401
    page = call(
        api,
        f"/v1/coffres/0099/7/lots?from={T0.date()}&to={T0.date() + timedelta(days=10)}&page_size=1",
        token=dev.token(),
    ).json()
    other = call(
        api,
        f"/v1/coffres/0099/7/lots?from={T0.date()}&to={T0.date() + timedelta(days=11)}"
        f"&page_token={page['next_page_token']}",
        token=dev.token(),
    )
    assert other.status == 400 and "page_token" in other.json()["message"]


def test_a_downloaded_lot_is_the_stored_file_byte_for_byte(api, dev, archive, regulator):
    lots = {lot["lot"]: lot for lot in listing(api, dev.token(), "0099", 8, 1000)}
    for number, path in enumerate(archive.lots("0099", 8), start=1):
        reply = call(api, f"/v1/coffres/0099/8/lots/{number}", cert=regulator)
        assert reply.status == 200
        assert reply.body == path.read_bytes()
        digest = hashlib.sha256(reply.body).digest()
        assert lots[number]["sha256"] == digest.hex() and lots[number]["size"] == len(reply.body)
        assert reply.headers["Content-Type"].startswith("application/xml")
        assert reply.headers["ETag"] == f'"{digest.hex()}"'
        assert reply.headers["Repr-Digest"] == f"sha-256=:{base64.b64encode(digest).decode()}:"
        assert reply.headers["Digest"] == f"sha-256={base64.b64encode(digest).decode()}"
        assert path.name in reply.headers["Content-Disposition"]
    etag = reply.headers["ETag"]  # of lot 4
    assert (
        call(api, "/v1/coffres/0099/8/lots/1", cert=regulator, headers={"If-None-Match": etag}).status == 200
    )
    again = call(api, "/v1/coffres/0099/8/lots/4", cert=regulator, headers={"If-None-Match": etag})
    assert again.status == 304 and again.body == b""


def test_the_newest_checkpoint(api, dev, archive):
    reply = call(api, "/v1/coffres/0042/3/checkpoint", token=dev.token())
    assert reply.status == 200
    newest = archive.root / "0042" / "3" / "checkpoints" / "0042-3-0000000004.xml"
    assert reply.body == newest.read_bytes()
    checkpoint = read_checkpoint(parse_document(reply.body))
    verify(reply.body, archive.trust, checkpoint.at)
    assert (checkpoint.lot_number, checkpoint.tree_size) == (4, EVENTS)


def test_an_inclusion_proof_checks_against_the_signed_roots(api, dev, archive):
    checkpoint = read_checkpoint(
        parse_document(call(api, "/v1/coffres/0099/7/checkpoint", token=dev.token()).body)
    )
    for id_evt in (1, 2, 5, 9, 10):
        reply = call(api, f"/v1/coffres/0099/7/events/{id_evt}/proof", token=dev.token())
        assert reply.status == 200, reply.body
        proof = InclusionProof.from_dict(reply.json())
        lot_bytes = call(api, f"/v1/coffres/0099/7/lots/{proof.lot}", token=dev.token()).body
        lot = read_lot(verify(lot_bytes, archive.trust, datetime.now(UTC)))
        canonical = next(e.canonical for e in lot.events if e.id_evt == id_evt)
        assert canonical == event("0099", 7, id_evt)
        assert check_inclusion(proof, canonical) == []
        assert proof.lot_root == lot.header.merkle_root.hex()
        assert (proof.tree_size, proof.tree_root) == (checkpoint.tree_size, checkpoint.tree_root.hex())
    unsealed = call(api, f"/v1/coffres/0099/7/events/{EVENTS + 1}/proof", token=dev.token())
    assert unsealed.status == 404 and "not sealed" in unsealed.json()["message"]
    assert call(api, "/v1/coffres/0099/5/events/1/proof", token=dev.token()).status == 404


def test_no_proof_comes_from_a_tampered_archive(archive, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(archive.root, copy)
    target = sorted((copy / "0099" / "7").rglob("0099-7-0000000002.xml"))[0]
    target.chmod(0o644)
    target.write_bytes(target.read_bytes().replace(b"a-7-5<", b"a-7-X<"))
    index = ArchiveIndex(LocalStorage(copy), archive.trust, archive.signer)
    try:
        # Every proof is against the coffre's whole tree: none is given while one lot fails.
        for id_evt in (2, 5, 8):
            with pytest.raises(ArchiveInvalid, match=r"0099-7-0000000002\.xml does not verify"):
                index.inclusion_proof("0099", 7, id_evt)
        assert index.inclusion_proof("0099", 8, 5)["lot"] == 2  # the other coffre is sound
    finally:
        index.close()


def resign(path: Path, signer: Signer) -> None:
    """Sign ``path`` again with the same key: the same content, validly signed, but another file
    (ECDSA signatures are randomized) than the one its checkpoint sealed."""
    root = parse_document(path.read_bytes())
    root.remove(root[-1])  # the signature
    path.chmod(0o644)
    path.write_bytes(signer.sign_bytes(etree.tostring(root, encoding="UTF-8")))


def test_a_lot_signed_again_after_its_checkpoint_gives_no_proof_as_coffre_verify_says(archive, tmp_path):
    """The API's verifier is coffre verify's: a lot file that is not the one sealed (its SHA-256
    is not its checkpoint's EmpreinteLot) fails the proof with the failure coffre verify reports."""
    copy = tmp_path / "copy"
    shutil.copytree(archive.root, copy)
    target = sorted((copy / "0099" / "8").rglob("0099-8-0000000003.xml"))[0]
    resign(target, archive.signer)
    verify(target.read_bytes(), archive.trust, datetime.now(UTC))  # its signature holds
    report = verify_archive(copy, [archive.cert])
    (failure,) = next(c for c in report.coffres if (c.id_oper, c.id_coffre) == ("0099", 8)).failures
    assert failure.check == "lot digest" and failure.where.endswith("0099-8-0000000003.xml")
    index = ArchiveIndex(LocalStorage(copy), archive.trust, archive.signer)
    try:
        for id_evt in (1, 8, 10):
            with pytest.raises(ArchiveInvalid) as refused:
                index.inclusion_proof("0099", 8, id_evt)
            assert refused.value.message == (
                f"{failure.where} does not verify: {failure.check}: {failure.message}; "
                "no proof is given from this coffre"
            )
        assert index.inclusion_proof("0099", 7, 10)["lot"] == 4  # the other coffres are sound
    finally:
        index.close()


def test_a_newest_lot_whose_checkpoint_is_not_written_yet_is_not_sealed_yet(archive, tmp_path):
    """The vault writes a lot's checkpoint right after the lot: between the two, that lot's events
    are not proven yet (404), and the proof comes once the checkpoint is there."""
    copy = tmp_path / "copy"
    shutil.copytree(archive.root, copy)
    checkpoint = copy / "0099" / "7" / "checkpoints" / "0099-7-0000000004.xml"
    kept = checkpoint.read_bytes()
    checkpoint.unlink()
    index = ArchiveIndex(LocalStorage(copy), archive.trust, archive.signer)
    try:
        assert index.inclusion_proof("0099", 7, 9)["tree_size"] == 9
        with pytest.raises(NotFound, match="not sealed"):
            index.inclusion_proof("0099", 7, 10)
        checkpoint.write_bytes(kept)
        proof = index.inclusion_proof("0099", 7, 10)
        assert (proof["lot"], proof["tree_size"]) == (4, 10)
        # Every proof is against the newest tree, an event proven before included.
        assert index.inclusion_proof("0099", 7, 9)["tree_size"] == 10
        # A checkpoint missing under an older lot is a failure, not a lot on its way.
        (copy / "0099" / "8" / "checkpoints" / "0099-8-0000000002.xml").unlink()
        with pytest.raises(
            ArchiveInvalid, match=r"0099-8-0000000002\.xml does not verify: checkpoint: no checkpoint"
        ):
            index.inclusion_proof("0099", 8, 1)
    finally:
        index.close()


def test_the_proof_locks_live_only_while_used(archive):
    index = ArchiveIndex(LocalStorage(archive.root), archive.trust, archive.signer)
    try:
        for oper, coffre in COFFRES:
            assert index.inclusion_proof(oper, coffre, 1)["id_evt"] == 1
        assert len(index._coffre_locks) == 0  # none kept once its proofs are given
        with index._coffre_lock("0099", 7), index._coffre_lock("0042", 3):
            assert len(index._coffre_locks) == 2
        gc.collect()
        assert len(index._coffre_locks) == 0
    finally:
        index.close()


def tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and folder under ``root`` (itself included) with its mode, mtime and size."""
    return {
        path.relative_to(root).as_posix(): (path.stat().st_mode, path.stat().st_mtime_ns, path.stat().st_size)
        for path in [root, *root.rglob("*")]
    }


def test_the_api_never_writes_to_the_archive(start, archive, dev, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(archive.root, copy)
    (copy / "0099" / "7" / ".tmp-a-lot-being-sealed").write_bytes(b"half a lot")  # a vault at work
    before = tree_state(copy)
    storage = open_archive(Settings(data_dir=tmp_path / "data", archive_dir=copy))
    storage.probe()
    server = start(storage=storage)
    token = dev.token()
    for path in (
        "/v1/coffres",
        "/v1/coffres/0099/7/lots",
        "/v1/coffres/0099/7/lots/2",
        "/v1/coffres/0099/7/checkpoint",
        "/v1/coffres/0099/7/events/5/proof",
        "/v1/certificates",
        f"/v1/exports/{archive.days()[0]}?format=tar.gz",
    ):
        assert call(server, path, token=token).status == 200, path
    assert tree_state(copy) == before  # not a file added, changed or removed, not even a .tmp-* one
    with pytest.raises(ArchiveReadOnly):
        storage.create("0099/7/2026/01/01/0099-7-0000000099.xml", b"<LotCoffre/>")
    # An archive folder that is not there yet (the vault has not started) is not created.
    absent = open_archive(Settings(data_dir=tmp_path / "data", archive_dir=tmp_path / "absent"))
    with pytest.raises(FileNotFoundError):
        absent.probe()
    assert not (tmp_path / "absent").exists()


def test_the_certificates(api, dev, archive):
    reply = call(api, "/v1/certificates", token=dev.token())
    (certificate,) = reply.json()["certificates"]
    pem = archive.cert.read_text()
    assert certificate["pem"] == pem
    assert (
        certificate["key_id"] == archive.signer.key_id == key_id(x509.load_pem_x509_certificate(pem.encode()))
    )
    assert certificate["signing"] is True
    assert certificate["subject"] == "O=coffre,CN=api test vault"
    assert certificate["not_before"] < certificate["not_after"]


# -- the daily export bundle ------------------------------------------------------------------------------------


def extract(body: bytes, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        tar.extractall(into, filter="data")


def check_bundle(body: bytes, into: Path, trust: TrustStore) -> list[str]:
    """Extract a bundle, check its manifest's signature and digests; return the files it lists."""
    extract(body, into)
    manifest_bytes = (into / "manifest.xml").read_bytes()
    manifest = read_manifest(manifest_bytes, trust)
    verify(manifest_bytes, trust, manifest.generated_at)
    on_disk = sorted(p.relative_to(into).as_posix() for p in into.rglob("*") if p.is_file())
    assert on_disk == sorted([e.path for e in manifest.entries] + ["manifest.xml"])
    for entry in manifest.entries:
        data = (into / entry.path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry.size, entry.sha256)
    return [e.path for e in manifest.entries]


def test_daily_bundles_are_signed_and_rebuild_the_whole_archive(api, dev, archive, tmp_path):
    days = archive.days()
    assert len(days) >= 2
    everything = tmp_path / "all"
    listed: list[str] = []
    for i, day in enumerate(days):
        kind = "tar.gz" if i % 2 else "tar"
        reply = call(api, f"/v1/exports/{day}?format={kind}", token=dev.token())
        assert reply.status == 200, reply.body
        assert reply.headers["Content-Type"] == ("application/gzip" if i % 2 else "application/x-tar")
        assert f"coffre-export-{day}.{kind}" in reply.headers["Content-Disposition"]
        assert reply.headers["Content-Length"] == str(len(reply.body))
        files = check_bundle(reply.body, tmp_path / str(day), archive.trust)
        assert files and all(f"/{day:%Y/%m/%d}/" in f or "/checkpoints/" in f for f in files)
        listed += files
        extract(reply.body, everything)
    expected = sorted(
        "archive/" + p.relative_to(archive.root).as_posix()
        for p in archive.root.rglob("*.xml")
        if p.name != "secret.xml"
    )
    assert sorted(listed) == expected
    (everything / "manifest.xml").unlink()
    report = verify_archive(everything / "archive", [archive.cert])
    assert report.ok, report.lines()
    assert len(report.coffres) == len(COFFRES)


def test_a_bundle_manifest_verifies_with_xmlsec1_and_sha256sum(api, dev, archive, tmp_path):
    day = (
        archive.lots("0042", 3)[0]
        .parent.relative_to(archive.root / "0042" / "3")
        .as_posix()
        .replace("/", "-")
    )
    reply = call(api, f"/v1/exports/{day}?oper=0042", token=dev.token())
    files = check_bundle(reply.body, tmp_path, archive.trust)
    assert files and all(f.startswith("archive/0042/") for f in files)
    assert "-0042.tar" in reply.headers["Content-Disposition"]
    # The documented check: the manifest's own list, through sha256sum.
    sums = subprocess.run(
        'sed -n \'s/.*SHA256="\\([0-9a-f]*\\)".*Chemin="\\([^"]*\\)".*/\\1  \\2/p\' manifest.xml | sha256sum -c -',
        shell=True,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert sums.returncode == 0, sums.stdout + sums.stderr
    assert sums.stdout.count(": OK") == len(files)
    run = xmlsec1_verify(tmp_path / "manifest.xml", archive.cert)
    assert run.returncode == 0, run.stderr


def test_bundles_of_a_quiet_day_and_of_the_future(api, dev, archive, tmp_path):
    quiet = call(api, "/v1/exports/2020-01-01", token=dev.token())
    assert quiet.status == 200
    assert check_bundle(quiet.body, tmp_path, archive.trust) == []
    future = (datetime.now(UTC) + timedelta(days=2)).date()
    assert call(api, f"/v1/exports/{future}", token=dev.token()).status == 404
    assert call(api, f"/v1/exports/{future}?format=zip", token=dev.token()).status == 400


def test_an_export_for_an_operator_not_in_the_archive_is_404(api, dev, archive, tmp_path):
    day = archive.days()[0]
    for oper in ("0077", "9999"):
        reply = call(api, f"/v1/exports/{day}?oper={oper}", token=dev.token())
        assert reply.status == 404, reply.body
        assert reply.json() == {
            "error": "not_found",
            "message": f"operator {oper} is not in the archive: it has no sealed lot",
        }
    # A known operator on a day it sealed nothing: a signed, empty bundle, as for every coffre.
    quiet = call(api, "/v1/exports/2020-01-01?oper=0042", token=dev.token())
    assert quiet.status == 200
    assert check_bundle(quiet.body, tmp_path, archive.trust) == []


# -- the access log --------------------------------------------------------------------------------------------


def test_every_request_is_logged_durably_even_refused_ones(start, dev, regulator, tmp_path):
    server = start()
    intruder = issue(dev, "CN=intruder,O=coffre", tmp_path, "intruder")
    requests = [
        ({"cert": regulator}, "/v1/coffres", 200),
        ({"token": dev.token()}, "/v1/coffres/0099/7/lots/1", 200),
        ({}, "/v1/coffres", 401),
        ({"token": "wrong-token-wrong-token"}, "/v1/certificates", 401),
        ({"cert": intruder}, "/v1/coffres", 403),
        ({"token": dev.token()}, "/v1/coffres/0099/7/lots/77", 404),
        ({"token": dev.token()}, "/v1/coffres/0099/7/lots?from=2000-01-01&to=2026-01-01", 400),
    ]
    ids = []
    for credentials, path, status in requests:
        reply = call(server, path, **credentials)
        assert reply.status == status, (path, reply.body)
        ids.append(reply.headers["X-Request-Id"])
        # Durable before the response: the line is already there.
        assert log_lines(server)[-1]["request_id"] == ids[-1]
    files = list(server.settings.access_log_root.glob("regulator-access-*.jsonl"))
    assert [f.name for f in files] == [f"regulator-access-{datetime.now(UTC):%Y-%m-%d}.jsonl"]
    lines = log_lines(server)
    assert [line["request_id"] for line in lines] == ids
    for line, (_, path, status) in zip(lines, requests, strict=True):
        assert line["status"] == status
        assert line["path"] == path.split("?")[0]
        assert line["method"] == "GET" and line["remote"] == "127.0.0.1"
        assert line["time"].endswith("Z") and line["duration_ms"] >= 0
        assert line["outcome"] == ("ok" if status == 200 else line["outcome"])
        assert (line["error"] is None) == (status == 200)
    assert lines[0]["subject"] == DEVELOPMENT_CLIENT_SUBJECT and lines[0]["auth"] == "mtls"
    assert lines[1]["token"] == "regulator-dev" and lines[1]["auth"] == "token"
    assert lines[1]["bytes"] > 0
    assert lines[2]["outcome"] == "unauthorized" and lines[2]["subject"] is None
    assert lines[3]["token"] is None and lines[3]["outcome"] == "unauthorized"
    assert lines[4]["subject"] == "CN=intruder,O=coffre" and lines[4]["outcome"] == "forbidden"
    assert lines[6]["query"] == "from=2000-01-01&to=2026-01-01"


def test_nothing_is_served_when_the_access_log_cannot_be_written(start, dev, tmp_path):
    server = start(access_log_dir=tmp_path / "access")
    (tmp_path / "access").rmdir()
    (tmp_path / "access").write_text("")  # the log's folder is gone: no line can be written
    reply = call(server, "/v1/coffres/0099/7/lots/1", token=dev.token())
    assert reply.status == 503 and reply.json()["error"] == "access_log_unavailable"
    assert b"LotCoffre" not in reply.body


def test_secrets_sent_anywhere_never_reach_the_access_log(start, dev):
    server = start()
    secret = "tok-" + uuid.uuid4().hex + uuid.uuid4().hex
    jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhdWRpdG9yIn0." + uuid.uuid4().hex
    good = {"token": dev.token()}
    requests: list[tuple[str, dict[str, Any], int, str | None]] = [
        (f"/v1/coffres?access_token={secret}", {}, 401, f"access_token={REDACTED}"),
        (f"/v1/coffres?token={secret}", good, 400, f"token={REDACTED}"),
        (f"/v1/coffres?TOKEN={secret}", good, 400, f"TOKEN={REDACTED}"),
        (
            f"/v1/coffres/0099/7/lots?from=2026-01-01&api_key={secret}&apikey={secret}&key={secret}",
            good,
            400,
            f"from=2026-01-01&api_key={REDACTED}&apikey={REDACTED}&key={REDACTED}",
        ),
        (
            f"/v1/certificates?access%5Ftoken={secret}&Password={secret};X-Amz-Signature={secret}",
            good,
            400,
            f"access%5Ftoken={REDACTED}&Password={REDACTED};X-Amz-Signature={REDACTED}",
        ),
        (f"/v1/coffres?secret={secret}&auth={secret}", good, 400, f"secret={REDACTED}&auth={REDACTED}"),
        (f"/v1/coffres?Authorization=Bearer%20{secret}", {}, 401, f"Authorization={REDACTED}"),
        (f"/v1/coffres?q={jwt}", good, 400, f"q={REDACTED}"),
        (f"/v1/coffres/Bearer%20{secret}/7/lots", good, 400, None),
        (
            "/v1/coffres",
            {"headers": {"User-Agent": f"probe (Authorization: Bearer {secret})"}},
            401,
            None,
        ),
        ("/v1/coffres", {"token": secret}, 401, None),  # a wrong token in the header
        ("/v1/coffres", good, 200, None),  # the right one
        (
            f"/v1/coffres/0099/7/lots?from={T0.date()}&page_token=MTox&token={secret}",
            good,
            400,
            f"from={T0.date()}&page_token=MTox&token={REDACTED}",  # a cursor, not a secret: kept
        ),
    ]
    for path, options, status, _query in requests:
        assert call(server, path, **options).status == status, path
    call(server, f"/v1/coffres?token={secret}", token=dev.token(), method="PUT")
    text = "".join(p.read_text() for p in server.settings.access_log_root.glob("regulator-access-*.jsonl"))
    for leaked in (secret, secret[4:20], dev.token(), jwt.split(".")[-1]):
        assert leaked not in text
    lines = log_lines(server)
    assert len(lines) == len(requests) + 1  # every request was logged
    for line, (_path, _options, status, query) in zip(lines[:-1], requests, strict=True):
        assert line["status"] == status
        if query is not None:
            assert line["query"] == query
    assert lines[8]["path"] == f"/v1/coffres/Bearer%20{REDACTED}"
    assert "Bearer [REDACTED]" in lines[8]["error"]
    assert lines[9]["user_agent"] == f"probe (Authorization: Bearer {REDACTED})"
    assert lines[-1]["status"] == 405 and lines[-1]["query"] == f"token={REDACTED}"


# -- slow clients ------------------------------------------------------------------------------------------------

FAST = ConnectionTimeouts(handshake=1.0, request_head=1.5, idle=2.0)
SLACK = 1.0
"""How late after its limit a connection may close (timer and TLS close) in these tests."""


def test_the_default_limits_are_the_documented_ones_and_the_settings():
    assert (DEFAULT_TIMEOUTS.handshake, DEFAULT_TIMEOUTS.request_head, DEFAULT_TIMEOUTS.idle) == (10, 10, 30)
    settings = Settings()
    assert (
        settings.api_handshake_timeout_seconds,
        settings.api_request_head_timeout_seconds,
        settings.api_idle_timeout_seconds,
    ) == (10, 10, 30)
    doc = (Path(__file__).parents[1] / "docs" / "regulator-api.md").read_text(encoding="utf-8")
    for row in (
        "| TLS handshake | `COFFRE_API_HANDSHAKE_TIMEOUT_SECONDS` | 10 s |",
        "| request head | `COFFRE_API_REQUEST_HEAD_TIMEOUT_SECONDS` | 10 s |",
        "| idle | `COFFRE_API_IDLE_TIMEOUT_SECONDS` | 30 s |",
    ):
        assert row in doc


def tls_connect(server: ApiServer, dev: DevelopmentTls) -> ssl.SSLSocket:
    """A TLS connection to the API, handshake done."""
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return client_context(dev.ca_cert).wrap_socket(raw, server_hostname="127.0.0.1")


def seconds_until_closed(
    connection: socket.socket, limit: float, trickle: bytes = b"", every: float = 1.0
) -> float:
    """Seconds until the server closes ``connection``, sending it one byte of ``trickle`` every
    ``every`` seconds meanwhile; fails if it is still open after ``limit`` seconds or answers."""
    started = time.monotonic()
    received = b""
    while (elapsed := time.monotonic() - started) < limit:
        connection.settimeout(every)
        try:
            data = connection.recv(4096)
        except TimeoutError:
            if trickle:
                try:
                    connection.sendall(trickle[:1])
                except (OSError, ssl.SSLError):
                    return time.monotonic() - started
                trickle = trickle[1:]
            continue
        except (OSError, ssl.SSLError):
            return time.monotonic() - started
        if not data:
            assert received == b"", received
            return time.monotonic() - started
        received += data
    raise AssertionError(f"the connection is still open after {elapsed:.1f} s")


def read_answer(connection: ssl.SSLSocket) -> tuple[int, bytes]:
    """One HTTP/1.1 answer with a Content-Length: its status and body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
    )
    while len(body) < length:
        body += connection.recv(4096)
    return int(head.split(b" ")[1]), body


def request_head(token: str, extra: str = "") -> bytes:
    return f"GET /v1/coffres HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n{extra}\r\n".encode()


def test_a_client_that_never_starts_the_tls_handshake_is_disconnected(start):
    server = start(timeouts=FAST)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        elapsed = seconds_until_closed(raw, limit=8)
    assert FAST.handshake - 0.3 <= elapsed <= FAST.handshake + SLACK, elapsed


def test_a_client_that_sends_nothing_after_the_handshake_is_disconnected(start, dev):
    server = start(timeouts=FAST)
    with tls_connect(server, dev) as connection:
        elapsed = seconds_until_closed(connection, limit=8)
    assert FAST.request_head - 0.3 <= elapsed <= FAST.request_head + SLACK, elapsed
    assert log_lines(server) == []  # no request was ever complete


def test_a_client_that_trickles_its_request_head_is_disconnected(start, dev):
    server = start(timeouts=FAST)
    with tls_connect(server, dev) as connection:
        elapsed = seconds_until_closed(connection, limit=8, trickle=request_head(dev.token()), every=0.4)
    assert FAST.request_head - 0.3 <= elapsed <= FAST.request_head + SLACK, elapsed
    assert log_lines(server) == []


def test_an_idle_or_trickling_client_is_disconnected_after_an_answer(start, dev):
    server = start(timeouts=FAST)
    with tls_connect(server, dev) as connection:
        connection.sendall(request_head(dev.token()))
        status, body = read_answer(connection)
        assert status == 200 and json.loads(body)["coffres"]
        # Keep-alive: the next request may come, but its head must be complete in time.
        elapsed = seconds_until_closed(connection, limit=8, trickle=request_head(dev.token()), every=0.4)
    assert FAST.idle - 0.3 <= elapsed <= FAST.idle + SLACK, elapsed
    with tls_connect(server, dev) as connection:
        connection.sendall(request_head(dev.token()))
        assert read_answer(connection)[0] == 200
        elapsed = seconds_until_closed(connection, limit=8)  # idle
    assert FAST.idle - 0.3 <= elapsed <= FAST.idle + SLACK, elapsed
    assert [line["status"] for line in log_lines(server)] == [200, 200]


def test_a_trickled_request_body_is_not_waited_for(start, dev):
    server = start(timeouts=FAST)
    with tls_connect(server, dev) as connection:
        connection.sendall(request_head(dev.token(), "Content-Length: 1000\r\n"))
        status, _ = read_answer(connection)  # answered without reading the body
        assert status == 200
        elapsed = seconds_until_closed(connection, limit=8, trickle=b"x" * 100, every=0.4)
    assert elapsed <= FAST.idle + SLACK, elapsed


def test_a_request_that_cannot_be_parsed_gets_a_logged_json_error(start, dev):
    server = start(timeouts=FAST)
    with tls_connect(server, dev) as connection:
        connection.sendall(b"GET /v1/coffres?token=" + b"s" * 20 + b" HTTP/1.1\r\nNo colon here\r\n\r\n")
        status, body = read_answer(connection)
    assert status == 400
    assert json.loads(body)["error"] == "bad_request"
    (line,) = log_lines(server)
    assert line["status"] == 400 and line["outcome"] == "bad_request" and line["method"] is None
    assert "s" * 20 not in json.dumps(line)


# -- S3 -----------------------------------------------------------------------------------------------------------


def test_the_api_over_s3_object_lock(start, archive, s3_client, dev, tmp_path):
    storage = S3ObjectLockStorage(f"coffre-api-{uuid.uuid4().hex[:10]}", prefix="anj", client=s3_client)
    storage.ensure_bucket()
    seal(storage, archive.signer, tmp_path / "journal", coffres=(("0099", 7), ("0042", 1)), events=5, lot=2)
    server = start(storage=storage)
    coffres = call(server, "/v1/coffres", token=dev.token()).json()["coffres"]
    assert [(c["id_oper"], c["id_coffre"], c["lots"], c["events"]) for c in coffres] == [
        ("0042", 1, 3, 5),
        ("0099", 7, 3, 5),
    ]
    lots = listing(server, dev.token(), "0099", 7, 2)
    assert [lot["lot"] for lot in lots] == [1, 2, 3]
    for lot in lots:
        body = call(server, f"/v1/coffres/0099/7/lots/{lot['lot']}", token=dev.token()).body
        stored = s3_client.get_object(Bucket=storage.bucket, Key=f"anj/{lot['path']}")["Body"].read()
        assert body == stored and hashlib.sha256(body).hexdigest() == lot["sha256"]
    proof = call(server, "/v1/coffres/0099/7/events/3/proof", token=dev.token())
    assert check_inclusion(InclusionProof.from_dict(proof.json()), event("0099", 7, 3)) == []
    days = sorted(
        {lot["sealed_day"] for lot in listing(server, dev.token(), "0042", 1, 10)}
        | {lot["sealed_day"] for lot in lots}
    )
    for day in days:
        reply = call(server, f"/v1/exports/{day}?format=tar.gz", token=dev.token())
        check_bundle(reply.body, tmp_path / day, archive.trust)
        extract(reply.body, tmp_path / "bundles")
        (tmp_path / "bundles" / "manifest.xml").unlink()
    report = verify_archive(tmp_path / "bundles" / "archive", [archive.cert])
    assert report.ok, report.lines()


def test_a_storage_failure_is_a_503_with_a_message(start, s3_client, dev):
    missing = S3ObjectLockStorage(f"no-such-bucket-{uuid.uuid4().hex[:8]}", client=s3_client)
    server = start(storage=missing)
    reply = call(server, "/v1/coffres", token=dev.token())
    assert reply.status == 503
    body = reply.json()
    assert body["error"] == "storage_unavailable" and "NoSuchBucket" in body["message"]
    assert "Traceback" not in body["message"]
    assert log_lines(server)[-1]["status"] == 503
