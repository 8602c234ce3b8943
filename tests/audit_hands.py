"""Inputs of the ``coffre audit`` and console tests, built from coffre's own demo events, and the
signed archives the vault's own sealer makes of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from coffre_vault.sealer import Sealer
from lxml import etree

import coffre.demo
from coffre.adapters.journal import JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.commands.inputs import inputs
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize
from coffre.domain.signing import Signer, generate_key_and_certificate

DEMO = Path(coffre.demo.__file__).parent / "events"
ANNEX_POJEU = DEMO / "annex" / "1.4.3.f-POJEU.xml"
TOURNAMENT = DEMO / "tournament"
T0 = datetime(2026, 3, 1, 20, 0, tzinfo=UTC)


def duplicated_card_hand(player_of_seat_7: str | None = None) -> bytes:
    """The annex's POJEU with seat 3's hole card 33 (V de Cœur) replaced, dealt and revealed, by
    card 32 (10 de Trèfle), which seat 2 already holds: CARD_DEALT_TWICE in 'preflop', seat 3.
    ``player_of_seat_7``, when given, replaces that player's IDJoueur (escaping tests)."""
    root = etree.fromstring(ANNEX_POJEU.read_bytes())
    changed = 0
    for action in root.iter("Draw", "Reveal"):
        if action.findtext("Siege") == "3" and action.findtext("Valeur") == "33":
            action.find("Valeur").text = "32"
            changed += 1
    assert changed == 2, "the annex's POJEU no longer deals card 33 to seat 3"
    if player_of_seat_7 is not None:
        for player in root.iter("Joueur"):
            if player.findtext("Siege") == "7":
                player.find("IDJoueur").text = player_of_seat_7
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(hours=5)
        return self.now


def seal_archive(
    tmp: Path, coffres: dict[int, list[bytes]] | dict[tuple[str, int], list[bytes]], *, lot_events: int = 4
) -> tuple[Path, Path]:
    """A signed archive under ``tmp/archive`` as the vault writes it: each coffre (of IDOper 0099,
    or an (IDOper, IDCoffre) key) holds its events (canonical bytes) as IDEvt 1..n, sealed by the
    vault's own sealer in lots of ``lot_events``, five hours of its clock apart. Returns (root, cert)."""
    key, cert = generate_key_and_certificate("audit test", "ecdsa", not_before=T0 - timedelta(days=1))
    cert_path = tmp / "cert.pem"
    cert_path.write_bytes(cert)
    root = tmp / "archive"
    root.mkdir()
    with JournalSet(tmp / "journal") as journals:
        sealer = Sealer(
            LocalStorage(root),
            Signer.from_pem(key, cert),
            journals,
            max_events=lot_events,
            max_age=3600,
            clock=Clock(),
        )
        for key, events in coffres.items():
            oper, coffre = key if isinstance(key, tuple) else ("0099", key)
            journal = journals.journal(oper, coffre)
            for n, canonical in enumerate(events, start=1):
                journal.append(n, canonical)
            journal.sync()
            sealer.recorded(oper, coffre)
        sealer.seal_all()
    return root, cert_path


def normalized(raws: list[bytes]) -> list[bytes]:
    """Events as ingest hands them to the vault: normalized, IDEvt 1..n, canonical bytes."""
    return [canonical_bytes(normalize(raw, id_evt=n)) for n, raw in enumerate(raws, start=1)]


def build_archive(tmp: Path) -> tuple[Path, Path]:
    """A signed archive as the vault writes it: coffre 0099/1 holds the flagged hand (IDEvt 1),
    coffre 0099/2 the demo tournament (IDEvt 1..21), in lots of 4 events. Returns (root, cert)."""
    tournament = [raw for _, raw in inputs([str(TOURNAMENT)])]
    return seal_archive(tmp, {1: normalized([duplicated_card_hand()]), 2: normalized(tournament)})


class RecordingStorage(LocalStorage):
    """The real local storage, remembering what it was asked for."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[tuple[str, str]] = []

    def read(self, key: str) -> bytes:
        self.calls.append(("read", key))
        return super().read(key)

    def list(self, prefix: str) -> list[str]:
        self.calls.append(("list", prefix))
        return super().list(prefix)
