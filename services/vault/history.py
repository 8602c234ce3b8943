"""Everything a vault recorded for a coffre, in IDEvt order: the events of its sealed lots, then
the records of its journal past the archive's newest lot (the unsealed window). The journal
alone no longer holds a coffre's history (its sealed segments are released): tests, benches and
an operator's checks read it from here."""

from __future__ import annotations

from pathlib import Path

from coffre.adapters.journal import Journal, JournalRecord
from coffre.adapters.storage import ArchiveStorage
from coffre.domain.lot import numbered_lots, parse_document, read_lot


def recorded_events(
    storage: ArchiveStorage, journal_root: Path | None, id_oper: str, id_coffre: int
) -> list[JournalRecord]:
    """The coffre's records: (IDEvt, chain hash, canonical bytes) of each sealed event, then of
    each journal record past them (``journal_root`` None: the archive's only). Not checked here:
    ``coffre verify`` checks the archive, and opening the journal checks its chain."""
    lots = numbered_lots(storage.list(f"{id_oper}/{id_coffre}/"))
    records = [
        JournalRecord(event.id_evt, event.chain_hash, event.canonical)
        for _, key in lots
        for event in read_lot(parse_document(storage.read(key))).events
    ]
    directory = None if journal_root is None else Path(journal_root) / id_oper / str(id_coffre)
    if directory is not None and directory.is_dir():
        with Journal.open(directory) as journal:
            after = records[-1].id_evt if records else 0
            records += journal.records(max(after + 1, journal.first_id_evt))
    return records
