"""A history of years (issue 22): what a vault's sealed history costs at start, restore, verify and proof.

    .venv/bin/python bench/history.py [--events N[,N2...]] [--coffres C] [--json] [--keep]

For each size N (default 1,000,000; several sizes, comma-separated, are measured side by side),
a synthetic history of one vault is built, then measured, without Kafka:

1. **build**: N POINSCRIT events of about ``--event-bytes`` canonical bytes (600 by default: the
   ``Description`` is padded), ``IDJoueur`` ``bench-<n>`` (unique), spread over C coffres
   (``21 + n % C``, IDEvt ``n // C + 1``, set inside the event as ingest sets it), written with the
   project's own :class:`~coffre.adapters.journal.Journal` (``append`` then ``sync``, as the
   recorder does) and sealed from those journals by the vault's own
   :class:`~coffre_vault.sealer.Sealer` (lots of ``--lot-events``, ECDSA, a checkpoint each) into a
   ``LocalStorage`` archive, one process per coffre (``--jobs``). The seal clock is spread over
   ``--days`` (six years by default) so that the archive's lots sit in day folders as a real
   history's would. Then ``--tail`` more events per coffre are appended and left unsealed (the
   window a running vault holds). The events are made from one normalized template by changing
   IDCoffre, IDEvt and IDJoueur in its canonical bytes; the first events of each coffre are checked
   to be exactly what ``normalize`` + ``canonical_bytes`` give.
2. **vault start-up**, in a fresh process each: every coffre's ``JournalSet.journal`` (the open,
   scan and verification of the whole file) and ``Sealer.start()`` (where sealing stands, read from
   the archive and checked against the journal: it re-reads every sealed record to rebuild the
   tree), with the page cache warm, then cold (the journal and archive files evicted with
   ``posix_fadvise(DONTNEED)``, no root needed). Peak memory is the child's ``ru_maxrss`` (its
   baseline after the imports is given beside it).
3. **coffre restore** (``restore_journals``: every coffre verified, then its journal rebuilt) into
   an empty data folder, in a fresh process.
4. **coffre verify** (``coffre.commands.verify.verify_archive``) of the whole archive, in a fresh process:
   events/s.
5. **regulator API proofs** (``ArchiveIndex``): ``inclusion_proof`` and ``consistency_proof`` on
   one coffre, first call (a fresh index: the coffre's lots are read and verified) and warm (the
   median of ``--warm`` calls on the same index).

``--direct`` builds an archive only, fast enough for the issue's 100 million events: small events
(a shortened CLOTUREPOINTDEVENTE of 222 canonical bytes, the first of each coffre checked against
``normalize``), each lot built by coffre's own lot builder (``lot_header_from_events``,
``build_lot``) and signed by its ``Signer`` with its checkpoint, written where the sealer writes
them, one process per coffre (``--jobs``); no journal, so no start-up or restore phase. It then
measures ``coffre verify --jobs N`` (``--verify-jobs``, 2 by default: the CLI, wall and CPU time),
the proofs as above (``--warm`` calls) and the regulator API's export of the newest day
(``ArchiveIndex.export_day``, what ``GET /v1/exports/{day}`` streams). About 350 bytes of archive
per event: ``--events 100000000`` needs about 35 GB (``--base`` puts it on a disk that has them).

``--json`` prints one JSON object on stdout (the table and progress go to stderr). Exit status: 0
when everything was measured, 1 when a phase failed, 130 on Ctrl-C. About 4 minutes for 1,000,000
events on 2 cores, and 2 GB of disk (``--keep`` keeps the temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # tests/events.py: the POINSCRIT of the test suite

from _page_cache import evict as evict_files  # noqa: E402

from coffre.adapters.journal import JournalSet  # noqa: E402
from coffre.adapters.storage import LocalStorage  # noqa: E402
from coffre.domain.codec import canonical_bytes  # noqa: E402
from coffre.domain.normalize import normalize  # noqa: E402
from coffre.domain.signing import Signer, TrustStore, generate_key_and_certificate  # noqa: E402

from events import POINSCRIT  # noqa: E402

ID_OPER = "0099"
FIRST_COFFRE = 21
SYNC_EVERY = 1000
"""Events per group commit while building, as the vault batches."""
PLAYER = b"bench-%09d"
CHECKED = 50
"""The first events of each coffre checked against normalize + canonical_bytes."""


# -- the events ----------------------------------------------------------------------------------


def raw_event(n: int, coffres: int, pad: int) -> bytes:
    """POINSCRIT number ``n`` as a platform sends it (IDEvt left to :func:`normalize`)."""
    description = b"Tournoi du dimanche" + (b" " + b"x" * (pad - 1) if pad > 0 else b"")
    return (
        POINSCRIT.replace(
            b"<IDCoffre>7</IDCoffre>", b"<IDCoffre>%d</IDCoffre>" % (FIRST_COFFRE + n % coffres)
        )
        .replace(b"<IDJoueur>p-1</IDJoueur>", b"<IDJoueur>" + PLAYER % n + b"</IDJoueur>")
        .replace(
            b"<Description>Tournoi du dimanche</Description>",
            b"<Description>" + description + b"</Description>",
        )
    )


def reference(n: int, coffres: int, pad: int) -> bytes:
    """The canonical bytes of event ``n`` as the normalizer makes them (slow: the check)."""
    return canonical_bytes(normalize(raw_event(n, coffres, pad), id_evt=n // coffres + 1))


def template(coffres: int, event_bytes: int) -> tuple[bytes, int]:
    """A %-format of the canonical bytes (IDCoffre %d, IDEvt %d, player number %09d) and the
    Description padding that brings an event of a 1-digit IDEvt to about ``event_bytes``."""
    base = len(reference(0, coffres, 0))
    pad = max(0, event_bytes - base)
    canonical = reference(0, coffres, pad)
    marks = (
        (b"<IDCoffre>%d</IDCoffre>" % FIRST_COFFRE, b"<IDCoffre>%d</IDCoffre>"),
        (b"<IDEvt>1</IDEvt>", b"<IDEvt>%d</IDEvt>"),
        (b"<IDJoueur>" + PLAYER % 0 + b"</IDJoueur>", b"<IDJoueur>bench-%09d</IDJoueur>"),
    )
    form = canonical.replace(b"%", b"%%")
    for found, put in marks:
        if form.count(found) != 1:
            raise RuntimeError(f"the template does not hold {found!r} once")
        form = form.replace(found, put)
    positions = [form.index(put) for _, put in marks]
    if positions != sorted(positions):
        raise RuntimeError("the template's fields are not in the expected order")
    return form, pad


# -- building ------------------------------------------------------------------------------------


def history_clock(start: datetime, step: timedelta) -> Callable[[], datetime]:
    """The sealer's clock: each call half a lot later (a lot, then its checkpoint)."""
    calls = [0]

    def clock() -> datetime:
        calls[0] += 1
        return start + step * (calls[0] / 2)

    return clock


def build_coffre(
    work: str,
    form: bytes,
    coffres: int,
    index: int,
    count: int,
    tail: int,
    lot_events: int,
    pad: int,
    start: str,
    step_seconds: float,
) -> dict[str, Any]:
    """Journal and seal ``count`` events of coffre ``FIRST_COFFRE + index`` (a worker process), lot
    after lot as a vault does (the sealer cuts the journal after each lot and releases what the
    archive holds, in the versions that do), then append ``tail`` more, left unsealed."""
    from coffre_vault.sealer import Sealer

    root = Path(work)
    signer = Signer.from_pem((root / "key.pem").read_bytes(), (root / "cert.pem").read_bytes())
    id_coffre = FIRST_COFFRE + index
    timings: dict[str, Any] = {"coffre": id_coffre, "journal_seconds": 0.0, "seal_seconds": 0.0}
    clock = history_clock(datetime.fromisoformat(start), timedelta(seconds=step_seconds))
    with JournalSet(root / "journal") as journals:
        sealer = Sealer(
            LocalStorage(root / "archive"), signer, journals, max_events=lot_events, max_age=1e9, clock=clock
        )
        journal = journals.journal(ID_OPER, id_coffre)
        began = time.perf_counter()
        for id_evt in range(1, count + tail + 1):
            n = (id_evt - 1) * coffres + index
            canonical = form % (id_coffre, id_evt, n)
            if id_evt <= CHECKED and canonical != reference(n, coffres, pad):
                raise RuntimeError(f"event {n}: the template's bytes are not the normalizer's")
            journal.append(id_evt, canonical)
            if id_evt % SYNC_EVERY == 0:
                journal.sync()
            if id_evt <= count and (id_evt % lot_events == 0 or id_evt == count):
                journal.sync()
                timings["journal_seconds"] += time.perf_counter() - began
                began = time.perf_counter()
                sealer.recorded(ID_OPER, id_coffre)
                sealer.seal_all()
                timings["seal_seconds"] += time.perf_counter() - began
                began = time.perf_counter()
        if sealer.counts.events != count:
            raise RuntimeError(f"coffre {id_coffre}: sealed {sealer.counts.events} of {count}")
        timings["lots"] = sealer.counts.lots
        journal.sync()
        timings["tail_seconds"] = time.perf_counter() - began
    return timings


def prepare(work: Path, args: argparse.Namespace) -> tuple[int, datetime]:
    """``work`` and its empty archive folder made, and the signing key and certificate of a history
    of ``--days`` days written there; returns the days and when the history begins."""
    work.mkdir(parents=True)
    (work / "archive").mkdir()
    days = max(args.days, 1)
    began_at = datetime.now(UTC) - timedelta(days=days, hours=2)
    key, cert = generate_key_and_certificate(
        "bench-history", "ecdsa", days=days + 3650, not_before=began_at - timedelta(days=1)
    )
    (work / "key.pem").write_bytes(key)
    (work / "cert.pem").write_bytes(cert)
    return days, began_at


def build(work: Path, events: int, args: argparse.Namespace) -> dict[str, Any]:
    """The journals and the archive of ``events`` events under ``work``."""
    days, began_at = prepare(work, args)
    form, pad = template(args.coffres, args.event_bytes)
    per = [events // args.coffres + (1 if i < events % args.coffres else 0) for i in range(args.coffres)]
    lots_per_coffre = max(1, -(-max(per) // args.lot_events))
    step = timedelta(days=days) / lots_per_coffre
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(args.jobs, args.coffres)) as pool:
        futures = [
            pool.submit(
                build_coffre,
                str(work),
                form,
                args.coffres,
                i,
                per[i],
                args.tail,
                args.lot_events,
                pad,
                began_at.isoformat(),
                step.total_seconds(),
            )
            for i in range(args.coffres)
        ]
        coffres = [future.result() for future in futures]
    seconds = time.perf_counter() - began
    journal_bytes = sum(p.stat().st_size for p in (work / "journal").rglob("journal*.log"))
    archive_bytes = sum(p.stat().st_size for p in (work / "archive").rglob("*") if p.is_file())
    return {
        "seconds": seconds,
        "events_per_second": (events + args.tail * args.coffres) / seconds,
        "journal_seconds_max": max(c["journal_seconds"] for c in coffres),
        "seal_seconds_max": max(c["seal_seconds"] for c in coffres),
        "lots": sum(c["lots"] for c in coffres),
        "sealed_events": events,
        "tail_events": args.tail * args.coffres,
        "event_bytes": len(form % (FIRST_COFFRE, 1, 0)),
        "journal_bytes": journal_bytes,
        "archive_bytes": archive_bytes,
        "days": days,
    }


# -- building an archive directly (--direct): lots written by coffre's own lot builder and signer ---

SMALL_EVENT = (
    b"<CLOTUREPOINTDEVENTE><IDOper>0099</IDOper><DateEvt>261231160000</DateEvt><IDEvt>1</IDEvt>"
    b"<IDCoffre>21</IDCoffre><IDPointDeVente>P1</IDPointDeVente>"
    b"<DateClotureEffective>20261231</DateClotureEffective></CLOTUREPOINTDEVENTE>"
)
"""A small real event (tests/fixtures' CLOTUREPOINTDEVENTE, shortened): about 230 canonical bytes."""


def small_reference(id_coffre: int, id_evt: int) -> bytes:
    raw = SMALL_EVENT.replace(b"<IDCoffre>21<", b"<IDCoffre>%d<" % id_coffre)
    return canonical_bytes(normalize(raw, id_evt=id_evt))


def small_template() -> bytes:
    """A %-format of the small event's canonical bytes: %(c)d its IDCoffre, %(e)d its IDEvt."""
    form = small_reference(FIRST_COFFRE, 1).replace(b"%", b"%%")
    for found, put in (
        (b"<IDCoffre>%d</IDCoffre>" % FIRST_COFFRE, b"<IDCoffre>%(c)d</IDCoffre>"),
        (b"<IDEvt>1</IDEvt>", b"<IDEvt>%(e)d</IDEvt>"),
    ):
        if form.count(found) != 1:
            raise RuntimeError(f"the small event does not hold {found!r} once")
        form = form.replace(found, put)
    return form


def build_coffre_direct(
    work: str, form: bytes, index: int, count: int, lot_events: int, start: str, step_seconds: float
) -> dict[str, Any]:
    """Coffre ``FIRST_COFFRE + index`` (a worker process): ``count`` events in lots of
    ``lot_events``, each lot built by :func:`coffre.domain.lot.build_lot` under the header
    :func:`~coffre.domain.lot.lot_header_from_events` gives, signed by :class:`Signer`, with its
    checkpoint, written where the sealer writes them (``lot_key``, ``checkpoint_key``): the
    archive a vault would have sealed, without a journal or a recorder."""
    from coffre_vault.sealer import serialize

    from coffre.domain.chain import GENESIS, chain_hash
    from coffre.domain.lot import (
        NO_DIGEST,
        LotEvent,
        build_checkpoint,
        build_lot,
        checkpoint_after,
        checkpoint_key,
        digest,
        lot_header_from_events,
        lot_key,
    )
    from coffre.domain.merkle import MerkleAccumulator, leaf_hash

    root = Path(work)
    archive = root / "archive"
    signer = Signer.from_pem((root / "key.pem").read_bytes(), (root / "cert.pem").read_bytes())
    id_coffre = FIRST_COFFRE + index
    for id_evt in range(1, min(count, CHECKED) + 1):
        if form % {b"c": id_coffre, b"e": id_evt} != small_reference(id_coffre, id_evt):
            raise RuntimeError(
                f"coffre {id_coffre} IDEvt {id_evt}: the template's bytes are not the normalizer's"
            )
    began = time.perf_counter()
    first_at = datetime.fromisoformat(start)
    step = timedelta(seconds=step_seconds)
    tree = MerkleAccumulator()
    chain, previous_digest, number, written = GENESIS, NO_DIGEST, 0, 0
    folders: set[Path] = set()

    def write(key: str, data: bytes) -> None:
        path = archive / key
        if path.parent not in folders:
            path.parent.mkdir(parents=True, exist_ok=True)
            folders.add(path.parent)
        path.write_bytes(data)

    for first in range(1, count + 1, lot_events):
        number += 1
        previous_chain = chain
        events, leaves = [], []
        for id_evt in range(first, min(first + lot_events, count + 1)):
            canonical = form % {b"c": id_coffre, b"e": id_evt}
            chain = chain_hash(chain, canonical)
            events.append(LotEvent(id_evt, chain, canonical))
            leaf = leaf_hash(canonical)
            leaves.append(leaf)
            tree.append(leaf)
        at = first_at + step * number
        sealed_at = at.replace(microsecond=at.microsecond // 1000 * 1000)
        header = lot_header_from_events(
            id_oper=ID_OPER,
            id_coffre=id_coffre,
            number=number,
            events=events,
            previous_chain_hash=previous_chain,
            previous_lot_digest=previous_digest,
            tree_root=tree.root(),
            sealed_at=sealed_at,
            leaves=leaves,
        )
        data = serialize(signer.sign(build_lot(header, events)))
        write(lot_key(ID_OPER, id_coffre, number, sealed_at), data)
        previous_digest = digest(data)
        checkpoint = checkpoint_after(header, previous_digest, sealed_at)
        write(
            checkpoint_key(ID_OPER, id_coffre, number), serialize(signer.sign(build_checkpoint(checkpoint)))
        )
        written += len(data)
    return {
        "coffre": id_coffre,
        "seal_seconds": time.perf_counter() - began,
        "lots": number,
        "bytes": written,
    }


def build_direct(work: Path, events: int, args: argparse.Namespace) -> dict[str, Any]:
    """The archive of ``events`` small events under ``work``, over ``--coffres`` coffres, one
    worker process per coffre at a time (``--jobs``); no journal."""
    days, began_at = prepare(work, args)
    form = small_template()
    per = [events // args.coffres + (1 if i < events % args.coffres else 0) for i in range(args.coffres)]
    lots_per_coffre = max(1, -(-max(per) // args.lot_events))
    step = timedelta(days=days) / (lots_per_coffre + 1)
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(args.jobs, args.coffres)) as pool:
        futures = [
            pool.submit(
                build_coffre_direct,
                str(work),
                form,
                i,
                per[i],
                args.lot_events,
                began_at.isoformat(),
                step.total_seconds(),
            )
            for i in range(args.coffres)
        ]
        coffres = [future.result() for future in futures]
    seconds = time.perf_counter() - began
    archive_bytes = sum(p.stat().st_size for p in (work / "archive").rglob("*") if p.is_file())
    return {
        "seconds": seconds,
        "events_per_second": events / seconds,
        "journal_seconds_max": 0.0,
        "seal_seconds_max": max(c["seal_seconds"] for c in coffres),
        "lots": sum(c["lots"] for c in coffres),
        "sealed_events": events,
        "tail_events": 0,
        "event_bytes": len(form % {b"c": FIRST_COFFRE, b"e": 1}),
        "journal_bytes": 0,
        "archive_bytes": archive_bytes,
        "days": days,
        "direct": True,
    }


# -- the measures, each in a fresh process --------------------------------------------------------


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_startup(work: Path, lot_events: int) -> dict[str, Any]:
    from coffre_vault.sealer import Sealer

    signer = Signer.from_pem((work / "key.pem").read_bytes(), (work / "cert.pem").read_bytes())
    baseline = maxrss_mb()
    began = time.perf_counter()
    journals = JournalSet(work / "journal")
    try:
        coffres = journals.coffres()
        for id_oper, id_coffre in coffres:
            journals.journal(id_oper, id_coffre)
        opened = time.perf_counter()
        sealer = Sealer(LocalStorage(work / "archive"), signer, journals, max_events=lot_events)
        sealer.start()
        done = time.perf_counter()
        sealed = sum(sealer.coffre(*c).sealed_id_evt for c in coffres)
        durable = sum(sealer.coffre(*c).durable_id_evt for c in coffres)
    finally:
        journals.close()
    return {
        "journal_open_seconds": opened - began,
        "sealer_start_seconds": done - opened,
        "seconds": done - began,
        "coffres": len(coffres),
        "sealed_events": sealed,
        "journal_events": durable,
        "maxrss_mb": maxrss_mb(),
        "baseline_rss_mb": baseline,
    }


def child_takeover(work: Path, lot_events: int) -> dict[str, Any]:
    """A replica that takes every coffre over without the vault's volume: each coffre's journal,
    opened empty, is aligned with the archive (its newest seal note and lot). Versions before seal
    notes cannot do this (their vault needs ``coffre restore`` first): the child then fails."""
    from coffre_vault.sealer import Sealer

    signer = Signer.from_pem((work / "key.pem").read_bytes(), (work / "cert.pem").read_bytes())
    baseline = maxrss_mb()
    empty = work / "taken-over"
    shutil.rmtree(empty, ignore_errors=True)
    coffres = sorted(int(p.name) for p in (work / "archive" / ID_OPER).iterdir() if p.name.isdigit())
    began = time.perf_counter()
    journals = JournalSet(empty)
    try:
        sealer = Sealer(LocalStorage(work / "archive"), signer, journals, max_events=lot_events)
        if journals.on_open is None:
            raise RuntimeError("this version's vault cannot start a coffre from the archive alone")
        sealed = sum(sealer.coffre(ID_OPER, c).sealed_id_evt for c in coffres)
        done = time.perf_counter()
    finally:
        journals.close()
        shutil.rmtree(empty, ignore_errors=True)
    return {
        "seconds": done - began,
        "coffres": len(coffres),
        "sealed_events": sealed,
        "maxrss_mb": maxrss_mb(),
        "baseline_rss_mb": baseline,
    }


def child_restore(work: Path, lot_events: int) -> dict[str, Any]:
    from coffre_vault.restore import restore_journals

    from coffre.config import Settings

    data = work / "restored"
    shutil.rmtree(data, ignore_errors=True)
    settings = Settings(
        data_dir=data,
        archive_dir=work / "archive",
        signing_key=work / "key.pem",
        signing_cert=work / "cert.pem",
        lot_max_events=lot_events,
    )
    baseline = maxrss_mb()
    began = time.perf_counter()
    restored = restore_journals(settings, storage=LocalStorage(work / "archive"))
    seconds = time.perf_counter() - began
    events = sum(r.last_id_evt for r in restored if r.restored)
    shutil.rmtree(data, ignore_errors=True)
    return {
        "seconds": seconds,
        "coffres": sum(1 for r in restored if r.restored),
        "events": events,
        "events_per_second": events / seconds if seconds else None,
        "maxrss_mb": maxrss_mb(),
        "baseline_rss_mb": baseline,
    }


def child_verify(work: Path, lot_events: int) -> dict[str, Any]:
    from coffre.commands.verify import verify_archive

    baseline = maxrss_mb()
    began = time.perf_counter()
    report = verify_archive(work / "archive", [work / "cert.pem"])
    seconds = time.perf_counter() - began
    events = sum(c.events for c in report.coffres)
    return {
        "seconds": seconds,
        "ok": report.ok,
        "problems": report.lines()[:5] if not report.ok else [],
        "events": events,
        "events_per_second": events / seconds if seconds else None,
        "maxrss_mb": maxrss_mb(),
        "baseline_rss_mb": baseline,
    }


def child_proofs(work: Path, lot_events: int) -> dict[str, Any]:
    from coffre_regulator.archive_index import ArchiveIndex

    warm = int(os.environ.get("COFFRE_BENCH_WARM", "20"))

    storage = LocalStorage(work / "archive")
    trust = TrustStore.from_pem_files([work / "cert.pem"])
    signer = Signer.from_pem((work / "key.pem").read_bytes(), (work / "cert.pem").read_bytes())
    id_coffre = FIRST_COFFRE
    baseline = maxrss_mb()

    def timed(call: Callable[[], dict[str, object]]) -> float:
        began = time.perf_counter()
        call()
        return time.perf_counter() - began

    index = ArchiveIndex(storage, trust, signer)
    try:
        inclusion_first = timed(lambda: index.inclusion_proof(ID_OPER, id_coffre, 1))
        sealed = index.coffres()
        events = next(s.to_dict() for s in sealed if s.id_coffre == id_coffre)
        last = int(events.get("last_id_evt") or events.get("events") or 1)
        ids = [1 + (i * 7919) % last for i in range(warm)]
        inclusion_warm = [timed(lambda i=i: index.inclusion_proof(ID_OPER, id_coffre, i)) for i in ids]
        consistency_warm = [timed(lambda i=i: index.consistency_proof(ID_OPER, id_coffre, i)) for i in ids]
    finally:
        index.close()
    fresh = ArchiveIndex(storage, trust, signer)
    try:
        consistency_first = timed(lambda: fresh.consistency_proof(ID_OPER, id_coffre, max(1, last // 2)))
    finally:
        fresh.close()
    return {
        "coffre_events": last,
        "inclusion_first_seconds": inclusion_first,
        "inclusion_warm_seconds": statistics.median(inclusion_warm),
        "consistency_first_seconds": consistency_first,
        "consistency_warm_seconds": statistics.median(consistency_warm),
        "maxrss_mb": maxrss_mb(),
        "baseline_rss_mb": baseline,
    }


def child_verify_cli(work: Path, lot_events: int) -> dict[str, Any]:
    """``coffre verify --jobs N`` of the whole archive (N: ``COFFRE_BENCH_VERIFY_JOBS``), as an
    operator runs it: wall time, and the CPU time of the command and its workers."""
    jobs = int(os.environ.get("COFFRE_BENCH_VERIFY_JOBS", "2"))
    command = [str(Path(sys.executable).with_name("coffre")), "verify", str(work / "archive")]
    command += ["--cert", str(work / "cert.pem"), "--jobs", str(jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "jobs": jobs,
        "ok": done.returncode == 0,
        "problems": (done.stdout + done.stderr).strip().splitlines()[-5:] if done.returncode else [],
        "maxrss_mb": after.ru_maxrss / 1024,
        "baseline_rss_mb": 0.0,
    }


def child_export(work: Path, lot_events: int) -> dict[str, Any]:
    """The regulator API's daily export (``ArchiveIndex.export_day``, what ``GET /v1/exports/{day}``
    streams) of the newest day of the archive, every coffre, to a file: time and size."""
    from coffre_regulator.archive_index import ArchiveIndex

    storage = LocalStorage(work / "archive")
    trust = TrustStore.from_pem_files([work / "cert.pem"])
    signer = Signer.from_pem((work / "key.pem").read_bytes(), (work / "cert.pem").read_bytes())
    folder = work / "archive" / ID_OPER / str(FIRST_COFFRE)
    days = sorted(p for p in folder.glob("[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]") if p.is_dir())
    newest = days[-1].relative_to(folder).parts
    day = datetime(int(newest[0]), int(newest[1]), int(newest[2]), tzinfo=UTC).date()
    index = ArchiveIndex(storage, trust, signer)
    try:
        with tempfile.TemporaryFile(dir=work) as out:
            began = time.perf_counter()
            index.export_day(day, None, out)
            seconds = time.perf_counter() - began
            size = out.tell()
    finally:
        index.close()
    lots = sum(
        len(list((work / "archive" / ID_OPER / c.name).glob("/".join(newest) + "/*.xml")))
        for c in (work / "archive" / ID_OPER).iterdir()
    )
    return {"day": day.isoformat(), "lots": lots, "bytes": size, "seconds": seconds, "maxrss_mb": maxrss_mb()}


CHILDREN: dict[str, Callable[[Path, int], dict[str, Any]]] = {
    "startup": child_startup,
    "takeover": child_takeover,
    "restore": child_restore,
    "verify": child_verify,
    "verify_cli": child_verify_cli,
    "proofs": child_proofs,
    "export": child_export,
}


def evict(work: Path) -> None:
    """Drop the journal and archive files from the page cache (they are clean: fsynced)."""
    for folder in ("journal", "archive"):
        evict_files((work / folder).rglob("*"))


def run_child(phase: str, work: Path, lot_events: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", phase, "--work", str(work), "--lot-events", str(lot_events)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{phase} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the run ------------------------------------------------------------------------------------------


def measure(work: Path, events: int, args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    result: dict[str, Any] = {"events": events}
    if args.direct:
        say(f"{events:,} events: building the archive, lots written directly…")
        result["build"] = build_direct(work, events, args)
        say(f"{events:,} events: coffre verify --jobs {args.verify_jobs}…")
        jobs = {"COFFRE_BENCH_VERIFY_JOBS": str(args.verify_jobs)}
        result["verify_cli"] = verify = run_child("verify_cli", work, args.lot_events, jobs)
        if not verify["ok"]:
            raise RuntimeError(f"the archive does not verify: {verify['problems']}")
        verify["events"] = events
        verify["events_per_second"] = events / verify["seconds"]
        verify["events_per_cpu_second"] = events / verify["cpu_seconds"] if verify["cpu_seconds"] else None
        say(f"{events:,} events: regulator API proofs…")
        result["proofs"] = run_child("proofs", work, args.lot_events, {"COFFRE_BENCH_WARM": str(args.warm)})
        say(f"{events:,} events: regulator API export of a day…")
        result["export"] = run_child("export", work, args.lot_events)
        return result
    say(f"{events:,} events: building the journals and the archive…")
    result["build"] = build(work, events, args)
    say(f"{events:,} events: vault start-up, page cache warm…")
    run_child("startup", work, args.lot_events)  # the first run puts every file in the cache
    result["startup_warm"] = run_child("startup", work, args.lot_events)
    say(f"{events:,} events: vault start-up, page cache cold…")
    evict(work)
    result["startup_cold"] = run_child("startup", work, args.lot_events)
    say(f"{events:,} events: take-over without the volume…")
    try:
        result["takeover"] = run_child("takeover", work, args.lot_events)
    except RuntimeError as exc:
        result["takeover"] = {"error": str(exc)[-300:]}
    if not args.no_restore:
        say(f"{events:,} events: coffre restore…")
        result["restore"] = run_child("restore", work, args.lot_events)
    say(f"{events:,} events: coffre verify…")
    result["verify"] = run_child("verify", work, args.lot_events)
    if not result["verify"]["ok"]:
        raise RuntimeError(f"the archive does not verify: {result['verify']['problems']}")
    say(f"{events:,} events: regulator API proofs…")
    result["proofs"] = run_child("proofs", work, args.lot_events)
    return result


def fmt_s(value: float | None) -> str:
    return "n/a" if value is None else (f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s")


def rows(runs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    def col(get: Callable[[dict[str, Any]], str]) -> list[str]:
        out = []
        for run in runs:
            try:
                out.append(get(run))
            except (KeyError, TypeError):
                out.append("n/a")
        return out

    table = [
        (
            "sealed events (+ unsealed tail)",
            col(lambda r: f"{r['build']['sealed_events']:,} (+{r['build']['tail_events']:,})"),
        ),
        ("event bytes; lots", col(lambda r: f"{r['build']['event_bytes']}; {r['build']['lots']:,}")),
        (
            "journal / archive size",
            col(
                lambda r: (
                    f"{r['build']['journal_bytes'] / 1e6:,.0f} / {r['build']['archive_bytes'] / 1e6:,.0f} MB"
                )
            ),
        ),
        (
            "build (journal + seal), wall",
            col(lambda r: f"{fmt_s(r['build']['seconds'])} ({r['build']['events_per_second']:,.0f} ev/s)"),
        ),
        ("  journal writing, slowest coffre", col(lambda r: fmt_s(r["build"]["journal_seconds_max"]))),
        ("  sealing, slowest coffre", col(lambda r: fmt_s(r["build"]["seal_seconds_max"]))),
    ]
    for label, key in (("warm", "startup_warm"), ("cold", "startup_cold")):
        table += [
            (f"vault start-up, cache {label}", col(lambda r, k=key: fmt_s(r[k]["seconds"]))),
            ("  JournalSet open + scan", col(lambda r, k=key: fmt_s(r[k]["journal_open_seconds"]))),
            ("  Sealer.start()", col(lambda r, k=key: fmt_s(r[k]["sealer_start_seconds"]))),
            (
                "  peak RSS (baseline)",
                col(lambda r, k=key: f"{r[k]['maxrss_mb']:,.0f} MB ({r[k]['baseline_rss_mb']:,.0f})"),
            ),
        ]
    table += [
        ("take-over without the volume", col(lambda r: fmt_s(r["takeover"]["seconds"]))),
        ("  peak RSS", col(lambda r: f"{r['takeover']['maxrss_mb']:,.0f} MB")),
        (
            "coffre restore",
            col(
                lambda r: f"{fmt_s(r['restore']['seconds'])} ({r['restore']['events_per_second']:,.0f} ev/s)"
            ),
        ),
        ("  peak RSS", col(lambda r: f"{r['restore']['maxrss_mb']:,.0f} MB")),
        (
            "coffre verify, 1 core",
            col(lambda r: f"{fmt_s(r['verify']['seconds'])} ({r['verify']['events_per_second']:,.0f} ev/s)"),
        ),
        ("  peak RSS", col(lambda r: f"{r['verify']['maxrss_mb']:,.0f} MB")),
        (
            "coffre verify --jobs N (CLI)",
            col(
                lambda r: (
                    f"{fmt_s(r['verify_cli']['seconds'])} ({r['verify_cli']['events_per_second']:,.0f} ev/s, "
                    f"N={r['verify_cli']['jobs']})"
                )
            ),
        ),
        ("  events per CPU-second", col(lambda r: f"{r['verify_cli']['events_per_cpu_second']:,.0f}")),
        ("proof API, coffre of", col(lambda r: f"{r['proofs']['coffre_events']:,} events")),
        (
            "  inclusion, first / warm",
            col(
                lambda r: (
                    f"{fmt_s(r['proofs']['inclusion_first_seconds'])} / {fmt_s(r['proofs']['inclusion_warm_seconds'])}"
                )
            ),
        ),
        (
            "  consistency, first / warm",
            col(
                lambda r: (
                    f"{fmt_s(r['proofs']['consistency_first_seconds'])} / {fmt_s(r['proofs']['consistency_warm_seconds'])}"
                )
            ),
        ),
        ("  peak RSS", col(lambda r: f"{r['proofs']['maxrss_mb']:,.0f} MB")),
        (
            "export of a day (every coffre)",
            col(
                lambda r: (
                    f"{fmt_s(r['export']['seconds'])} ({r['export']['lots']:,} lots, "
                    f"{r['export']['bytes'] / 1e6:,.1f} MB)"
                )
            ),
        ),
    ]
    if all(
        "direct" in r.get("build", {}) for r in runs
    ):  # no journal: no start-up, restore or in-process verify
        table = [
            row
            for row in table
            if not any(
                word in row[0]
                for word in (
                    "start-up",
                    "JournalSet",
                    "Sealer",
                    "journal writing",
                    "restore",
                    "verify, 1 core",
                )
            )
        ]
        table = [row for row in table if row[1] != ["n/a"] * len(runs)]
    return table


def print_table(runs: list[dict[str, Any]], out: Any) -> None:
    table = rows(runs)
    heads = ["measure", *(f"{r['events']:,} events" for r in runs)]
    body = [[label, *cells] for label, cells in table]
    widths = [max(len(line[i]) for line in [heads, *body]) for i in range(len(heads))]
    rule = "  ".join("-" * w for w in widths)
    print(rule, file=out)
    print("  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip(), file=out)
    print(rule, file=out)
    for line in body:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip(), file=out)
    print(rule, file=out)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", default="1000000", help="sealed events, or several sizes comma-separated")
    parser.add_argument("--coffres", type=int, default=4)
    parser.add_argument(
        "--event-bytes", type=int, default=600, help="about this many canonical bytes per event"
    )
    parser.add_argument("--lot-events", type=int, default=1000, help="events per lot (the vault's default)")
    parser.add_argument("--tail", type=int, default=500, help="unsealed events left in each coffre's journal")
    parser.add_argument(
        "--days", type=int, default=6 * 365, help="the history's lots are spread over this many days"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="build processes")
    parser.add_argument("--no-restore", action="store_true", help="skip coffre restore")
    parser.add_argument(
        "--direct",
        action="store_true",
        help="only an archive of small events, its lots written directly by the lot builder and signer "
        "(no journal: no start-up nor restore), then coffre verify --jobs, proofs and a day's export",
    )
    parser.add_argument("--verify-jobs", type=int, default=2, help="coffre verify --jobs with --direct")
    parser.add_argument(
        "--warm", type=int, default=20, help="warm proofs measured (their median) with --direct"
    )
    parser.add_argument(
        "--base", type=Path, default=None, help="the folder to build in (default: a temporary one)"
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="run REV's own bench/history.py with the same sizes first (a git worktree), then this tree's, "
        "and print the two side by side",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(s.replace("_", "")) for s in args.events.split(",") if s.strip()]
    except ValueError:
        parser.error("--events takes integers, comma-separated")
    if (
        not args.sizes
        or min(args.sizes) < args.coffres
        or args.coffres < 1
        or args.lot_events < 1
        or args.tail < 0
    ):
        parser.error("--events must be at least --coffres, --coffres and --lot-events positive, --tail >= 0")
    return args


def run_baseline(args: argparse.Namespace, base: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """REV's own bench/history.py, run with this run's sizes and options in REV's checkout."""
    from _worktree import worktree

    forwarded = [
        "--events",
        args.events,
        "--coffres",
        str(args.coffres),
        "--lot-events",
        str(args.lot_events),
    ]
    forwarded += ["--tail", str(args.tail), "--jobs", str(args.jobs), "--json"]
    if args.no_restore:
        forwarded.append("--no-restore")
    with worktree(args.baseline, base / "baseline-tree") as checkout:
        say(f"baseline {args.baseline} ({checkout.commit}): its own bench/history.py…")
        done = subprocess.run(
            [sys.executable, str(checkout.folder / "bench" / "history.py"), *forwarded],
            capture_output=True,
            text=True,
            cwd=base,
            env=checkout.env(),
        )
        if done.returncode not in (0, 1) or not done.stdout.strip():
            raise RuntimeError(f"the baseline's bench failed: {done.stderr.strip()[-2000:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        found["commit"] = checkout.commit
        return found


SIDE_BY_SIDE: tuple[tuple[str, Callable[[dict[str, Any]], float]], ...] = (
    ("vault start-up, cache warm (s)", lambda r: r["startup_warm"]["seconds"]),
    ("vault start-up, cache cold (s)", lambda r: r["startup_cold"]["seconds"]),
    ("  peak RSS, warm (MB)", lambda r: r["startup_warm"]["maxrss_mb"]),
    ("journal on disk (MB)", lambda r: r["build"]["journal_bytes"] / 1e6),
    ("take-over without the volume (s)", lambda r: r["takeover"]["seconds"]),
    ("coffre restore (s)", lambda r: r["restore"]["seconds"]),
    ("  peak RSS (MB)", lambda r: r["restore"]["maxrss_mb"]),
    ("coffre verify (events/s)", lambda r: r["verify"]["events_per_second"]),
)


def print_side_by_side(baseline: dict[str, Any], runs: list[dict[str, Any]], out: Any) -> None:
    """The baseline's figures and this tree's, size by size, with their ratio (this / baseline)."""
    theirs = {run["events"]: run for run in baseline.get("runs", [])}
    print(f"\nside by side: baseline {baseline.get('commit')} | this tree | ratio", file=out)
    for run in runs:
        other = theirs.get(run["events"])
        print(f"{run['events']:,} events", file=out)
        for label, get in SIDE_BY_SIDE:
            values = []
            for side in (other, run):
                try:
                    values.append(float(get(side)))
                except (KeyError, TypeError, ValueError):
                    values.append(None)
            ratio = f"{values[1] / values[0]:.2f}" if None not in values and values[0] else "n/a"
            shown = ["n/a" if v is None else f"{v:,.2f}" for v in values]
            print(f"  {label:<36} {shown[0]:>12} | {shown[1]:>12} | {ratio}", file=out)
    for error in baseline.get("errors", []):
        print(f"  baseline error: {error}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        print(json.dumps(CHILDREN[args.child](args.work, args.lot_events)))
        return 0
    out = sys.stderr if args.json else sys.stdout

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    base = Path(tempfile.mkdtemp(prefix="coffre-bench-history-", dir=args.base))
    baseline: dict[str, Any] | None = None
    if args.baseline:
        baseline = run_baseline(args, base, say)
    runs: list[dict[str, Any]] = []
    errors: list[str] = []
    status = 0
    try:
        for events in args.sizes:
            runs.append(measure(base / str(events), events, args, say))
            if not args.keep:
                shutil.rmtree(base / str(events), ignore_errors=True)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        status = 130
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
        status = 1
    finally:
        if args.keep:
            say(f"data kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    if status != 130:
        say(
            f"\ncoffre history bench: {args.coffres} coffres, lots of {args.lot_events:,}, a tail of "
            f"{args.tail:,} unsealed events per coffre, {os.cpu_count()} CPUs"
        )
        if runs:
            print_table(runs, out)
        if baseline is not None:
            print_side_by_side(baseline, runs, out)
        for error in errors:
            say(f"error: {error}")
        if args.json:
            print(
                json.dumps(
                    {
                        "runs": runs,
                        "errors": errors,
                        "status": status,
                        "coffres": args.coffres,
                        "baseline": baseline,
                    }
                )
            )
    return status


if __name__ == "__main__":
    sys.exit(main())
