"""The journal's segments, on real files: cut, release and rebase; what a reopen finds; torn and
damaged segment headers; segments that do not follow each other. The header is written here
from docs/journal-format.md, not with the module's own encoder."""

from __future__ import annotations

import hashlib
import os
import signal
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from coffre.adapters.journal import JOURNAL_NAME, Journal, JournalCorrupted
from coffre.domain.chain import GENESIS, chain_hash


def event(n: int) -> bytes:
    return f"<e n='{n}'/>".encode()


def fill(journal: Journal, ids: range) -> None:
    for n in ids:
        journal.append(n, event(n))


def names(directory: Path) -> list[str]:
    found = [p.name for p in directory.iterdir() if p.name.endswith(".log")]
    return sorted(found, key=lambda name: 1 if name == JOURNAL_NAME else int(name[8:28]))


def header(first: int, previous: bytes) -> bytes:
    """A segment header as docs/journal-format.md lays it out."""
    head = b"CFJS" + bytes([1, 0, 0, 0]) + struct.pack(">Q", first) + previous
    return head + struct.pack(">I", zlib.crc32(head))


def chain_to(n: int) -> bytes:
    previous = GENESIS
    for i in range(1, n + 1):
        previous = chain_hash(previous, event(i))
    return previous


def test_a_cut_starts_a_segment_at_the_next_sync_and_reads_cross_segments(tmp_path):
    with Journal.open(tmp_path) as journal:
        fill(journal, range(1, 4))
        journal.cut()
        journal.sync()  # the records appended before it stay in the first segment; the next go to a new one
        fill(journal, range(4, 7))
        journal.sync()
        journal.cut()
        fill(journal, range(7, 9))  # appended after the cut, before its sync: still in 4's segment
        journal.sync()
        assert names(tmp_path) == [JOURNAL_NAME, f"journal-{4:020d}.log", f"journal-{9:020d}.log"]
        assert [r.id_evt for r in journal.records()] == list(range(1, 9))
        assert journal.get(4).event == event(4) and journal.get(6).event == event(6)
    data = (tmp_path / f"journal-{4:020d}.log").read_bytes()
    assert data[:52] == header(4, chain_to(3)), "the header is not the documented one"
    with Journal.open(tmp_path) as journal:  # the last segment is empty
        assert (journal.first_id_evt, journal.last_id_evt, journal.segment_count) == (1, 8, 3)
        records = list(journal.records())
    assert [r.chain_hash for r in records] == [chain_to(n) for n in range(1, 9)]


def test_release_deletes_whole_segments_the_archive_holds_never_the_last(tmp_path):
    with Journal.open(tmp_path) as journal:
        for first in (1, 4, 7):
            fill(journal, range(first, first + 3))
            journal.cut()
            journal.sync()
        assert journal.release(5) == 1  # the segment 4..6 still holds 6
        assert names(tmp_path) == [f"journal-{n:020d}.log" for n in (4, 7, 10)]
        assert journal.get(3) is None and journal.get(4).id_evt == 4
        assert journal.chain_hash_at(3) == chain_to(3)  # the one before the first held
        with pytest.raises(ValueError, match="released"):
            list(journal.records(2))
        assert journal.release(9) == 2  # the empty segment from 10 is the last one: kept
        assert names(tmp_path) == [f"journal-{10:020d}.log"]
        fill(journal, range(10, 12))
        journal.sync()
    with Journal.open(tmp_path) as journal:
        assert (journal.first_id_evt, journal.last_id_evt) == (10, 11)
        assert journal.chain_hash_at(9) == chain_to(9)
        assert [r.chain_hash for r in journal.records(10)] == [chain_to(n) for n in range(10, 12)]


def test_a_rebased_journal_continues_the_given_chain_across_a_restart(tmp_path):
    base = chain_to(1000)
    with Journal.open(tmp_path) as journal:
        journal.rebase(1000, base)
        assert names(tmp_path) == [f"journal-{1001:020d}.log"]  # empty, it says where it continues
    with Journal.open(tmp_path) as journal:
        assert (journal.first_id_evt, journal.last_id_evt, journal.last_hash) == (1001, 1000, base)
        assert journal.append(1001, b"<x/>") == chain_hash(base, b"<x/>")
        with pytest.raises(ValueError, match="rebased at IDEvt 5"):
            journal.rebase(5, base)


def test_a_torn_header_of_the_last_segment_is_removed(tmp_path):
    with Journal.open(tmp_path) as journal:
        fill(journal, range(1, 4))
    (tmp_path / f"journal-{4:020d}.log").write_bytes(header(4, chain_to(3))[:30])
    with Journal.open(tmp_path) as journal:
        assert journal.last_id_evt == 3 and journal.repaired_bytes == 30
        fill(journal, range(4, 6))
    assert names(tmp_path) == [JOURNAL_NAME]


@pytest.mark.parametrize(
    "damage",
    ["a damaged header", "a header naming another IDEvt", "a gap between segments", "another chain"],
)
def test_segments_that_do_not_follow_each_other_are_corruption(tmp_path, damage):
    with Journal.open(tmp_path) as journal:
        for first in (1, 4, 7):
            fill(journal, range(first, first + 3))
            journal.cut()
            journal.sync()
    middle = tmp_path / f"journal-{4:020d}.log"
    data = bytearray(middle.read_bytes())
    if damage == "a damaged header":
        data[20] ^= 1
        middle.write_bytes(bytes(data))
    elif damage == "a header naming another IDEvt":
        middle.write_bytes(header(5, chain_to(4)) + bytes(data[52:]))
    elif damage == "a gap between segments":
        middle.unlink()
    else:
        middle.write_bytes(header(4, hashlib.sha256(b"other").digest()) + bytes(data[52:]))
    with pytest.raises(JournalCorrupted):
        Journal.open(tmp_path)


def test_a_torn_record_in_a_segment_followed_by_another_is_corruption(tmp_path):
    """A segment is complete and fsynced before the next one exists: a bad tail in any but the last
    one is damage, never a torn write, and is not repaired."""
    with Journal.open(tmp_path) as journal:
        fill(journal, range(1, 4))
        journal.cut()
        journal.sync()
        fill(journal, range(4, 6))
    first = tmp_path / JOURNAL_NAME
    first.write_bytes(first.read_bytes()[:-3])
    with pytest.raises(JournalCorrupted, match="followed by another segment"):
        Journal.open(tmp_path)


WRITER = """
import sys
from pathlib import Path
from coffre.adapters.journal import Journal
journal = Journal.open(Path(sys.argv[1]))
n = journal.last_id_evt
while True:
    for _ in range(7):
        n += 1
        journal.append(n, (f"<e n='{n}'/>" * 40).encode())
    journal.sync()
    print(n, flush=True)
    if n % 21 == 0:
        journal.cut()
"""


def test_kill_9_while_segments_roll_loses_no_synced_event(tmp_path):
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        synced = 0
        for line in child.stdout:
            synced = int(line)
            if synced > 300 + _ * 400:
                break
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        with Journal.open(tmp_path) as journal:
            assert journal.last_id_evt >= synced
            records = list(journal.records())
        previous = GENESIS
        for n, record in enumerate(records, start=1):
            previous = chain_hash(previous, record.event)
            assert (record.id_evt, record.chain_hash) == (n, previous)
    assert len(names(tmp_path)) > 10
