"""``coffre regulator-api`` as a process of its own, run as Kubernetes runs it: settings it
refuses (exit 2, the variable named), its ops endpoints and readiness checks, the API over real
TLS, and SIGTERM with a large export still being downloaded (no new connection, the answer in
flight finishes, exit 0)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from coffre_regulator.archive_index import read_manifest
from coffre_regulator.service import serve
from coffre_vault.sealer import Sealer

from coffre.adapters.broker import free_port_block
from coffre.adapters.journal import JournalSet
from coffre.adapters.keys import load_signer, write_key_pair
from coffre.adapters.storage import LocalStorage
from coffre.adapters.tls import development_tls
from coffre.config import Settings
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize
from coffre.domain.signing import TrustStore

from events import POINSCRIT

EVENTS = 12_000
"""About 7 MB of lots sealed today: an export larger than what the sockets' buffers hold, so it
is still being sent when the signal comes."""


@dataclass
class Archive:
    base: Path
    root: Path
    key: Path
    cert: Path


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Archive:
    base = tmp_path_factory.mktemp("regulator-service")
    key, cert = write_key_pair(base / "keys", "regulator test vault", "ecdsa", days=30)
    root = base / "archive"
    root.mkdir()
    template = canonical_bytes(normalize(POINSCRIT, id_evt=1))
    with JournalSet(base / "journal") as journals:
        sealer = Sealer(LocalStorage(root), load_signer(key, cert), journals, max_events=500, max_age=3600)
        journal = journals.journal("0099", 7)
        for n in range(1, EVENTS + 1):
            journal.append(n, template.replace(b"<IDEvt>1</IDEvt>", f"<IDEvt>{n}</IDEvt>".encode()))
        journal.sync()
        sealer.recorded("0099", 7)
        sealer.seal_all()
    return Archive(base, root, key, cert)


def environment(archive: Archive, data: Path, **variables: str) -> dict[str, str]:
    api_port = free_port_block(2)
    ops_port = api_port + 1
    env = {name: value for name, value in os.environ.items() if not name.startswith("COFFRE_")}
    return env | {
        "COFFRE_DATA_DIR": str(data),
        "COFFRE_ARCHIVE_DIR": str(archive.root),
        "COFFRE_SIGNING_KEY": str(archive.key),
        "COFFRE_SIGNING_CERT": str(archive.cert),
        "COFFRE_API_PORT": str(api_port),
        "COFFRE_OPS_PORT": str(ops_port),
        "COFFRE_LOG_FORMAT": "text",
        **variables,
    }


def regulator_api(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "coffre.cli", "regulator-api"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def wait_ready(ops: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited {process.returncode}: {log.read_text()}"
        status, body = get(f"{ops}/readyz")
        if status == 200:
            return json.loads(body)
        time.sleep(0.2)
    raise AssertionError(f"not ready after {timeout}s: {body} {log.read_text()}")


# -- settings refused ---------------------------------------------------------------------------------

REFUSED = {
    "no port": ({"COFFRE_API_PORT": "0"}, "COFFRE_API_PORT: coffre regulator-api serves the API"),
    "an unknown mode": ({"COFFRE_API_AUTH": "basic"}, "COFFRE_API_AUTH: "),
    "a subject that is no name": (
        {"COFFRE_API_ALLOWED_SUBJECTS": "no equals sign"},
        "regulator API: allowed subject 'no equals sign' is not an RFC 4514 name",
    ),
    "a missing tokens file": (
        {"COFFRE_API_AUTH": "token", "COFFRE_API_TOKENS_FILE": "/nonexistent/tokens"},
        "regulator API: cannot read the tokens file /nonexistent/tokens",
    ),
    "mtls without a client CA": (
        {
            "COFFRE_API_AUTH": "mtls",
            "COFFRE_API_TLS_CERT": "/nonexistent/c",
            "COFFRE_API_TLS_KEY": "/nonexistent/k",
        },
        "COFFRE_API_AUTH=mtls needs COFFRE_API_CLIENT_CA",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_api_settings_stop_it_with_exit_2(archive: Archive, tmp_path: Path, case: str) -> None:
    variables, message = REFUSED[case]
    result = subprocess.run(
        [sys.executable, "-m", "coffre.cli", "regulator-api"],
        env=environment(archive, tmp_path / "data", **variables),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "coffre: configuration error: " in result.stderr and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_signing_key_files_that_never_come_stop_it_with_exit_2(
    archive: Archive, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        archive_dir=archive.root,
        signing_key=tmp_path / "absent-key.pem",
        signing_cert=tmp_path / "absent-cert.pem",
        ops_port=0,
    )
    started = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        asyncio.run(serve(settings, key_wait=0.5))
    assert stopped.value.code == 2 and time.monotonic() - started < 10
    assert "coffre: configuration error: COFFRE_SIGNING_KEY, COFFRE_SIGNING_CERT: " in capsys.readouterr().err


# -- running -------------------------------------------------------------------------------------------


def tls_get(port: int, context: ssl.SSLContext, path: str, token: str) -> tuple[int, bytes]:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=20) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as connection,
    ):
        connection.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def test_it_serves_reports_ready_and_finishes_an_export_in_flight_on_sigterm(
    archive: Archive, tmp_path: Path
) -> None:
    env = environment(archive, tmp_path / "data", COFFRE_SHUTDOWN_TIMEOUT_SECONDS="10")
    api_port, ops = int(env["COFFRE_API_PORT"]), f"http://127.0.0.1:{env['COFFRE_OPS_PORT']}"
    log = tmp_path / "regulator.log"
    process = regulator_api(env, log)
    try:
        ready = wait_ready(ops, process, log)
        assert ready == {
            "service": "regulator",
            "status": "ready",
            "checks": {"archive": "ok", "signing_key": "ok"},
        }
        status, health = get(f"{ops}/healthz")
        assert status == 200 and json.loads(health)["service"] == "regulator"
        tls = development_tls(tmp_path / "data" / "tls")  # made by the process at its start
        context = ssl.create_default_context(cafile=str(tls.ca_cert))
        status, body = tls_get(api_port, context, "/v1/coffres", tls.token())
        assert status == 200, body
        (coffre,) = json.loads(body)["coffres"]
        assert (coffre["id_oper"], coffre["id_coffre"], coffre["events"]) == ("0099", 7, EVENTS)
        status, metrics = get(f"{ops}/metrics")
        assert status == 200 and 'coffre_api_requests_total{status="200"} 1.0' in metrics

        # A large export, read slowly by a client with a small receive window...
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        raw.settimeout(20)
        raw.connect(("127.0.0.1", api_port))
        download = context.wrap_socket(raw, server_hostname="127.0.0.1")
        today = time.strftime("%Y-%m-%d", time.gmtime())
        download.sendall(
            f"GET /v1/exports/{today} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {tls.token()}\r\n\r\n".encode()
        )
        received = download.recv(16384)
        while b"\r\n\r\n" not in received:
            received += download.recv(16384)
        head, _, body = received.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        assert head.startswith(b"HTTP/1.1 200") and length > 6_000_000, head
        # ...is in flight when SIGTERM comes: no new connection is taken, the download goes on.
        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", api_port), timeout=1).close()
            except ConnectionRefusedError:
                break
            assert time.monotonic() < deadline, "still accepting connections after SIGTERM"
            time.sleep(0.05)
        assert process.poll() is None, "it exited with an answer in flight"
        while len(body) < length:
            chunk = download.recv(65536)
            assert chunk, f"the export was cut at {len(body)} of {length} bytes"
            body += chunk
        download.close()
        assert process.wait(timeout=15) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        files = {member.name: tar.extractfile(member).read() for member in tar if member.isfile()}
    manifest = read_manifest(files.pop("manifest.xml"), TrustStore.from_pem_files([archive.cert]))
    assert len(manifest.entries) == len(files) == 2 * (EVENTS // 500)  # every lot and its checkpoint
    for entry in manifest.entries:
        stored = (archive.root / entry.path.removeprefix("archive/")).read_bytes()
        assert files[entry.path] == stored and hashlib.sha256(stored).hexdigest() == entry.sha256
    text = log.read_text()
    assert "no new connection; answers in flight may finish" in text
