"""The regulator API's checkpoints, their evidence (RFC 3161 tokens, witnesses' cosignatures)
and consistency proofs (issue 21), end to end: a real TLS server over an archive sealed by the
real Sealer, evidence files written beside its checkpoints by the archive's own storage, and a
real TLS client. One token comes from a real TSA (``openssl ts``, tests/tsa.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from coffre_regulator.api import DEFAULT_TIMEOUTS
from coffre_regulator.archive_index import ArchiveIndex, ArchiveInvalid, InvalidRequest, NotFound
from lxml import etree
from test_regulator_api import (
    T0,
    ApiServer,
    Archive,
    RecordingStorage,
    call,
    check_bundle,
    extract,
    free_port,
    seal,
)

from coffre.adapters.storage import LocalStorage
from coffre.adapters.tls import DevelopmentTls, development_tls
from coffre.commands.verify import verify_archive
from coffre.config import Settings
from coffre.domain.lot import parse_document, read_checkpoint
from coffre.domain.merkle import verify_consistency
from coffre.domain.proofs import ConsistencyProof, check_consistency
from coffre.domain.signing import Signer, TrustStore, generate_key_and_certificate, verify
from coffre.domain.timestamp import build_request, load_trust_files, verify_response, verify_token
from coffre.domain.witness import CosignatureInvalid, WitnessKey, cosigned_by, note_body

from tsa import Pki, Tsa, fetch, openssl_or_skip

COFFRES = (("0099", 7), ("0042", 3))
EVENTS = 20  # lots of 3: seven lots and checkpoints per coffre, of tree sizes 3, 6, …, 18, 20
SIZES = (3, 6, 9, 12, 15, 18, 20)
TSA = "tsa.example.fr"
WITNESS = "anj-witness"


def timestamp_name(oper: str, coffre: int, number: int, name: str) -> str:
    return f"{oper}/{coffre}/checkpoints/{oper}-{coffre}-{number:010d}.tsa-{name}.tsr"


def cosignature_name(oper: str, coffre: int, number: int, name: str) -> str:
    return f"{oper}/{coffre}/checkpoints/{oper}-{coffre}-{number:010d}.witness-{name}.cosig"


def fake_token(oper: str, coffre: int, number: int) -> bytes:
    """Opaque bytes: the API serves a token as stored, it does not read it."""
    return b"\x30\x82\x00\x10" + f"token {oper}/{coffre}/{number}".encode() + bytes(range(256))


def fake_cosignature(oper: str, coffre: int, number: int, size: int) -> bytes:
    return f"coffre/{oper}/{coffre}\n{size}\nAAAA{number:04d}=\n\n— {WITNESS} Zm9vYmFy{number}\n".encode()


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Archive:
    """Two coffres of seven lots; every checkpoint of 0099/7 has a token, checkpoints 1 to 5 a
    cosignature too; 0042/3 has no evidence (yet)."""
    base = tmp_path_factory.mktemp("evidence-archive")
    key, cert = generate_key_and_certificate("api evidence vault", "ecdsa", not_before=T0 - timedelta(days=1))
    (base / "cert.pem").write_bytes(cert)
    signer = Signer.from_pem(key, cert)
    root = base / "root"
    root.mkdir()
    storage = LocalStorage(root)
    seal(storage, signer, base / "journal", coffres=COFFRES, events=EVENTS)
    for number, size in enumerate(SIZES, start=1):
        storage.create(timestamp_name("0099", 7, number, TSA), fake_token("0099", 7, number))
        if number <= 5:
            storage.create(
                cosignature_name("0099", 7, number, WITNESS), fake_cosignature("0099", 7, number, size)
            )
    storage.create(timestamp_name("0099", 7, 2, "0-second.tsa"), fake_token("0099", 7, 0))
    (root / "0099" / "7" / "checkpoints" / "notes.txt").write_bytes(b"not part of the archive")
    return Archive(root, signer, base / "cert.pem", TrustStore.from_pem_files([base / "cert.pem"]))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("evidence-data")


@pytest.fixture(scope="module")
def dev(data_dir) -> DevelopmentTls:
    return development_tls(data_dir / "tls")


@pytest.fixture(scope="module")
def api(archive, dev, data_dir):
    settings = Settings(
        data_dir=data_dir,
        archive_dir=archive.root,
        api_host="127.0.0.1",
        api_port=free_port(),
        api_auth="either",
        access_log_dir=data_dir / "access",
    )
    server = ApiServer(settings, RecordingStorage(archive.root), archive, DEFAULT_TIMEOUTS)
    yield server
    server.stop()


def get(api: ApiServer, dev: DevelopmentTls, path: str, **kwargs: Any):
    return call(api, path, token=dev.token(), **kwargs)


def checkpoint_file(archive: Archive, oper: str, coffre: int, number: int) -> Path:
    return archive.root / oper / str(coffre) / "checkpoints" / f"{oper}-{coffre}-{number:010d}.xml"


# -- the checkpoints listing -------------------------------------------------------------------------


def test_the_checkpoints_are_listed_in_lot_order_with_their_evidence(api, dev, archive):
    reply = get(api, dev, "/v1/coffres/0099/7/checkpoints")
    assert reply.status == 200, reply.body
    assert reply.headers["Cache-Control"] == "no-store"
    body = reply.json()
    assert (body["id_oper"], body["id_coffre"], body["next_page_token"]) == ("0099", 7, None)
    listed = body["checkpoints"]
    assert [c["lot"] for c in listed] == list(range(1, len(SIZES) + 1))
    for entry, size in zip(listed, SIZES, strict=True):
        number = entry["lot"]
        stored = checkpoint_file(archive, "0099", 7, number).read_bytes()
        checkpoint = read_checkpoint(parse_document(stored))
        assert entry["path"] == f"0099/7/checkpoints/0099-7-{number:010d}.xml"
        assert entry["url"] == f"/v1/coffres/0099/7/checkpoints/{number}"
        assert (entry["size"], entry["sha256"]) == (len(stored), hashlib.sha256(stored).hexdigest())
        assert (entry["tree_size"], entry["root"]) == (size, checkpoint.tree_root.hex())
        assert entry["date"] == checkpoint.at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        tsas = [TSA, "0-second.tsa"] if number == 2 else [TSA]
        assert [t["tsa"] for t in entry["timestamps"]] == sorted(tsas)
        for stamp in entry["timestamps"]:
            assert stamp["path"] == timestamp_name("0099", 7, number, stamp["tsa"])
            assert stamp["url"] == f"/v1/coffres/0099/7/checkpoints/{number}/timestamps/{stamp['tsa']}"
        expected = (
            [
                {
                    "witness": WITNESS,
                    "path": cosignature_name("0099", 7, number, WITNESS),
                    "url": f"/v1/coffres/0099/7/checkpoints/{number}/cosignatures/{WITNESS}",
                }
            ]
            if number <= 5
            else []
        )
        assert entry["cosignatures"] == expected
    # 0042/3 has evidence only where the tests below add some (lots 2, 3 and 5).
    quiet = get(api, dev, "/v1/coffres/0042/3/checkpoints").json()["checkpoints"]
    assert [c["lot"] for c in quiet] == list(range(1, len(SIZES) + 1))
    assert all(c["timestamps"] == c["cosignatures"] == [] for c in quiet if c["lot"] in (1, 4, 6, 7))


def test_the_checkpoints_listing_is_paged_from_any_lot(api, dev):
    seen: list[int] = []
    token = None
    pages = 0
    while True:
        query = "page_size=3" + (f"&page_token={token}" if token else "")
        reply = get(api, dev, f"/v1/coffres/0099/7/checkpoints?{query}")
        assert reply.status == 200, reply.body
        page = reply.json()
        seen += [c["lot"] for c in page["checkpoints"]]
        pages += 1
        token = page["next_page_token"]
        if token is None:
            break
    assert seen == list(range(1, len(SIZES) + 1)) and pages == 3
    late = get(api, dev, "/v1/coffres/0099/7/checkpoints?from_lot=5&page_size=2").json()
    assert [c["lot"] for c in late["checkpoints"]] == [5, 6] and late["next_page_token"]
    rest = get(
        api,
        dev,
        f"/v1/coffres/0099/7/checkpoints?from_lot=5&page_size=2&page_token={late['next_page_token']}",
    ).json()
    assert [c["lot"] for c in rest["checkpoints"]] == [7] and rest["next_page_token"] is None
    beyond = get(api, dev, "/v1/coffres/0099/7/checkpoints?from_lot=50")
    assert beyond.status == 200 and beyond.json()["checkpoints"] == []
    # A token belongs to its listing: another from_lot, or a forged one, is a 400.
    for query in (
        f"from_lot=1&page_token={late['next_page_token']}",
        "page_token=bm90LWEtdG9rZW4",
        "page_token=..%2f",
        "page_size=0",
        "page_size=1001",
        "from_lot=0",
        "from_lot=-1",
        "from=2026-01-01",
    ):
        reply = get(api, dev, f"/v1/coffres/0099/7/checkpoints?{query}")
        assert reply.status == 400 and reply.json()["error"] == "bad_request", (query, reply.body)


def test_the_listing_touches_only_the_lots_of_its_page(api, dev):
    api.storage.calls.clear()
    reply = get(api, dev, "/v1/coffres/0099/7/checkpoints?from_lot=3&page_size=1")
    assert [c["lot"] for c in reply.json()["checkpoints"]] == [3]
    listed = [prefix for kind, prefix in api.storage.calls if kind == "list"]
    assert listed == ["0099/7/checkpoints/0099-7-0000000003"]


# -- one checkpoint, its token and its cosignatures ---------------------------------------------------


def test_each_checkpoint_byte_for_byte_and_the_newest_one_still(api, dev, archive):
    for number in range(1, len(SIZES) + 1):
        stored = checkpoint_file(archive, "0099", 7, number).read_bytes()
        reply = get(api, dev, f"/v1/coffres/0099/7/checkpoints/{number}")
        assert reply.status == 200 and reply.body == stored
        assert reply.headers["Content-Type"] == "application/xml"
        sha = hashlib.sha256(stored)
        assert reply.headers["ETag"] == f'"{sha.hexdigest()}"'
        assert reply.headers["X-Coffre-Path"] == f"0099/7/checkpoints/0099-7-{number:010d}.xml"
        assert "immutable" in reply.headers["Cache-Control"]
        verify(reply.body, archive.trust, read_checkpoint(parse_document(reply.body)).at)
        again = get(
            api,
            dev,
            f"/v1/coffres/0099/7/checkpoints/{number}",
            headers={"If-None-Match": reply.headers["ETag"]},
        )
        assert again.status == 304 and again.body == b""
    newest = get(api, dev, "/v1/coffres/0099/7/checkpoint")
    assert (
        newest.status == 200 and newest.body == checkpoint_file(archive, "0099", 7, len(SIZES)).read_bytes()
    )
    assert newest.headers["Cache-Control"] == "no-cache"
    missing = get(api, dev, "/v1/coffres/0099/7/checkpoints/8")
    assert missing.status == 404 and missing.json()["message"] == "coffre 0099/7 has no checkpoint 8"
    assert get(api, dev, "/v1/coffres/0099/7/checkpoints/9999999999").status == 404


def test_tokens_and_cosignatures_are_served_as_stored(api, dev, archive):
    listed = get(api, dev, "/v1/coffres/0099/7/checkpoints").json()["checkpoints"]
    served = 0
    for entry in listed:
        for stamp in entry["timestamps"]:
            reply = get(api, dev, stamp["url"])
            stored = (archive.root / stamp["path"]).read_bytes()
            assert reply.status == 200 and reply.body == stored
            assert reply.headers["Content-Type"] == "application/pkcs7-mime"
            assert reply.headers["ETag"] == f'"{hashlib.sha256(stored).hexdigest()}"'
            assert reply.headers["X-Coffre-Path"] == stamp["path"]
            assert f'filename="{stamp["path"].rsplit("/", 1)[1]}"' in reply.headers["Content-Disposition"]
            served += 1
        for cosignature in entry["cosignatures"]:
            reply = get(api, dev, cosignature["url"])
            assert reply.status == 200 and reply.body == (archive.root / cosignature["path"]).read_bytes()
            assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
            assert "— anj-witness" in reply.body.decode("utf-8")
            again = get(api, dev, cosignature["url"], headers={"If-None-Match": reply.headers["ETag"]})
            assert again.status == 304
            served += 1
    assert served == len(SIZES) + 1 + 5
    for path, message in (
        (
            f"/v1/coffres/0099/7/checkpoints/6/cosignatures/{WITNESS}",
            "has no cosignature from witness anj-witness",
        ),
        (
            "/v1/coffres/0099/7/checkpoints/1/timestamps/other-tsa",
            "has no time-stamp token from TSA other-tsa",
        ),
        (f"/v1/coffres/0099/7/checkpoints/99/timestamps/{TSA}", "checkpoint 99 of coffre 0099/7"),
        (f"/v1/coffres/0042/3/checkpoints/1/timestamps/{TSA}", "checkpoint 1 of coffre 0042/3"),
        (f"/v1/coffres/0099/7/checkpoints/1/timestamps/{WITNESS}", "has no time-stamp token"),
    ):
        reply = get(api, dev, path)
        assert reply.status == 404 and message in reply.json()["message"], (path, reply.body)


UNKNOWN = "coffre 0099/5 is not in the archive: it has no sealed lot"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/coffres/0099/5/checkpoints",
        "/v1/coffres/0099/5/checkpoints/1",
        f"/v1/coffres/0099/5/checkpoints/1/timestamps/{TSA}",
        f"/v1/coffres/0099/5/checkpoints/1/cosignatures/{WITNESS}",
        "/v1/coffres/0099/5/consistency?old=1",
    ],
)
def test_an_unknown_coffre_is_the_same_404_on_the_new_endpoints(api, dev, path):
    reply = get(api, dev, path)
    assert reply.status == 404 and reply.json() == {"error": "not_found", "message": UNKNOWN}


@pytest.mark.parametrize(
    "name",
    [
        "..",
        "%2e%2e",
        "../../../../lots/1",
        "..%2f..%2fsecret.xml",
        "a%2Fb",
        "a..b",
        "TSA",
        "Anj",
        "-tsa",
        ".tsa",
        "tsa_1",
        "tsa%20x",
        "tsa%00",
        "a" * 64,
        "%C3%A9",
        "tsa.example.fr.tsr",
    ],
)
@pytest.mark.parametrize("kind", ["timestamps", "cosignatures"])
def test_bad_names_never_reach_storage(api, dev, kind, name):
    api.storage.calls.clear()
    reply = get(api, dev, f"/v1/coffres/0099/7/checkpoints/1/{kind}/{name}")
    if name == "tsa.example.fr.tsr":  # a valid name: looked for, not there
        assert reply.status == 404, reply.body
        assert api.storage.calls and all(".." not in key for _, key in api.storage.calls)
        return
    assert reply.status in (400, 404), (name, reply.status, reply.body)
    if reply.status == 400:
        assert (
            "[a-z0-9][a-z0-9.-]{0,62}" in reply.json()["message"] or "lot number" in reply.json()["message"]
        )
    assert api.storage.calls == []


def test_the_longest_name_is_served(api, dev, archive):
    name = "z" + "9" * 62
    LocalStorage(archive.root).create(timestamp_name("0042", 3, 5, name), b"longest")
    reply = get(api, dev, f"/v1/coffres/0042/3/checkpoints/5/timestamps/{name}")
    assert reply.status == 200 and reply.body == b"longest"
    listed = get(api, dev, "/v1/coffres/0042/3/checkpoints?from_lot=5").json()["checkpoints"]
    assert name in [t["tsa"] for t in listed[0]["timestamps"]]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/coffres/0099/7/checkpoints/0",
        "/v1/coffres/0099/7/checkpoints/01",
        "/v1/coffres/0099/7/checkpoints/1.xml",
        "/v1/coffres/0099/7/checkpoints/%2e%2e",
        "/v1/coffres/0099/7/checkpoints/99999999999",
        f"/v1/coffres/0099/7/checkpoints/0/timestamps/{TSA}",
        "/v1/coffres/0099/07/checkpoints/1",
        "/v1/coffres/0099/7/consistency",
        "/v1/coffres/0099/7/consistency?old=0",
        "/v1/coffres/0099/7/consistency?old=-1",
        "/v1/coffres/0099/7/consistency?old=x",
        "/v1/coffres/0099/7/consistency?old=5&new=4",
        "/v1/coffres/0099/7/consistency?old=5&old=6",
        "/v1/coffres/0099/7/consistency?old=1&size=3",
    ],
)
def test_malformed_requests_are_400_before_any_storage_call(api, dev, path):
    api.storage.calls.clear()
    reply = get(api, dev, path)
    assert reply.status == 400 and reply.json()["error"] == "bad_request", (path, reply.body)
    assert api.storage.calls == []


# -- consistency proofs ----------------------------------------------------------------------------


def roots(api: ApiServer, dev: DevelopmentTls) -> dict[int, str]:
    """Tree size -> root, as the signed checkpoints give them."""
    listed = get(api, dev, "/v1/coffres/0099/7/checkpoints").json()["checkpoints"]
    return {c["tree_size"]: c["root"] for c in listed}


@pytest.mark.parametrize(
    ("old", "new"), [(1, 20), (3, 20), (3, 9), (5, 17), (20, 20), (1, 1), (9, None), (19, None)]
)
def test_consistency_proofs_between_any_two_sizes_check(api, dev, old, new):
    query = f"old={old}" + (f"&new={new}" if new is not None else "")
    reply = get(api, dev, f"/v1/coffres/0099/7/consistency?{query}")
    assert reply.status == 200, reply.body
    data = reply.json()
    assert data["type"] == "consistency"
    proof = ConsistencyProof.from_dict(data)
    assert (proof.id_oper, proof.id_coffre, proof.old_size, proof.new_size) == ("0099", 7, old, new or EVENTS)
    assert verify_consistency(
        proof.old_size,
        proof.new_size,
        bytes.fromhex(proof.old_root),
        bytes.fromhex(proof.new_root),
        [bytes.fromhex(h) for h in proof.path],
    )
    assert check_consistency(proof) == []
    signed = roots(api, dev)
    for size, root in ((proof.old_size, proof.old_root), (proof.new_size, proof.new_root)):
        if size in signed:  # a size a checkpoint signs: the same root
            assert root == signed[size]
    other = ConsistencyProof.from_dict(data | {"old_root": hashlib.sha256(b"another tree").hexdigest()})
    assert check_consistency(other)


def test_sizes_beyond_the_sealed_events_are_404(api, dev):
    for query, size in (
        ("old=1&new=21", 21),
        ("old=21", 21),
        ("old=21&new=25", 25),
        ("old=1&new=9999999999", 9999999999),
    ):
        reply = get(api, dev, f"/v1/coffres/0099/7/consistency?{query}")
        assert reply.status == 404, (query, reply.body)
        message = reply.json()["message"]
        assert f"tree of size {size}" in message and "is not sealed" in message and "1..20" in message


def test_coffre_proof_gives_the_same_proof_offline_and_checks_the_saved_json(api, dev, archive, tmp_path):
    reply = get(api, dev, "/v1/coffres/0099/7/consistency?old=7")
    saved = tmp_path / "consistency.json"
    saved.write_bytes(reply.body)
    # The archive as a regulator downloads it (lots and checkpoints), checked offline.
    copy = tmp_path / "archive"
    for file in archive.root.rglob("*.xml"):
        if file.name != "secret.xml":
            target = copy / file.relative_to(archive.root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, target)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "coffre.cli",
            "proof",
            str(copy),
            "--cert",
            str(archive.cert),
            "--coffre",
            "0099/7",
            "--since-size",
            "7",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == json.loads(saved.read_bytes())
    assert check_consistency(ConsistencyProof.from_dict(json.loads(saved.read_text()))) == []


def test_a_consistency_proof_comes_from_verified_lots_only(archive, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(archive.root, copy)
    target = next(copy.glob("0099/7/[0-9]*/*/*/0099-7-0000000003.xml"))
    target.chmod(0o644)
    target.write_bytes(target.read_bytes().replace(b"<IDJoueur>a-7-8<", b"<IDJoueur>a-7-X<"))
    index = ArchiveIndex(LocalStorage(copy), archive.trust, archive.signer)
    try:
        with pytest.raises(ArchiveInvalid):
            index.consistency_proof("0099", 7, 1)
        with pytest.raises(InvalidRequest):
            index.consistency_proof("0099", 7, 5, 4)
        with pytest.raises(NotFound):
            index.consistency_proof("0099", 5, 1)
        assert index.consistency_proof("0042", 3, 2, 19)["new_size"] == 19
    finally:
        index.close()


# -- the daily export --------------------------------------------------------------------------------


def test_export_bundles_carry_the_evidence_and_rebuild_the_whole_archive(api, dev, archive, tmp_path):
    days = sorted(
        {
            datetime.strptime("/".join(p.parent.parts[-3:]), "%Y/%m/%d").date()
            for p in archive.root.glob("*/*/[0-9]*/*/*/*.xml")
        }
    )
    assert len(days) >= 2
    everything = tmp_path / "all"
    listed: list[str] = []
    for day in days:
        reply = get(api, dev, f"/v1/exports/{day}")
        assert reply.status == 200, reply.body
        files = check_bundle(reply.body, tmp_path / str(day), archive.trust)
        listed += files
        manifest = etree.fromstring((tmp_path / str(day) / "manifest.xml").read_bytes())
        assert int(manifest.findtext("NombreFichiers")) == len(files)
        # Each lot, then its checkpoint, then that checkpoint's evidence.
        for at, path in enumerate(files):
            if path.endswith((".tsr", ".cosig")):
                folder, name = path.rsplit("/", 1)
                assert f"{folder}/{name.split('.', 1)[0]}.xml" in files[:at]
        extract(reply.body, everything)
    expected = sorted(
        "archive/" + p.relative_to(archive.root).as_posix()
        for p in archive.root.rglob("*")
        if p.is_file() and p.suffix in (".xml", ".tsr", ".cosig")
    )
    assert sorted(listed) == expected
    assert any(p.endswith(".cosig") for p in listed) and any(p.endswith(".tsr") for p in listed)
    report = verify_archive(everything / "archive", [archive.cert])
    assert report.ok, report.lines()
    assert len(report.coffres) == len(COFFRES)


def test_a_bundle_lists_its_evidence_in_order_after_its_checkpoint(archive, tmp_path):
    day = next(
        datetime.strptime("/".join(p.parent.parts[-3:]), "%Y/%m/%d").date()
        for p in sorted(archive.root.glob("0099/7/[0-9]*/*/*/0099-7-0000000002.xml"))
    )
    index = ArchiveIndex(LocalStorage(archive.root), archive.trust, archive.signer)
    try:
        with (tmp_path / "bundle.tar").open("wb") as out:
            index.export_day(day, "0099", out)
    finally:
        index.close()
    files = check_bundle((tmp_path / "bundle.tar").read_bytes(), tmp_path / "x", archive.trust)
    at = files.index("archive/0099/7/checkpoints/0099-7-0000000002.xml")
    assert files[at - 1].endswith("/0099-7-0000000002.xml") and "/checkpoints/" not in files[at - 1]
    assert files[at + 1 : at + 4] == [
        "archive/" + timestamp_name("0099", 7, 2, "0-second.tsa"),
        "archive/" + timestamp_name("0099", 7, 2, TSA),
        "archive/" + cosignature_name("0099", 7, 2, WITNESS),
    ]
    assert not any("notes.txt" in f for f in files)


# -- a real token, end to end ----------------------------------------------------------------------------


def test_a_real_tsa_token_is_served_and_verifies_over_the_served_checkpoint(api, dev, archive, tmp_path):
    openssl_or_skip()
    ca = Pki(tmp_path)
    checkpoint = checkpoint_file(archive, "0042", 3, 2).read_bytes()
    with Tsa(tmp_path, ca.issue("coffre test TSA"), ca).serving() as tsa:
        request = build_request(checkpoint)
        trusted = load_trust_files([ca.cert_path])
        token = verify_response(fetch(tsa.url, request.der), checkpoint, request.nonce, trusted).token
    LocalStorage(archive.root).create(timestamp_name("0042", 3, 2, "openssl"), token)
    listed = get(api, dev, "/v1/coffres/0042/3/checkpoints?from_lot=2&page_size=1").json()["checkpoints"]
    assert [t["tsa"] for t in listed[0]["timestamps"]] == ["openssl"]
    served = get(api, dev, listed[0]["timestamps"][0]["url"])
    assert served.status == 200 and served.body == token
    served_checkpoint = get(api, dev, listed[0]["url"]).body
    assert hashlib.sha256(served_checkpoint).hexdigest() == listed[0]["sha256"]
    stamped = verify_token(served.body, served_checkpoint, trusted)
    assert abs(stamped.gen_time - datetime.now(UTC)) < timedelta(minutes=5)
    # ``openssl ts -verify`` reads the served bytes as a token too.
    (tmp_path / "served.tsr").write_bytes(served.body)
    (tmp_path / "checkpoint.xml").write_bytes(served_checkpoint)
    run = subprocess.run(
        [
            "openssl",
            "ts",
            "-verify",
            "-token_in",
            "-in",
            str(tmp_path / "served.tsr"),
            "-data",
            str(tmp_path / "checkpoint.xml"),
            "-CAfile",
            str(ca.cert_path),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0 and "Verification: OK" in run.stdout, run.stdout + run.stderr


def test_a_real_cosignature_is_served_and_checks_against_the_served_checkpoint(api, dev, archive):
    witness = WitnessKey.generate("regulator")
    stored = checkpoint_file(archive, "0042", 3, 3).read_bytes()
    body = note_body(read_checkpoint(parse_document(stored)))
    at = int(datetime.now(UTC).timestamp())
    LocalStorage(archive.root).create(
        cosignature_name("0042", 3, 3, "regulator"), body + b"\n" + witness.cosign(body, at)
    )
    listed = get(api, dev, "/v1/coffres/0042/3/checkpoints?from_lot=3&page_size=1").json()["checkpoints"]
    assert [c["witness"] for c in listed[0]["cosignatures"]] == ["regulator"]
    note = get(api, dev, listed[0]["cosignatures"][0]["url"])
    assert note.status == 200 and note.headers["Content-Type"] == "text/plain; charset=utf-8"
    served = read_checkpoint(parse_document(get(api, dev, listed[0]["url"]).body))
    cosignature = cosigned_by(note.body, note_body(served), witness.public.key)
    assert (cosignature.name, cosignature.time) == ("regulator", at)
    other = read_checkpoint(parse_document(checkpoint_file(archive, "0042", 3, 2).read_bytes()))
    with pytest.raises(CosignatureInvalid):
        cosigned_by(note.body, note_body(other), witness.public.key)
