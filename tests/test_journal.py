"""The vault's journal, on real files: round trips, torn tails at every byte, corruption,
kill -9 in the middle of writes, group commit across coffres, and the documented format.

The file is read here with an independent decoder written from docs/journal-format.md."""

from __future__ import annotations

import hashlib
import inspect
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

from coffre.adapters import journal as journal_module
from coffre.adapters.journal import (
    Journal,
    JournalCorrupted,
    JournalFailed,
    JournalLocked,
    JournalRecord,
    JournalSet,
)
from coffre.domain.chain import GENESIS, chain_hash, verify_chain

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "journal-format.md"


# -- an independent reader and writer of the documented format ---------------------------------


def encode(id_evt: int, previous: bytes, payload: bytes, *, digest: bytes | None = None) -> bytes:
    """A record as docs/journal-format.md lays it out (``digest`` overrides the chain hash)."""
    digest = hashlib.sha256(previous + payload).digest() if digest is None else digest
    head = b"CFJR" + bytes([1, 0, 0, 0]) + struct.pack(">IQ", len(payload), id_evt) + digest
    head += struct.pack(">I", zlib.crc32(head))
    body = head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def decode(data: bytes) -> list[tuple[int, bytes, bytes, int]]:
    """(IDEvt, chain hash, payload, offset) of every record of a clean file; asserts the format."""
    out = []
    position = 0
    while position < len(data):
        assert data[position : position + 8] == b"CFJR\x01\x00\x00\x00"
        length, id_evt = struct.unpack(">IQ", data[position + 8 : position + 20])
        digest = data[position + 20 : position + 52]
        assert struct.unpack(">I", data[position + 52 : position + 56])[0] == zlib.crc32(
            data[position : position + 52]
        )
        end = position + 56 + length
        assert struct.unpack(">I", data[end : end + 4])[0] == zlib.crc32(data[position:end])
        out.append((id_evt, digest, data[position + 56 : end], position))
        position = end + 4
    return out


def payload(n: int) -> bytes:
    """The deterministic event bytes of IDEvt n (1 to 1,500 bytes), shared with the child process."""
    seed = hashlib.sha256(n.to_bytes(8, "big")).digest()
    size = 1 + int.from_bytes(seed[:2], "big") % 1500
    return (seed * (size // 32 + 1))[:size]


def small(n: int) -> bytes:
    return f'<POINSCRIT IDEvt="{n}" pad="{"x" * (n % 7)}"/>'.encode()


def build(directory: Path, count: int, event=small) -> list[bytes]:
    """A synced, closed journal of IDEvt 1..count; returns the chain hashes."""
    hashes = []
    with Journal.open(directory) as journal:
        for n in range(1, count + 1):
            hashes.append(journal.append(n, event(n)))
        journal.sync()
    return hashes


def log(directory: Path) -> Path:
    return directory / "journal.log"


def offsets(directory: Path) -> list[int]:
    return [offset for *_, offset in decode(log(directory).read_bytes())]


def assert_intact(journal: Journal, event=small) -> None:
    """IDEvt 1..last, gapless, each with its exact bytes, and the chain recomputes from GENESIS."""
    records = list(journal.records())
    assert [r.id_evt for r in records] == list(range(1, journal.last_id_evt + 1))
    assert all(r.event == event(r.id_evt) for r in records)
    assert verify_chain((r.event, r.chain_hash) for r in records) is None
    assert journal.last_hash == (records[-1].chain_hash if records else GENESIS)


# -- 1. round trip ------------------------------------------------------------------------------


def test_appended_records_come_back_after_a_reopen(tmp_path):
    directory = tmp_path / "0001" / "7"
    with Journal.open(directory) as journal:
        assert (journal.last_id_evt, journal.last_hash, journal.repaired_bytes) == (0, GENESIS, 0)
        hashes = [journal.append(n, small(n)) for n in range(1, 51)]
        journal.sync()
        assert journal.synced_id_evt == 50
        last_hash = journal.last_hash
    assert log(directory).is_file()

    with Journal.open(directory) as journal:
        assert (journal.last_id_evt, journal.last_hash, journal.repaired_bytes) == (50, last_hash, 0)
        records = list(journal.records())
        assert records == [JournalRecord(n, hashes[n - 1], small(n)) for n in range(1, 51)]
        previous = GENESIS
        for record in records:
            previous = chain_hash(previous, record.event)
            assert record.chain_hash == previous
        assert journal.get(1) == records[0] and journal.get(50) == records[-1]
        assert journal.get(0) is None and journal.get(51) is None
        assert [r.id_evt for r in journal.records(48)] == [48, 49, 50]
        assert list(journal.records(51)) == []
        assert journal.append(51, b"") == chain_hash(last_hash, b"")
    assert [(i, h, p) for i, h, p, _ in decode(log(directory).read_bytes())] == [
        *((n, hashes[n - 1], small(n)) for n in range(1, 51)),
        (51, chain_hash(last_hash, b""), b""),
    ]


def test_unsynced_records_are_readable_and_close_syncs_them(tmp_path):
    journal = Journal.open(tmp_path)
    journal.append(1, b"<a/>")
    journal.sync()
    journal.append(2, b"<b/>")
    journal.append(3, bytearray(b"<c/>"))
    assert journal.synced_id_evt == 1 and journal.last_id_evt == 3
    assert journal.get(3).event == b"<c/>"  # still in the append buffer
    assert [r.event for r in journal.records(2)] == [b"<b/>", b"<c/>"]
    journal.close()
    journal.close()
    with pytest.raises(ValueError):
        journal.append(4, b"<d/>")
    assert [p for _, _, p, _ in decode(log(tmp_path).read_bytes())] == [b"<a/>", b"<b/>", b"<c/>"]


def test_small_read_chunks_and_records_larger_than_a_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "READ_CHUNK", 100)
    monkeypatch.setattr(journal_module, "FLUSH_THRESHOLD", 300)
    big = {5: b"B" * 1000, 9: b"C" * 250}

    def event(n: int) -> bytes:
        return big.get(n, small(n))

    build(tmp_path, 12, event)
    with Journal.open(tmp_path) as journal:
        assert journal.last_id_evt == 12
        assert_intact(journal, event)
        assert journal.get(5).event == big[5]
        for n in range(13, 30):
            journal.append(n, event(n))  # some handed to the OS early, some still buffered
        assert [r.id_evt for r in journal.records(7)] == list(range(7, 30))
        assert_intact(journal, event)


# -- 2. IDEvt must follow -------------------------------------------------------------------------


def test_a_non_consecutive_idevt_is_refused_and_writes_nothing(tmp_path):
    with Journal.open(tmp_path) as journal:
        for wrong in (0, 2, -1, True):
            with pytest.raises(ValueError):
                journal.append(wrong, b"<x/>")
        journal.append(1, b"<a/>")
        journal.sync()
        size, last_hash = log(tmp_path).stat().st_size, journal.last_hash
        for wrong in (1, 3, 100, 0):
            with pytest.raises(ValueError):
                journal.append(wrong, b"<x/>")
        journal.sync()
        assert (journal.last_id_evt, journal.last_hash) == (1, last_hash)
        assert log(tmp_path).stat().st_size == size
        with pytest.raises(TypeError):
            journal.append(2, "<text/>")  # type: ignore[arg-type]
        assert journal.append(2, b"<b/>") == chain_hash(last_hash, b"<b/>")


# -- 3. torn tails --------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 3])
def test_a_torn_tail_at_every_byte_of_the_last_record_is_repaired(tmp_path, count):
    hashes = build(tmp_path / "whole", count)
    whole = log(tmp_path / "whole").read_bytes()
    last_start = offsets(tmp_path / "whole")[-1]
    previous_hash = hashes[-2] if count > 1 else GENESIS
    for cut in range(last_start, len(whole)):
        directory = tmp_path / f"cut{cut}"
        directory.mkdir()
        log(directory).write_bytes(whole[:cut])
        with Journal.open(directory) as journal:
            assert journal.last_id_evt == count - 1, cut
            assert journal.last_hash == previous_hash
            assert journal.repaired_bytes == cut - last_start
            assert log(directory).stat().st_size == last_start
            assert journal.append(count, b"<again/>") == chain_hash(previous_hash, b"<again/>")
            journal.append(count + 1, small(count + 1))
        with Journal.open(directory) as journal:
            assert journal.repaired_bytes == 0
            assert journal.last_id_evt == count + 1
            records = list(journal.records())
            assert records[-2].event == b"<again/>"
            assert verify_chain((r.event, r.chain_hash) for r in records) is None
        shutil.rmtree(directory)


def test_a_zero_filled_or_garbage_tail_is_torn(tmp_path):
    build(tmp_path, 4)
    size = log(tmp_path).stat().st_size
    with log(tmp_path).open("ab") as file:
        file.write(bytes(5000))
    with Journal.open(tmp_path) as journal:
        assert (journal.last_id_evt, journal.repaired_bytes) == (4, 5000)
        journal.append(5, small(5))
    with log(tmp_path).open("ab") as file:
        file.write(b"CFJR" + os.urandom(100))
    with Journal.open(tmp_path) as journal:
        assert (journal.last_id_evt, journal.repaired_bytes) == (5, 104)
        assert_intact(journal)
    assert log(tmp_path).stat().st_size > size


# -- 4. corruption ----------------------------------------------------------------------------------


def flipped(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x5A]) + data[position + 1 :]


def test_a_flipped_byte_anywhere_in_the_last_record_is_a_torn_tail(tmp_path):
    hashes = build(tmp_path / "whole", 3)
    whole = log(tmp_path / "whole").read_bytes()
    last_start = offsets(tmp_path / "whole")[-1]
    for position in range(last_start, len(whole)):
        directory = tmp_path / str(position)
        directory.mkdir()
        log(directory).write_bytes(flipped(whole, position))
        with Journal.open(directory) as journal:
            assert (journal.last_id_evt, journal.last_hash) == (2, hashes[1]), position
            assert journal.repaired_bytes == len(whole) - last_start
        shutil.rmtree(directory)


def test_a_flipped_byte_anywhere_in_a_middle_record_is_corruption(tmp_path):
    build(tmp_path / "whole", 3)
    whole = log(tmp_path / "whole").read_bytes()
    _, middle, last = offsets(tmp_path / "whole")
    for position in range(middle, last):
        directory = tmp_path / str(position)
        directory.mkdir()
        log(directory).write_bytes(flipped(whole, position))
        with pytest.raises(JournalCorrupted) as caught:
            Journal.open(directory)
        assert caught.value.offset == middle
        assert log(directory).read_bytes() == flipped(whole, position)  # never truncated
        shutil.rmtree(directory)


def test_a_bad_record_followed_by_garbage_then_a_valid_record_is_corruption(tmp_path):
    build(tmp_path, 2)
    data = log(tmp_path).read_bytes()
    data = flipped(data, len(data) - 10) + b"garbage" + encode(3, GENESIS, b"<z/>")
    log(tmp_path).write_bytes(data)
    with pytest.raises(JournalCorrupted):
        Journal.open(tmp_path)
    assert log(tmp_path).read_bytes() == data


def write_records(directory: Path, records: list[bytes]) -> bytes:
    directory.mkdir(parents=True, exist_ok=True)
    data = b"".join(records)
    log(directory).write_bytes(data)
    return data


def chained(count: int) -> tuple[list[bytes], list[bytes]]:
    """Records 1..count encoded independently, and their chain hashes."""
    records, hashes, previous = [], [], GENESIS
    for n in range(1, count + 1):
        records.append(encode(n, previous, small(n)))
        previous = hashlib.sha256(previous + small(n)).digest()
        hashes.append(previous)
    return records, hashes


def test_the_independent_encoder_writes_what_the_journal_reads(tmp_path):
    records, hashes = chained(5)
    write_records(tmp_path, records)
    with Journal.open(tmp_path) as journal:
        assert (journal.last_id_evt, journal.last_hash, journal.repaired_bytes) == (5, hashes[-1], 0)
        assert_intact(journal)


@pytest.mark.parametrize("where", [1, 3])  # a middle record, the last record
def test_a_record_with_valid_crcs_and_a_wrong_chain_hash_is_corruption(tmp_path, where):
    records, hashes = chained(4)
    previous = hashes[where - 1]
    records[where] = encode(where + 1, previous, small(where + 1), digest=hashlib.sha256(b"forged").digest())
    data = write_records(tmp_path, records)
    with pytest.raises(JournalCorrupted, match="chain hash"):
        Journal.open(tmp_path)
    assert log(tmp_path).read_bytes() == data


@pytest.mark.parametrize("where", [1, 3])
def test_a_record_with_valid_crcs_and_a_modified_payload_is_corruption(tmp_path, where):
    records, hashes = chained(4)
    records[where] = encode(where + 1, hashes[where - 1], b"<other/>", digest=hashes[where])
    write_records(tmp_path, records)
    with pytest.raises(JournalCorrupted, match="chain hash"):
        Journal.open(tmp_path)


@pytest.mark.parametrize(
    "order",
    [
        [0, 2, 1, 3],  # a swapped pair in the middle
        [0, 1, 3, 2],  # the last two swapped
        [1, 0, 2, 3],  # the first two swapped
        [0, 2, 3],  # a record missing
        [0, 1, 1, 2, 3],  # a record duplicated
        [1, 2, 3],  # starts at IDEvt 2
    ],
)
def test_records_out_of_order_missing_or_duplicated_are_corruption(tmp_path, order):
    records, _ = chained(4)
    data = write_records(tmp_path, [records[i] for i in order])
    with pytest.raises(JournalCorrupted, match="IDEvt"):
        Journal.open(tmp_path)
    assert log(tmp_path).read_bytes() == data


def test_the_file_changed_after_open_is_reported_on_read(tmp_path):
    build(tmp_path, 3)
    with Journal.open(tmp_path) as journal:
        data = log(tmp_path).read_bytes()
        middle = offsets(tmp_path)[1]
        with log(tmp_path).open("r+b") as file:
            file.seek(middle + 60)
            file.write(bytes([data[middle + 60] ^ 1]))
        assert journal.get(1).event == small(1)
        with pytest.raises(JournalCorrupted):
            journal.get(2)
        with pytest.raises(JournalCorrupted):
            list(journal.records())


# -- 5. kill -9 -----------------------------------------------------------------------------------

CHILD = f"""
import hashlib, random, sys
from pathlib import Path
from coffre.adapters.journal import Journal

{inspect.getsource(payload)}
journal = Journal.open(Path(sys.argv[1]))
rnd = random.Random(int(sys.argv[2]))
n = journal.last_id_evt
print("open", n, flush=True)
while True:
    for _ in range(rnd.randint(1, 40)):
        n += 1
        journal.append(n, payload(n))
    journal.sync()
    print(n, flush=True)
"""


def test_kill_9_in_the_middle_of_writes_loses_no_synced_event(tmp_path):
    directory = tmp_path / "0042" / "3"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    rnd = random.Random()
    synced = 0
    seen = 0
    for round_ in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(directory), str(rnd.randrange(1 << 30))],
            stdout=subprocess.PIPE,
            cwd=REPO,
            env=env,
            text=True,
        )
        try:
            opened = child.stdout.readline().split()
            assert opened == ["open", str(seen)], opened  # the child saw what this test saw
            time.sleep(rnd.uniform(0.0, 0.25))
        finally:
            child.send_signal(signal.SIGKILL)
            rest = child.stdout.read()
            child.wait()
            child.stdout.close()
        assert child.returncode == -signal.SIGKILL
        reported = [int(line) for line in rest.split()]
        assert reported == sorted(reported)
        synced = max([synced, *reported])

        with Journal.open(directory) as journal:
            assert journal.last_id_evt >= synced, round_
            assert_intact(journal, payload)
            seen = journal.last_id_evt
        ids = [i for i, *_ in decode(log(directory).read_bytes())]
        assert ids == list(range(1, seen + 1))
    assert synced > 0


# -- 6. group commit across coffres -----------------------------------------------------------------


def test_journal_set_syncs_only_the_coffres_appended_to(tmp_path, monkeypatch):
    root = tmp_path / "vault"
    coffres = [("0001", 0), ("0001", 1), ("0001", 17), ("2042", 1), ("2042", 5)]
    journals = JournalSet(root)
    assert journals.coffres() == []
    opened = {key: journals.journal(*key) for key in coffres}
    assert journals.journal("0001", 17) is opened[("0001", 17)]
    assert log(root / "2042" / "5").is_file()

    fsynced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd):
        fsynced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    inode = {key: log(root / key[0] / str(key[1])).stat().st_ino for key in coffres}

    journals.sync()
    assert fsynced == []
    for n in range(1, 4):
        opened[("0001", 17)].append(n, small(n))
    opened[("2042", 1)].append(1, small(1))
    journals.sync()
    assert sorted(fsynced) == sorted([inode[("0001", 17)], inode[("2042", 1)]])
    fsynced.clear()
    journals.sync()
    opened[("2042", 1)].sync()
    assert fsynced == []
    opened[("0001", 0)].append(1, small(1))
    opened[("0001", 0)].sync()  # synced directly: the set's next sync has nothing left to do
    journals.sync()
    assert fsynced == [inode[("0001", 0)]]
    monkeypatch.undo()

    with pytest.raises(ValueError):
        journals.journal("123", 1)
    with pytest.raises(ValueError):
        journals.journal("0001", -1)
    journals.close()
    with pytest.raises(ValueError):
        journals.journal("0001", 0)

    (root / "0003" / "9").mkdir(parents=True)  # no journal: not a coffre
    (root / "notes").mkdir()
    restarted = JournalSet(root)
    assert restarted.coffres() == sorted(coffres)
    assert restarted.journal("0001", 17).last_id_evt == 3
    assert restarted.journal("2042", 1).last_id_evt == 1
    assert restarted.journal("2042", 5).last_id_evt == 0
    restarted.journal("0777", 12)
    assert ("0777", 12) in restarted.coffres()
    restarted.close()


def test_appends_go_on_while_another_thread_syncs(tmp_path):
    journals = JournalSet(tmp_path)
    keys = [("0001", c) for c in range(4)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def syncer():
        try:
            while not stop.is_set():
                journals.sync()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=syncer)
    thread.start()
    try:
        for n in range(1, 2001):
            for key in keys:
                journals.journal(*key).append(n, small(n))
    finally:
        stop.set()
        thread.join()
    assert errors == []
    journals.sync()
    assert all(journals.journal(*key).synced_id_evt == 2000 for key in keys)
    journals.close()
    for key in keys:
        with Journal.open(tmp_path / key[0] / str(key[1])) as journal:
            assert journal.last_id_evt == 2000
            assert_intact(journal)


# -- locking and failures -----------------------------------------------------------------------------


def test_a_journal_cannot_be_opened_twice(tmp_path):
    with Journal.open(tmp_path), pytest.raises(JournalLocked):
        Journal.open(tmp_path)
    Journal.open(tmp_path).close()


def test_after_a_failed_fsync_the_journal_refuses_until_reopened(tmp_path, monkeypatch):
    journal = Journal.open(tmp_path)
    journal.append(1, b"<a/>")

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(JournalFailed):
        journal.sync()
    monkeypatch.undo()
    with pytest.raises(JournalFailed):
        journal.sync()
    with pytest.raises(JournalFailed):
        journal.append(2, b"<b/>")
    journal.close()
    with Journal.open(tmp_path) as journal:
        assert journal.last_id_evt == 1  # the write itself had reached the page cache


# -- 7. verify_chain ---------------------------------------------------------------------------------


def test_verify_chain_finds_the_first_bad_link():
    events = [small(n) for n in range(1, 11)]
    hashes, previous = [], GENESIS
    for event in events:
        previous = chain_hash(previous, event)
        hashes.append(previous)
    assert hashes[0] == hashlib.sha256(bytes(32) + events[0]).digest()
    assert verify_chain(zip(events, hashes, strict=True)) is None
    assert verify_chain([]) is None
    assert verify_chain(zip(events[5:], hashes[5:], strict=True), previous=hashes[4]) is None
    assert verify_chain(zip(events[5:], hashes[5:], strict=True)) == 0
    for bad in range(10):
        wrong_hash = [*hashes[:bad], bytes(32), *hashes[bad + 1 :]]
        assert verify_chain(zip(events, wrong_hash, strict=True)) == bad
        wrong_event = [*events[:bad], b"<tampered/>", *events[bad + 1 :]]
        assert verify_chain(zip(wrong_event, hashes, strict=True)) == bad
    assert verify_chain([(events[0], hashes[0]), (events[2], hashes[2]), (events[1], hashes[1])]) == 1
    assert len(GENESIS) == 32 and bytes(32) == GENESIS
    with pytest.raises(ValueError):
        chain_hash(b"short", b"x")


# -- the document -------------------------------------------------------------------------------------


def test_the_documented_example_is_what_the_journal_writes(tmp_path):
    (dump,) = re.findall(r"```hexdump\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    documented = bytes.fromhex("".join(line.split(None, 1)[1] for line in dump.strip().splitlines()))
    with Journal.open(tmp_path) as journal:
        journal.append(1, b"<e/>")
    assert log(tmp_path).read_bytes() == documented == encode(1, GENESIS, b"<e/>")
