"""The attacks of issue 21, each caught by ``coffre verify`` with **no checkpoint kept by hand**:
only the TSA's root (``--tsa-cert``), the witness's public key (``--witness-key``) and what the
witness says it cosigned last (``--witness URL``).

The archive is sealed by the vault's own sealer; beside each checkpoint, a token from a real
TSA (Debian's ``openssl ts -reply`` behind a loopback HTTP handler, tests/tsa.py) and a
cosignature made here with :meth:`WitnessKey.cosign`, as the witness would. The witness's
``GET /checkpoints`` list is served by a small loopback HTTP server built from the notes
cosigned here (the newest per coffre, as the witness keeps them): the real witness process,
its TLS and its refusals are tested with it (tests/witness/); what is tested here is the
verifier's side of that protocol, spoken by :class:`WitnessClient` exactly as against the witness.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from coffre_vault.sealer import Sealer

from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.adapters.witness_client import WitnessClient
from coffre.commands.verify import verify_archive
from coffre.domain.codec import canonical_bytes
from coffre.domain.evidence import cosignature_key, timestamp_key
from coffre.domain.lot import parse_document, read_checkpoint
from coffre.domain.normalize import normalize
from coffre.domain.signing import Signer, generate_key_and_certificate
from coffre.domain.timestamp import build_request, load_trust, verify_response
from coffre.domain.witness import WitnessKey, fingerprint, note_body, origin

from events import POINSCRIT
from tsa import Pki, Tsa, fetch

COFFRES = (7, 8)
EVENTS = 10  # lots of 3: lots 1..4, checkpoints 1..4, per coffre
NOW = datetime.now(UTC)


def event(coffre: int, id_evt: int, player: str = "") -> bytes:
    raw = POINSCRIT.replace(b"<IDCoffre>7<", f"<IDCoffre>{coffre}<".encode()).replace(
        b"<IDJoueur>p-1<", f"<IDJoueur>{player or f'a-{coffre}-{id_evt}'}<".encode()
    )
    return canonical_bytes(normalize(raw, id_evt=id_evt))


class Clock:
    """The sealer's clock: from ``start``, a second per reading."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def seal(
    root: Path, signer: Signer, events: dict[int, list[bytes]], start: datetime = NOW - timedelta(hours=1)
) -> Path:
    """``events`` of each coffre through the journal and the vault's sealer, in lots of 3."""
    root.mkdir(parents=True)
    with JournalSet(root.parent / f"{root.name}-journal") as journals:
        sealer = Sealer(LocalStorage(root), signer, journals, max_events=3, max_age=3600, clock=Clock(start))
        for coffre, raws in events.items():
            journal = journals.journal("0099", coffre)
            for n, raw in enumerate(raws, start=1):
                journal.append(n, raw)
            journal.sync()
            sealer.recorded("0099", coffre)
        sealer.seal_due()
        sealer.seal_all()
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def genuine_events() -> dict[int, list[bytes]]:
    return {coffre: [event(coffre, n) for n in range(1, EVENTS + 1)] for coffre in COFFRES}


def checkpoint_files(root: Path, coffre: int = 7) -> list[Path]:
    return sorted((root / "0099" / str(coffre) / "checkpoints").glob("*.xml"))


@dataclass
class Setting:
    """The operator's key, a real TSA, the witness's key."""

    signer: Signer
    cert: Path
    tsa_url: str
    tsa_root: Path
    witness: WitnessKey
    witness_pub: Path

    def stamp(self, root: Path, *, cosign: bool = True) -> dict[tuple[str, int], bytes]:
        """A token (from the TSA, now) beside every checkpoint, and unless told not to a
        cosignature (at now); the newest cosigned note of each coffre, as the witness keeps it."""
        roots = load_trust(self.tsa_root.read_bytes())
        newest: dict[tuple[str, int], tuple[int, bytes]] = {}
        for path in sorted(root.rglob("checkpoints/*.xml")):
            document = path.read_bytes()
            checkpoint = read_checkpoint(parse_document(document))
            oper, coffre, number = checkpoint.id_oper, checkpoint.id_coffre, checkpoint.lot_number
            request = build_request(document)
            stamp = verify_response(fetch(self.tsa_url, request.der), document, request.nonce, roots)
            (root / timestamp_key(oper, coffre, number, "test-tsa")).write_bytes(stamp.token)
            if cosign:
                body = note_body(checkpoint)
                note = body + b"\n" + self.witness.cosign(body, int(NOW.timestamp()))
                (root / cosignature_key(oper, coffre, number, "test-witness")).write_bytes(note)
                if checkpoint.tree_size > newest.get((oper, coffre), (0, b""))[0]:
                    newest[(oper, coffre)] = (checkpoint.tree_size, note)
        return {key: note for key, (_, note) in newest.items()}


@pytest.fixture(scope="module")
def setting(tmp_path_factory) -> Iterator[Setting]:
    folder = tmp_path_factory.mktemp("setting")
    key, cert = generate_key_and_certificate("operator", "ecdsa", not_before=NOW - timedelta(days=30))
    (folder / "operator.pem").write_bytes(cert)
    pki = Pki(folder)
    witness = WitnessKey.generate("witness.test")
    (folder / "witness.pem").write_bytes(witness.public.pem())
    with Tsa(folder, pki.issue("test TSA"), pki).serving() as tsa:
        yield Setting(
            Signer.from_pem(key, cert),
            folder / "operator.pem",
            tsa.url,
            pki.cert_path,
            witness,
            folder / "witness.pem",
        )


@dataclass
class Sealed:
    root: Path
    witnessed: dict[tuple[str, int], bytes]
    """The newest note the witness cosigned per coffre (what it serves)."""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, setting) -> Sealed:
    root = seal(tmp_path_factory.mktemp("pristine") / "archive", setting.signer, genuine_events())
    return Sealed(root, setting.stamp(root))


@pytest.fixture
def archive(pristine, tmp_path) -> Path:
    return Path(shutil.copytree(pristine.root, tmp_path / "archive"))


@contextmanager
def witness_serving(setting: Setting, notes: dict[tuple[str, int], bytes]) -> Iterator[str]:
    """``GET /checkpoints`` as the witness answers it (docs: the witness's HTTPS API), on 127.0.0.1."""
    entries = []
    for (oper, coffre), note in sorted(notes.items()):
        lines = note.split(b"\n")
        entries.append(
            {
                "origin": origin(oper, coffre),
                "id_oper": oper,
                "id_coffre": coffre,
                "tree_size": int(lines[1]),
                "root": base64.b64decode(lines[2]).hex(),
                "note": note.decode(),
            }
        )
    body = json.dumps(
        {"witness": setting.witness.name, "vkey": setting.witness.public.vkey, "coffres": entries}
    )

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/checkpoints":
                self.send_error(404)
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def check(
    root: Path, setting: Setting, *, tsa: bool = True, keys: bool = True, url: str | None = None
) -> list[str]:
    options = {
        "tsa_certs": [setting.tsa_root] if tsa else [],
        "witness_keys": [setting.witness_pub] if keys else [],
        "witness": WitnessClient(url).checkpoints() if url else None,
        "witness_name": url or "--witness",
    }
    lines = verify_archive(root, [setting.cert], **options).lines()
    # --jobs: the checkpoints, their evidence and the lots read in workers, the same report
    assert verify_archive(root, [setting.cert], jobs=2, **options).lines() == lines
    return lines


def failures(lines: list[str]) -> list[str]:
    return [line for line in lines if not line.startswith("coffre ")]


def remove_with_evidence(path: Path) -> None:
    for each in path.parent.glob(path.stem + ".*"):
        each.unlink()


# -- the genuine archive ------------------------------------------------------------------------------


def test_the_genuine_archive_verifies_with_every_check(pristine, setting):
    with witness_serving(setting, pristine.witnessed) as url:
        lines = check(pristine.root, setting, url=url)
    assert lines == [
        f"coffre 0099/{coffre}: 4 lot(s), 10 event(s), 4 checkpoint(s), 4 token(s), 4 cosignature(s): OK"
        for coffre in COFFRES
    ]


# -- (a) the newest lots removed ----------------------------------------------------------------------


def test_the_newest_lots_removed_are_caught_by_the_witness(archive, pristine, setting):
    """The newest lot and its checkpoint go, with their evidence: what is left is a genuine
    archive, timestamped and cosigned (its newest checkpoint was cosigned when it was the newest).
    Only the witness, which cosigned 10 events, says that events are gone."""
    lot = sorted((archive / "0099" / "7").rglob("0099-7-0000000004.xml"))
    for path in lot:
        remove_with_evidence(path)
    assert failures(check(archive, setting)) == []
    with witness_serving(setting, pristine.witnessed) as url:
        run = subprocess.run(
            [
                *(sys.executable, "-m", "coffre.cli", "verify", str(archive), "--cert", str(setting.cert)),
                "--tsa-cert",
                str(setting.tsa_root),
                "--witness-key",
                str(setting.witness_pub),
                "--witness",
                url,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    assert run.returncode == 1, run.stderr
    assert run.stdout.splitlines() == [
        f"{url}: witness: truncation: the witness cosigned 10 events of coffre 0099/7, the archive holds 9: "
        "events were removed (pull again if the vault sealed since)",
        "coffre 0099/7: 3 lot(s), 9 event(s), 3 checkpoint(s), 3 token(s), 3 cosignature(s): 1 failure(s)",
        "coffre 0099/8: 4 lot(s), 10 event(s), 4 checkpoint(s), 4 token(s), 4 cosignature(s): OK",
    ]


# -- (b) a coffre removed -----------------------------------------------------------------------------


def test_a_coffre_removed_is_caught_by_the_witness(archive, pristine, setting):
    shutil.rmtree(archive / "0099" / "8")
    assert failures(check(archive, setting)) == []
    with witness_serving(setting, pristine.witnessed) as url:
        lines = check(archive, setting, url=url)
    assert lines == [
        f"{url}: witness: the witness cosigned 10 events of coffre 0099/8; the archive has none: a coffre removed",
        "coffre 0099/7: 4 lot(s), 10 event(s), 4 checkpoint(s), 4 token(s), 4 cosignature(s): OK",
        "coffre 0099/8: 0 lot(s), 0 event(s), 0 checkpoint(s): 1 failure(s)",
    ]


# -- (c) the history rebuilt and re-signed with the operator's key ------------------------------------


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory, setting, pristine) -> Path:
    """Both coffres sealed again by the operator's own sealer and key, IDEvt 2 of coffre 7
    changed, with fresh tokens from the TSA (which dates anything it is shown). The witness's
    cosignatures cannot be made again: coffre 8's genuine ones still hold (a note is about the
    tree, which is the same), coffre 7's are left out (copied beside the new checkpoints below)."""
    events = genuine_events()
    events[7][1] = event(7, 2, player="someone-else")
    root = seal(tmp_path_factory.mktemp("rebuilt") / "archive", setting.signer, events)
    setting.stamp(root, cosign=False)
    for old in sorted(pristine.root.rglob("0099-8-*.cosig")):
        shutil.copy(old, root / old.relative_to(pristine.root))
    return root


def test_a_history_rebuilt_and_resigned_is_caught_by_the_witness_key(rebuilt, pristine, setting, tmp_path):
    root = Path(shutil.copytree(rebuilt, tmp_path / "archive"))
    assert failures(check(root, setting, keys=False)) == []  # signatures, chain, tokens: all hold
    newest = checkpoint_files(root)[-1]
    key = fingerprint(setting.witness.public.key)
    assert failures(check(root, setting)) == [
        f"{newest.relative_to(root).as_posix()}: cosignature: the newest checkpoint of coffre 0099/7 has no valid "
        f"cosignature by witness key {key}: no witness vouches that the archive ends here",
    ]
    for old in sorted(pristine.root.rglob("0099-7-*.cosig")):  # the genuine cosignatures, copied
        shutil.copy(old, root / old.relative_to(pristine.root))
    lines = failures(check(root, setting))
    moved = (
        "cosignature: the note is about another checkpoint (its origin, size or root differs from this one's): "
        "a cosignature moved from another checkpoint"
    )
    assert lines == [
        *(f"{p.relative_to(root).as_posix()}: {moved}" for p in sorted(root.rglob("0099-7-*.cosig"))),
        f"{newest.relative_to(root).as_posix()}: cosignature: the newest checkpoint of coffre 0099/7 has no valid "
        f"cosignature by witness key {key}: no witness vouches that the archive ends here",
    ]


def test_a_history_rebuilt_and_resigned_is_caught_by_the_witness(rebuilt, pristine, setting):
    with witness_serving(setting, pristine.witnessed) as url:
        lines = check(rebuilt, setting, keys=False, url=url)
    assert lines == [
        f"{url}: witness: rewriting: the archive's first 10 events of coffre 0099/7 are not those the witness "
        "cosigned: the history was rebuilt, or forked",
        "coffre 0099/7: 4 lot(s), 10 event(s), 4 checkpoint(s), 4 token(s): 1 failure(s)",
        "coffre 0099/8: 4 lot(s), 10 event(s), 4 checkpoint(s), 4 token(s), 4 cosignature(s) not checked: OK",
    ]


# -- (d) an archive rebuilt later, with fresh tokens ---------------------------------------------------


def test_an_archive_rebuilt_later_is_caught_by_its_tokens(tmp_path, setting):
    """Sealed with a clock 5 days back (the Dates a rebuilt archive must show), time-stamped
    today: a TSA dates what it is shown when it is shown."""
    now = datetime.now(UTC)  # not the module's NOW: the suite may have run for minutes since
    root = seal(tmp_path / "archive", setting.signer, {7: genuine_events()[7]}, start=now - timedelta(days=5))
    setting.stamp(root)
    assert failures(check(root, setting, tsa=False)) == []
    lines = failures(check(root, setting))
    assert len(lines) == 8
    for token, undated in zip(lines[::2], lines[1::2], strict=True):
        assert token.startswith("0099/7/checkpoints/0099-7-000000000")
        assert ".tsa-test-tsa.tsr: timestamp: too late: genTime " in token
        assert token.endswith("more than 86400 s: an archive rebuilt later gets tokens of that day")
        assert undated.endswith(
            ".xml: timestamp: none of its 1 time-stamp token(s) holds: nothing dates the checkpoint"
        )
    delay = int(lines[0].split(" is ", 1)[1].split(" s after", 1)[0])
    assert 5 * 86400 - 60 < delay < 5 * 86400 + 600
    # the bound is the verifier's to set
    loose = verify_archive(
        root, [setting.cert], tsa_certs=[setting.tsa_root], tsa_max_delay=timedelta(days=6)
    )
    assert loose.ok


# -- (e) a fork: two checkpoints of the same size ------------------------------------------------------


def test_a_fork_shown_to_the_regulator_is_caught_by_the_witness(rebuilt, pristine, setting):
    """The witness cosigned the genuine tree of 10 events; the archive shown holds another tree of
    10 events, signed by the operator (the same size, another root)."""
    genuine = read_checkpoint(parse_document(checkpoint_files(pristine.root)[-1].read_bytes()))
    forked = read_checkpoint(parse_document(checkpoint_files(rebuilt)[-1].read_bytes()))
    assert genuine.tree_size == forked.tree_size == 10 and genuine.tree_root != forked.tree_root
    with witness_serving(setting, pristine.witnessed) as url:
        lines = failures(check(rebuilt, setting, keys=False, url=url))
    assert lines == [
        f"{url}: witness: rewriting: the archive's first 10 events of coffre 0099/7 are not those the witness "
        "cosigned: the history was rebuilt, or forked",
    ]


# -- the witness's list is evidence only when its key signs it -----------------------------------------


def test_a_witness_entry_not_cosigned_by_the_given_key_is_no_evidence(archive, pristine, setting):
    other = WitnessKey.generate("witness.test")
    notes = dict(pristine.witnessed)
    body = notes[("0099", 7)].split(b"\n\n")[0] + b"\n"
    notes[("0099", 7)] = body + b"\n" + other.cosign(body, int(NOW.timestamp()))
    with witness_serving(setting, notes) as url:
        lines = failures(check(archive, setting, url=url))
    key = fingerprint(setting.witness.public.key)
    assert lines == [
        f"{url}: witness: the witness's checkpoint of coffre 0099/7 (size 10) is not cosigned by a given witness key "
        f"(no cosignature by the witness key {key}): it is no evidence",
    ]
