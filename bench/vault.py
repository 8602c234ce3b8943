"""coffre's vault benchmark: chaining, recording and sealing, and `coffre verify`, in one run, no broker.

    .venv/bin/python bench/vault.py [--events N] [--repeat R] [--no-rsa] [--keep]

N POINSCRIT events (unique by IDJoueur, spread over 4 coffres, IDEvt 1, 2, 3... per coffre) are
normalized and canonicalized once, up front; then, in this order and on the same bytes:

1. raw SHA-256 chaining, ``h = sha256(h + canonical)`` over the N events (the floor of any vault);
2. one core's raw parse + exclusive C14N + SHA-256 of each event with lxml (the reference for
   the sealing target: a lot is, at the least, every event parsed, canonicalized and hashed);
3. the vault's recording and sealing: a fresh journal set and archive; every event appended to
   its coffre's journal, a group commit (``JournalSet.sync``) every 1,000 events followed by
   ``Sealer.recorded`` and ``Sealer.seal_due``, and ``Sealer.seal_all`` at the end; with an
   ECDSA P-256 key in lots of 1,000 and of 10,000 events, and an RSA-3072 key in lots of 1,000
   (unless ``--no-rsa``). Rate = N / the wall time of the whole run;
4. ``coffre verify`` (``verify_archive``) over the ECDSA archive in lots of 1,000.

Phases 1 and 2 are short and taken as the best of ``--repeat`` passes; 3 and 4 run once each.
Targets: sealing (ECDSA, lots of 1,000) >= 0.50 of the parse + C14N + hash rate; verification
>= 20,000 events/s on one core (verify is single-threaded). A missed target is not a failure:
the exit status is 0 when everything was measured, 1 when the archive did not verify or a
phase failed, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from pathlib import Path

from coffre_vault.sealer import Sealer
from lxml import etree

from coffre.adapters.journal import Journal, JournalSet
from coffre.adapters.storage import LocalStorage
from coffre.commands.verify import verify_archive
from coffre.domain.chain import GENESIS
from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize
from coffre.domain.signing import Signer, generate_key_and_certificate

from pipeline import event, print_table, verdict  # bench/pipeline.py: the same events, the same table

ID_OPER = "0099"
COFFRES = 4
SYNC_EVERY = 1000  # events per group commit, as the vault service batches
TARGET_SEAL_RATIO = 0.50  # of the parse + C14N + hash rate
TARGET_VERIFY_RATE = 20_000.0  # events/s on one core
MAX_AGE = 3600.0  # seconds: only full lots are sealed before seal_all


class VerificationFailed(RuntimeError):
    """The archive the bench built does not verify: the measure means nothing."""


@dataclass(frozen=True, slots=True)
class BenchEvent:
    id_coffre: int
    id_evt: int
    canonical: bytes


@dataclass
class SealRun:
    label: str
    max_events: int
    seconds: float
    lots: int
    archive: Path
    cert: Path

    def rate(self, events: int) -> float:
        return events / self.seconds


@dataclass
class Results:
    chain_rate: float | None = None
    c14n_rate: float | None = None
    seals: dict[str, SealRun] = field(default_factory=dict)
    verify_seconds: float | None = None
    verify_events: int = 0
    errors: list[str] = field(default_factory=list)


# events ----------------------------------------------------------------------------------


def build_events(count: int, coffres: int) -> list[BenchEvent]:
    """``count`` normalized events, IDEvt consecutive per coffre, as the vault would record them."""
    events = []
    for n in range(count):
        coffre, id_evt = 21 + n % coffres, n // coffres + 1
        canonical = canonical_bytes(normalize(event(n, coffres), id_evt=id_evt))
        events.append(BenchEvent(coffre, id_evt, canonical))
    return events


# phases ----------------------------------------------------------------------------------


def best_rate(measure: Callable[[list[bytes]], None], canonical: list[bytes], repeat: int) -> float:
    """Events/s of the fastest of ``repeat`` passes of ``measure`` over ``canonical``."""
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        measure(canonical)
        best = min(best, time.perf_counter() - began)
    return len(canonical) / best


def chain(canonical: list[bytes]) -> None:
    """The raw hash chain: ``h = sha256(h + canonical)``."""
    h = GENESIS
    for data in canonical:
        h = sha256(h + data).digest()


def parse_c14n_hash(canonical: list[bytes]) -> None:
    """Per event: lxml parse, exclusive C14N, SHA-256."""
    fromstring, tostring = etree.fromstring, etree.tostring
    for data in canonical:
        sha256(tostring(fromstring(data), method="c14n", exclusive=True)).digest()


def make_key(directory: Path, algorithm: str) -> tuple[Signer, Path]:
    """A signer and the path of its PEM certificate (valid from yesterday)."""
    key, cert = generate_key_and_certificate(
        f"bench-{algorithm}", algorithm, not_before=datetime.now(UTC) - timedelta(days=1)
    )
    path = directory / f"{algorithm}.pem"
    path.write_bytes(cert)
    return Signer.from_pem(key, cert), path


def record_and_seal(work: Path, events: Sequence[BenchEvent], signer: Signer, max_events: int) -> int:
    """Record every event into fresh journals under ``work`` and seal them into ``work/archive``
    as the vault service does; the number of lots written."""
    archive = work / "archive"
    archive.mkdir(parents=True)
    with JournalSet(work / "journal") as journals:
        sealer = Sealer(LocalStorage(archive), signer, journals, max_events=max_events, max_age=MAX_AGE)
        cache: dict[int, Journal] = {}
        touched: set[int] = set()
        for i, e in enumerate(events, 1):
            journal = cache.get(e.id_coffre)
            if journal is None:
                journal = cache[e.id_coffre] = journals.journal(ID_OPER, e.id_coffre)
            journal.append(e.id_evt, e.canonical)
            touched.add(e.id_coffre)
            if i % SYNC_EVERY == 0 or i == len(events):
                journals.sync()
                for coffre in sorted(touched):
                    sealer.recorded(ID_OPER, coffre)
                touched.clear()
                sealer.seal_due()
        sealer.seal_all()
        if sealer.counts.events != len(events):
            raise RuntimeError(f"sealed {sealer.counts.events:,} events of {len(events):,}")
        return sealer.counts.lots


def seal_phase(
    label: str, work: Path, events: Sequence[BenchEvent], signer: Signer, cert: Path, max_events: int
) -> SealRun:
    """Time :func:`record_and_seal` from the first append to the last lot written."""
    began = time.perf_counter()
    lots = record_and_seal(work, events, signer, max_events)
    seconds = time.perf_counter() - began
    return SealRun(label, max_events, seconds, lots, work / "archive", cert)


def verify_phase(run: SealRun, events: int) -> float:
    """Seconds ``verify_archive`` takes over ``run``'s archive; VerificationFailed unless it is ok
    and covers every event."""
    began = time.perf_counter()
    report = verify_archive(run.archive, [run.cert])
    seconds = time.perf_counter() - began
    verified = sum(coffre.events for coffre in report.coffres)
    if not report.ok or verified != events:
        lines = report.lines()
        raise VerificationFailed(
            f"the {run.label} archive does not verify ({verified:,} of {events:,} events): "
            + "; ".join(lines[:10])
            + (f" … ({len(lines) - 10} more)" if len(lines) > 10 else "")
        )
    return seconds


# report ---------------------------------------------------------------------------------------


def rate_text(rate: float | None) -> str:
    return f"{rate:,.0f} events/s ({1e6 / rate:.1f} µs/event)" if rate else "n/a"


def report(results: Results, args: argparse.Namespace, event_size: int) -> None:
    n = args.events
    rows: list[tuple[str, str, str, str]] = [
        (f"raw SHA-256 chaining (best of {args.repeat})", rate_text(results.chain_rate), "", ""),
        (
            f"parse + exclusive C14N + SHA-256, 1 core (best of {args.repeat})",
            rate_text(results.c14n_rate),
            "",
            "",
        ),
    ]
    for run in results.seals.values():
        rows.append(
            (
                f"record + seal, {run.label}",
                rate_text(run.rate(n)),
                "",
                "",
            )
        )
        rows.append((f"  ({run.lots} lots, N / seconds)", f"{n:,} / {run.seconds:.2f} s", "", ""))
    reference = results.seals.get("ecdsa-1000")
    ratio = reference.rate(n) / results.c14n_rate if reference and results.c14n_rate else None
    rows.append(
        (
            "record + seal (ECDSA, lots of 1,000) / parse+C14N+hash",
            f"{ratio:.2f}" if ratio is not None else "n/a",
            f">= {TARGET_SEAL_RATIO:.2f}",
            verdict(ratio >= TARGET_SEAL_RATIO if ratio is not None else None),
        )
    )
    big = results.seals.get("ecdsa-10000")
    if big and results.c14n_rate:
        rows.append(("  the same, lots of 10,000", f"{big.rate(n) / results.c14n_rate:.2f}", "", ""))
    verify_rate = results.verify_events / results.verify_seconds if results.verify_seconds else None
    rows.append(
        (
            "coffre verify (ECDSA, lots of 1,000), 1 core",
            rate_text(verify_rate),
            f">= {TARGET_VERIFY_RATE:,.0f} events/s",
            verdict(verify_rate >= TARGET_VERIFY_RATE if verify_rate else None),
        )
    )
    if verify_rate and results.verify_seconds:
        rows.append(
            ("  (N / seconds)", f"{results.verify_events:,} / {results.verify_seconds:.2f} s", "", "")
        )
    if verify_rate and results.c14n_rate:
        rows.append(("  verify / parse+C14N+hash", f"{verify_rate / results.c14n_rate:.2f}", "", ""))

    print()
    print(
        f"coffre vault bench: {n:,} events of {event_size} bytes (POINSCRIT, canonical) over "
        f"{COFFRES} coffres, group commit every {SYNC_EVERY:,}, {os.cpu_count()} CPUs"
    )
    print_table(rows)
    for error in results.errors:
        print(f"error: {error}")


# main -----------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000, help="events of every phase")
    parser.add_argument(
        "--repeat", type=int, default=3, help="passes of the raw phases (1 and 2), the best is kept"
    )
    parser.add_argument("--no-rsa", action="store_true", help="skip the RSA-3072 sealing run")
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (journals, archives)"
    )
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeat < 1:
        parser.error("--events and --repeat must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    work = Path(tempfile.mkdtemp(prefix="coffre-bench-vault-"))
    results = Results()
    status = 0
    events: list[BenchEvent] = []
    try:
        print(f"normalizing {args.events:,} events…", flush=True)
        events = build_events(args.events, COFFRES)
        canonical = [e.canonical for e in events]

        print("raw chaining, parse + C14N + hash…", flush=True)
        results.chain_rate = best_rate(chain, canonical, args.repeat)
        results.c14n_rate = best_rate(parse_c14n_hash, canonical, args.repeat)

        runs = [("ecdsa", 1000), ("ecdsa", 10_000)]
        if not args.no_rsa:
            runs.append(("rsa", 1000))
        keys = {algorithm: make_key(work, algorithm) for algorithm in dict.fromkeys(a for a, _ in runs)}
        for algorithm, max_events in runs:
            label = f"{algorithm}-{max_events}"
            print(f"record + seal: {label}…", flush=True)
            signer, cert = keys[algorithm]
            results.seals[label] = seal_phase(label, work / label, events, signer, cert, max_events)

        print("coffre verify: ecdsa-1000…", flush=True)
        results.verify_seconds = verify_phase(results.seals["ecdsa-1000"], len(events))
        results.verify_events = len(events)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        status = 130
    except Exception as exc:
        results.errors.append(f"{type(exc).__name__}: {exc}")
        status = 1
    finally:
        if status != 130:
            report(results, args, len(events[0].canonical) if events else 0)
        if args.keep:
            print(f"data kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
