"""The ``coffre`` command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .logs import setup_logging

if TYPE_CHECKING:
    from .config import Settings
    from .demo import DemoEvent
    from .stack import Stack


# The event catalogue, the codec and the normalizer are imported by the commands that use them:
# importing the catalogue costs 0.3-1.2 s, which a restarted vault or acquittal service would pay
# before its first record (issue 22: no wait after a hit).


def _inputs(paths: Sequence[str]) -> Iterator[tuple[str, bytes]]:
    """(label, bytes) for each event in the files and folders named (folders recursively)."""
    from .domain.codec import split_documents

    for name in paths:
        path = Path(name)
        files = (
            sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in (".xml", ".json"))
            if path.is_dir()
            else [path]
        )
        for file in files:
            documents = split_documents(file.read_bytes())
            for index, raw in enumerate(documents, start=1):
                yield (f"{file}#{index}" if len(documents) > 1 else str(file)), raw


def cmd_normalize(args: argparse.Namespace) -> int:
    """Print each input's normalized event, or its reason codes; exit 0 only if all were accepted."""
    from .domain.codec import canonical_bytes, pretty_xml, to_json
    from .domain.errors import Rejected
    from .domain.normalize import normalize

    accepted = rejected = 0
    next_id = args.id_evt_start
    out = sys.stdout.buffer
    for label, raw in _inputs(args.files):
        try:
            event = normalize(raw, id_evt=next_id)
        except Rejected as exc:
            rejected += 1
            if args.format == "json":
                out.write(
                    json.dumps(
                        {"input": label, "status": "rejected", **exc.as_dict()}, ensure_ascii=False
                    ).encode()
                    + b"\n"
                )
            else:
                for p in exc.problems:
                    out.write(f"{label}: REJECTED {p.code} {p.path}: {p.message}\n".encode())
            continue
        accepted += 1
        if next_id is not None:
            next_id += 1
        if args.format == "json":
            out.write(to_json(event) + b"\n")
        elif args.format == "pretty":
            out.write(f"<!-- {label} -->\n".encode() + pretty_xml(event))
        else:
            out.write(canonical_bytes(event) + b"\n")
    print(f"{accepted} accepted, {rejected} rejected", file=sys.stderr)
    return 0 if rejected == 0 and accepted > 0 else 1


def cmd_catalogue(args: argparse.Namespace) -> int:
    """List the event families and types coffre accepts, with their fields in schema order."""
    from .domain.catalogue import EVENT_TYPES, families

    for family, tags in families().items():
        print(f"{family}: {', '.join(tags)}")
        if args.fields:
            for tag in tags:
                print(f"  {tag}: {' '.join(EVENT_TYPES[tag].model_fields)}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """``coffre audit``: coffre/audit_command.py (imported here, not before: it loads the hand audit)."""
    from .audit_command import run_audit

    return run_audit(args)


def cmd_annex_examples(args: argparse.Namespace) -> int:
    """Write the annex 1.4.3 examples (read from the annex text) into a folder: a cross-check
    of the demo's annex events, for whoever holds the regulator's text."""
    import os

    from .domain.annex import ANNEX_ENV, ANNEX_NAME, annex_examples

    annex = args.annex or os.environ.get(ANNEX_ENV)
    if not annex:
        print(
            f"coffre annex-examples: name the annex text ({ANNEX_NAME}) with --annex or ${ANNEX_ENV}",
            file=sys.stderr,
        )
        return 2
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    for letter, raw in annex_examples(annex).items():
        target = folder / f"1.4.3.{letter}.xml"
        target.write_bytes(raw)
        print(target)
    return 0


def cmd_service(args: argparse.Namespace) -> int:
    """``coffre ingest|vault|acquittal|regulator-api|auditor|witness``: one service, configured by COFFRE_* variables."""
    import signal

    from .config import load_settings

    # SIGTERM before the service serves (it drains from then on): nothing to drain, a clean exit
    signal.signal(signal.SIGTERM, _exit_before_serving)

    settings = load_settings()
    setup_logging(settings.log_level, settings.log_format, service=args.command)
    if args.command == "ingest":
        from coffre_ingest.app import run
    elif args.command == "vault":
        from coffre_vault.service import run
    elif args.command == "regulator-api":
        from coffre_regulator.service import run
    elif args.command == "auditor":
        from coffre_auditor.app import run
    elif args.command == "witness":
        from coffre_witness.service import run
    else:
        from coffre_acquittal.service import run
    run(settings)
    return 0


def _exit_before_serving(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _describe(label: str, outcome: object, chain_digits: int = 64) -> str:
    """One line per outcome; the demo shortens the chain hash (its verification follows)."""
    from .client import Outcome

    assert isinstance(outcome, Outcome)

    def chain(digest: str | None) -> str:
        text = digest or ""
        return text if len(text) <= chain_digits else f"{text[:chain_digits]}…"

    if outcome.acquittal and outcome.status == "recorded":
        a = outcome.acquittal
        return f"{label}: {a.event_type} recorded, acquitted: IDOper {a.id_oper} IDCoffre {a.id_coffre} IDEvt {a.id_evt} chain {chain(a.chain_hash)}"
    if outcome.acquittal:
        reasons = "; ".join(f"{r['code']} {r['path']}" for r in outcome.acquittal.reasons or [])
        return f"{label}: rejected: {reasons}"
    r = outcome.receipt
    assert r is not None
    why = "synthesis event" if not r.supervised else "Supervision"
    return f"{label}: {r.event_type} recorded without acquittal ({why}): IDOper {r.id_oper} IDCoffre {r.id_coffre} IDEvt {r.id_evt} chain {chain(r.chain_hash)}"


async def _submit_all(
    bootstrap: str,
    settings: Settings,
    items: list[tuple[str, bytes]],
    timeout: float,
    chain_digits: int = 64,
) -> int:
    from .client import CoffreClient

    failures = 0
    from .adapters.kafka_security import client_options

    client = CoffreClient(bootstrap, settings.topics, settings.synthesis_events, client_options(settings))
    async with client:
        for label, raw in items:
            try:
                outcome = await client.submit(raw, timeout=timeout)
            except TimeoutError:
                print(f"{label}: no outcome within {timeout:.0f}s", flush=True)
                failures += 1
                continue
            print(_describe(label, outcome, chain_digits), flush=True)
            failures += outcome.status == "rejected"
    return failures


async def _audit_start(bootstrap: str, settings: Settings) -> dict[int, int]:
    """The audit topic's partitions and their end offsets now: the demo's records are those that
    come after (the stack created the topic at start-up)."""
    from aiokafka import TopicPartition

    from .adapters.kafka import read_end_offsets, span_reader, topic_partitions
    from .adapters.kafka_security import client_options

    async with span_reader(bootstrap, client_options(settings)) as consumer:
        partitions = await topic_partitions(consumer, settings.topics.audit)
        reported = await consumer.end_offsets([TopicPartition(settings.topics.audit, p) for p in partitions])
        ends = await read_end_offsets(consumer, reported)
        return {tp.partition: offset for tp, offset in ends.items()}


async def _show_audit(
    bootstrap: str,
    settings: Settings,
    start: dict[int, int],
    expected: list[tuple[str, int, str, tuple[str, ...]]],
    timeout: float,
    replayed: bool = False,
) -> int:
    """Print the auditor's records of the demo (``coffre.audit``) as they come, until each finding the
    demo's own audit expects has come (1: some did not within ``timeout``, or others came, unless the
    demo is ``replayed`` on a data folder that holds it already: its players' balances then go on
    from the last run's, and the auditor rightly finds more)."""
    import contextlib
    from collections import Counter

    from aiokafka import TopicPartition

    from .adapters.kafka import read_span, span_reader
    from .adapters.kafka_security import client_options
    from .adapters.keys import record_keys
    from .domain.messages import AuditRecord, InvalidMessage

    print(
        f"audit: waiting for the auditor's findings on {settings.topics.audit} "
        f"({len(expected)} event(s) with findings expected)",
        flush=True,
    )
    seen: Counter[tuple[str, int, str, tuple[str, ...]]] = Counter()
    want = Counter(expected)
    spans = {TopicPartition(settings.topics.audit, p): (start[p], None) for p in sorted(start) if want}
    keys = record_keys(settings, warn=False)
    async with span_reader(bootstrap, client_options(settings), fetch_max_wait_ms=200) as consumer:
        with contextlib.suppress(TimeoutError):  # read until all came, or for ``timeout`` at most
            async for _, records in read_span(
                consumer, spans, idle_ms=round(timeout * 1000), timeout=timeout
            ):
                for r in records:
                    try:
                        record = AuditRecord.from_record(r.key, r.value or b"", list(r.headers or ()), keys)
                    except InvalidMessage as exc:  # not the auditor's: never shown as a finding
                        print(f"audit: passed over {r.topic}[{r.partition}]@{r.offset}: {exc}", flush=True)
                        continue
                    codes = tuple(sorted(f["code"] for f in record["findings"]))
                    seen[(record["id_oper"], record["id_coffre"], record["event_type"], codes)] += 1
                    chain = (record.get("chain_hash") or "")[:16]
                    for f in record["findings"]:
                        where = "".join(
                            f" {k} {f[k]}" for k in ("round", "seat", "player") if f.get(k) is not None
                        )
                        print(
                            f"audit: coffre {record['id_oper']}/{record['id_coffre']} IDEvt {record['id_evt']} "
                            f"{record['event_type']} (chain {chain}…): {f['code']}{where}: {f['message']}",
                            flush=True,
                        )
                if not want - seen:  # every expected finding came (others that came are reported)
                    break
    missing, extra = want - seen, seen - want
    for what, items in (("missing", missing), ("unexpected" if not replayed else "also", extra)):
        for (oper, coffre, tag, codes), n in items.items():
            print(f"audit: {what}: {n} {tag} of coffre {oper}/{coffre} with {', '.join(codes)}", flush=True)
    if replayed and extra:
        print(
            "audit: the demo was played before on this data folder: its players' balances go on from "
            "that run's, so the auditor also finds where they do not follow (expected)",
            flush=True,
        )
    if not missing and (replayed or not extra):
        print(
            f"audit: the auditor reported the {len(expected)} event(s) the demo expects flagged, "
            "among them CG-9's falsified hand",
            flush=True,
        )
    return int(bool(missing or (extra and not replayed)))


def cmd_publish(args: argparse.Namespace) -> int:
    """Publish events and print each acquittal or rejection; exit 0 only if all were recorded."""
    import asyncio

    from .config import load_settings

    settings = load_settings(**({"bootstrap_servers": args.bootstrap} if args.bootstrap else {}))
    items = list(_inputs(args.files))
    failures = asyncio.run(_submit_all(settings.bootstrap_servers, settings, items, args.timeout))
    return 0 if failures == 0 and items else 1


def _demo() -> list[DemoEvent]:
    """The packaged demo events; exit 2 if one does not normalize."""
    from .demo import DemoEventError, load_demo

    try:
        return load_demo()
    except DemoEventError as exc:
        print("coffre up: the demo's events do not normalize:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        raise SystemExit(2) from None


def cmd_up(args: argparse.Namespace) -> int:
    """The whole stack on this machine (its own Apache Kafka unless --bootstrap). The settings and
    the demo's events are checked before anything starts (exit 2). SIGTERM, as Ctrl-C, stops it at
    any moment, the services first (they drain and commit), then the broker; SIGKILL takes every
    child with it (:mod:`coffre.adapters.lifeline`)."""
    import asyncio
    import signal
    import time

    from .config import load_settings
    from .demo import expected_findings
    from .stack import Stack

    overrides = {"data_dir": args.data} if args.data else {}
    settings = load_settings(**overrides)
    demo_events = _demo() if args.demo else []
    demo = [(event.line, event.raw) for event in demo_events]
    expected = expected_findings(demo_events)
    stack = Stack(
        settings,
        bootstrap=args.bootstrap,
        broker_kind=args.broker,
        ingest_replicas=args.ingest_replicas,
        auditor=True,
        witness=True,
    )
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C: a graceful stop, even mid-start
    failures, interrupted = 0, False
    try:
        bootstrap = stack.start()
        settings = stack.settings  # with the development record keys it named to its services
        for name, why in stack.wait_ready().items():
            print(f"coffre up: {name} is not ready yet ({why}): see its log", file=sys.stderr, flush=True)
        _show_stack(stack, bootstrap)
        if args.demo:
            print(
                f"demo: {len(demo)} events shipped with coffre: the annex 1.4.3 examples' facts, "
                "cash table CG-9 (one hand falsified on purpose), tournament T-77 (24 hands of mixed "
                "games played by pokerkit), then tournament T-42 from a deposit to a withdrawal",
                flush=True,
            )
            audit_from = asyncio.run(_audit_start(bootstrap, settings))
            replayed = any(offset > 0 for offset in audit_from.values())  # the auditor flagged a run before
            failures = asyncio.run(_submit_all(bootstrap, settings, demo, timeout=90.0, chain_digits=16))
            failures += asyncio.run(
                _show_audit(bootstrap, settings, audit_from, expected, timeout=120.0, replayed=replayed)
            )
        if not args.once:
            with contextlib.suppress(KeyboardInterrupt):  # from here on, the way to stop it
                print("running; Ctrl-C or SIGTERM stops it", flush=True)
                while True:
                    time.sleep(1.0)
                    for name, child in stack.children.items():
                        if child.poll() is not None:
                            print(f"{name} exited with {child.returncode}; restarting it", flush=True)
                            stack.spawn(name)
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: stopping", flush=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the stop below is not cut short by a second one
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if stack.children or stack.broker:  # not when the settings were refused before anything started
            codes = stack.stop()
            print(f"stopped: {codes}", flush=True)
    if interrupted:
        return 130
    if args.demo and settings.archive_backend == "local":
        failures += _show_archive(settings, stack.dev_witness.public_key if stack.dev_witness else None)
    return 0 if failures == 0 else 1


def _show_stack(stack: Stack, bootstrap: str) -> None:
    """Where each part of a started stack answers, and how to reach it."""
    settings = stack.settings
    print(
        f"coffre is up: Kafka at {bootstrap}, topics {settings.topic_prefix}*, data in {settings.data_dir}",
        flush=True,
    )
    print(f"logs: {settings.data_dir}/logs/{{broker,ingest,vault,acquittal,auditor}}.log", flush=True)
    if settings.ops_port:
        ports = ", ".join(
            f"{name} http://{settings.http_host}:{stack.ops_port(name)}"
            for name in stack.children
            if stack.ops_port(name)
        )
        print(f"health and metrics (/healthz /readyz /metrics): {ports}", flush=True)
    if stack.api_tls:
        tls = stack.api_tls
        print(
            f"regulator API (development certificates): curl --cacert {tls.ca_cert} --cert {tls.client_cert} "
            f"--key {tls.client_key} https://localhost:{settings.api_port}/v1/coffres",
            flush=True,
        )
        if settings.console:
            print(
                f"regulator's console: https://localhost:{settings.api_port}/console/ (log in with the "
                f"development token, the regulator-dev line of {tls.tokens_file})",
                flush=True,
            )
    if stack.dev_witness:
        print(
            f"witness (development, cosigns every checkpoint): {stack.dev_witness.url}, "
            f"its public key {stack.dev_witness.public_key}",
            flush=True,
        )


def _show_archive(settings: Settings, witness_key: Path | None = None) -> int:
    """Where the sealed archive is, the certificate that verifies it, and the verification's
    verdict (with the development witness's key: each coffre's newest checkpoint cosigned)."""
    from .adapters.archive import signing_files
    from .audit import verify_archive

    archive = settings.archive_root
    _, cert = signing_files(settings)
    witnessed = f" --witness-key {witness_key}" if witness_key else ""
    print(f"archive: {archive}\ncertificate: {cert}", flush=True)
    print(f"verify it: coffre verify {archive} --cert {cert}{witnessed}", flush=True)
    print(f"audit it: coffre audit {archive} --cert {cert} --html audit.html", flush=True)
    report = verify_archive(archive, [cert], witness_keys=[witness_key] if witness_key else ())
    for line in report.lines():
        print(f"  {line}", flush=True)
    return 0 if report.ok else 1


def cmd_restore(args: argparse.Namespace) -> int:
    """Rebuild the vault's journals from its archive (after losing its volume), then rewind
    its offsets so that what was recorded but not yet sealed is read again from Kafka."""
    import asyncio
    import datetime as dt

    from coffre_vault.restore import RestoreRefused, restore_journals, rewind

    from .config import load_settings

    settings = load_settings()
    setup_logging(settings.log_level, "text")
    owns = None  # vault replicas share every partition through their group
    try:
        coffres = restore_journals(settings, owns)
    except RestoreRefused as exc:
        print(f"coffre restore: {exc}", file=sys.stderr)
        return 1
    for c in coffres:
        what = "restored" if c.restored else "kept (a journal exists)"
        print(f"coffre {c.id_oper}/{c.id_coffre}: {c.lots} lot(s), IDEvt 1..{c.last_id_evt}: {what}")
    restored = [c for c in coffres if c.restored]
    if args.rewind == "none" or not restored:
        print("offsets left as they are" if restored else "nothing to restore")
        return 0
    since = None
    if args.rewind == "auto":
        seals = [c.last_sealed_at for c in restored if c.last_sealed_at is not None]
        margin = dt.timedelta(seconds=settings.lot_max_age_seconds + args.margin)
        since = min(seals) - margin if seals else None
    try:
        offsets = asyncio.run(rewind(settings, since, owns))
    except RestoreRefused as exc:
        print(f"coffre restore: the journals are restored, the offsets are not: {exc}", file=sys.stderr)
        return 1
    start = "the beginning" if since is None else since.isoformat(timespec="seconds")
    print(f"vault offsets on {settings.topics.normalized} rewound to {start}: {offsets}")
    return 0


def cmd_keygen(args: argparse.Namespace) -> int:
    """Write a signing key (0600) and its self-signed certificate."""
    from .adapters.keys import write_key_pair

    try:
        key, cert = write_key_pair(Path(args.out), args.name, args.algorithm, args.days)
    except FileExistsError as exc:
        print(f"coffre keygen: {exc} (a key is never overwritten)", file=sys.stderr)
        return 1
    print(f"key: {key}\ncertificate: {cert}")
    return 0


def cmd_witness_keygen(args: argparse.Namespace) -> int:
    """Write a witness's Ed25519 key (0600) and its public key, and print its vkey."""
    from .adapters.files import fsync_directory, write_new
    from .domain.witness import WitnessKey

    try:
        key = WitnessKey.generate(args.name)
    except ValueError as exc:
        print(f"coffre witness-keygen: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    private, public = out / "witness-key.pem", out / "witness-key.pub.pem"
    for path in (private, public):
        if path.exists():
            print(f"coffre witness-keygen: {path} exists (a key is never overwritten)", file=sys.stderr)
            return 1
    write_new(private, key.private_pem(), 0o600)
    write_new(public, key.public.pem(), 0o644)
    fsync_directory(out)
    print(f"key: {private}\npublic key: {public}\nvkey: {key.public.vkey}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Offline verification of an archive folder; exit 0 only when every check holds."""
    from datetime import timedelta

    from .adapters.witness_client import Unreachable, WitnessClient
    from .audit import verify_archive

    if not args.cert:
        print("coffre verify: name the certificate(s) you trust with --cert PEM", file=sys.stderr)
        return 2
    named_files = [
        *args.cert,
        *([args.checkpoint] if args.checkpoint else []),
        *args.tsa_cert,
        *args.witness_key,
        *([args.witness_ca] if args.witness_ca else []),
    ]
    for named in named_files:
        if not Path(named).is_file():
            print(f"coffre verify: no file {named}", file=sys.stderr)
            return 2
    if args.tsa_max_delay < 0:
        print("coffre verify: --tsa-max-delay is a number of seconds, at least 0", file=sys.stderr)
        return 2
    if args.jobs is not None and args.jobs < 1:
        print("coffre verify: --jobs must be 1 or more", file=sys.stderr)
        return 2
    from .audit_command import available_cpus

    witnessed = None
    if args.witness:
        try:
            client = WitnessClient(args.witness, ca=Path(args.witness_ca) if args.witness_ca else None)
            witnessed = client.checkpoints()
        except (ValueError, Unreachable) as exc:
            print(f"coffre verify: the witness {args.witness}: {exc}", file=sys.stderr)
            return 2
    try:
        report = verify_archive(
            Path(args.path),
            [Path(c) for c in args.cert],
            older_checkpoint=Path(args.checkpoint) if args.checkpoint else None,
            xsd_dir=Path(args.xsd) if args.xsd else None,
            tsa_certs=[Path(c) for c in args.tsa_cert],
            tsa_max_delay=timedelta(seconds=args.tsa_max_delay),
            witness_keys=[Path(k) for k in args.witness_key],
            witness=witnessed,
            witness_name=args.witness or "--witness",
            jobs=args.jobs if args.jobs is not None else available_cpus(),
        )
    except ValueError as exc:  # an unreadable --tsa-cert or --witness-key
        print(f"coffre verify: {exc}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


def cmd_console_index(args: argparse.Namespace) -> int:
    """Build the console's index of an archive folder (docs/console.md): brings an existing index up
    to date, or with ``--rebuild`` makes a new one from the archive alone and puts it in place."""
    import contextlib
    import time

    from coffre_regulator.event_index import Indexer, connect, rebuild

    from .adapters.storage import LocalStorage
    from .domain.signing import TrustStore

    if not args.cert:
        print("coffre console-index: name the certificate(s) you trust with --cert PEM", file=sys.stderr)
        return 2
    if not Path(args.path).is_dir():
        print(f"coffre console-index: no archive folder {args.path}", file=sys.stderr)
        return 2
    try:
        trust = TrustStore.from_pem_files(args.cert)
    except (OSError, ValueError) as exc:
        print(f"coffre console-index: {exc}", file=sys.stderr)
        return 2
    storage, index = LocalStorage(Path(args.path)), Path(args.index)
    started = time.monotonic()
    try:
        if args.rebuild:
            done = rebuild(index, storage, trust, jobs=args.jobs)
        else:
            with contextlib.closing(connect(index)) as db:
                indexer = Indexer(db, storage, trust, jobs=args.jobs)
                try:
                    done = indexer.catch_up()
                finally:
                    indexer.close()
    except (OSError, ValueError) as exc:
        print(f"coffre console-index: {exc}", file=sys.stderr)
        return 2
    print(f"{index}: {done.lots} lot(s), {done.events} event(s) added in {time.monotonic() - started:.1f} s")
    for reason in done.refused:
        print(f"refused: {reason}")
    return 1 if done.refused else 0


def cmd_proof(args: argparse.Namespace) -> int:
    """Print an RFC 9162 inclusion or consistency proof (JSON) from an archive that verifies."""
    from .audit import archive_proof

    if args.check:
        return _check_proof(args)
    oper, _, coffre = (args.coffre or "").partition("/")
    if args.path is None:
        print("coffre proof: name the archive (PATH), or a proof to check with --check FILE", file=sys.stderr)
        return 2
    if not coffre.isdigit() or (args.id_evt is None) == (args.since_size is None):
        print("coffre proof: --coffre IDOPER/IDCOFFRE and one of --id-evt or --since-size", file=sys.stderr)
        return 2
    try:
        proof = archive_proof(
            Path(args.path),
            [Path(c) for c in args.cert],
            oper,
            int(coffre),
            id_evt=args.id_evt,
            since_size=args.since_size,
        )
    except ValueError as exc:
        print(f"coffre proof: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(proof, indent=2))
    return 0


def _check_proof(args: argparse.Namespace) -> int:
    """``coffre proof --check FILE [--checkpoint XML --cert PEM]``: a saved proof checked offline,
    its roots against signed checkpoints when given."""
    from .domain.lot import LotFormatError, parse_document, read_checkpoint
    from .domain.proofs import check_proof
    from .domain.signing import SignatureInvalid, TrustStore, verify

    try:
        data = json.loads(Path(args.check).read_bytes())
    except (OSError, ValueError) as exc:
        print(f"coffre proof: {args.check}: {exc}", file=sys.stderr)
        return 2
    signed: dict[int, bytes] = {}
    if args.checkpoint and not args.cert:
        print("coffre proof: --checkpoint needs the certificate(s) you trust (--cert PEM)", file=sys.stderr)
        return 2
    trust = TrustStore.from_pem_files(args.cert) if args.cert else None
    for name in args.checkpoint:
        try:
            document = Path(name).read_bytes()
            unverified = read_checkpoint(parse_document(document))
            checkpoint = read_checkpoint(verify(document, trust, unverified.at))  # type: ignore[arg-type]
        except (OSError, LotFormatError, SignatureInvalid) as exc:
            print(f"coffre proof: {name}: {exc}", file=sys.stderr)
            return 1
        signed[checkpoint.tree_size] = checkpoint.tree_root
    kind, problems = check_proof(data, signed)
    for problem in problems:
        print(f"{args.check}: {problem}")
    if problems:
        return 1
    against = (
        f", against {len(signed)} signed checkpoint(s)"
        if signed
        else " (its roots are checked against nothing signed)"
    )
    print(f"{args.check}: {kind} proof: OK{against}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="coffre", description="coffre-fort for French licensed gambling operators"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("normalize", help="normalize events (XML or JSON files, or folders) and print them")
    p.add_argument("files", nargs="+", help="event files or folders; a file may hold several events")
    p.add_argument(
        "--format",
        choices=("canonical", "pretty", "json"),
        default="canonical",
        help="canonical: the exclusive-C14N bytes the vault hashes (default); pretty: indented XML; json",
    )
    p.add_argument(
        "--id-evt-start",
        type=int,
        default=None,
        metavar="N",
        help="assign IDEvt N, N+1, … to accepted events (as ingest does) instead of keeping the input's",
    )
    p.set_defaults(func=cmd_normalize)

    p = sub.add_parser("catalogue", help="list the event types coffre accepts")
    p.add_argument("--fields", action="store_true", help="also list each event's elements in schema order")
    p.set_defaults(func=cmd_catalogue)

    for name, text in (
        ("ingest", "run the ingest service (COFFRE_* variables configure it)"),
        ("vault", "run the vault service"),
        ("acquittal", "run the acquittal service"),
        (
            "regulator-api",
            "run the regulator's HTTPS API over the archive, read-only (its own ops port: COFFRE_OPS_PORT)",
        ),
        (
            "auditor",
            "run the auditor: every recorded event audited (poker hands replayed, money trails), "
            "findings to <prefix>audit",
        ),
        (
            "witness",
            "run the witness (the regulator runs it): cosigns each checkpoint that extends the one it "
            "cosigned before, over HTTPS (COFFRE_WITNESS_* variables)",
        ),
    ):
        p = sub.add_parser(name, help=text)
        p.set_defaults(func=cmd_service)

    p = sub.add_parser(
        "up", help="the whole stack on this machine: Apache Kafka, ingest, vault, acquittal, auditor"
    )
    p.add_argument(
        "--bootstrap", default=None, metavar="HOST:PORT", help="use this Kafka instead of starting one"
    )
    p.add_argument(
        "--broker",
        choices=("kafka", "tansu"),
        default="kafka",
        help="without --bootstrap: kafka, its own Apache Kafka on 127.0.0.1:$COFFRE_BROKER_PORT (9092), its "
        "log under the data folder (the default; the jars fetched once with Maven); tansu, the "
        "memory-only embedded broker, for a quick look where no JVM runs (everything lost at the stop, "
        "stalls within minutes under load)",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="publish the demo's events (shipped with coffre: the annex 1.4.3 examples' facts and a "
        "small tournament) and print each outcome; `coffre publish` publishes other files",
    )
    p.add_argument("--once", action="store_true", help="exit after the demo instead of running on")
    p.add_argument(
        "--ingest-replicas",
        type=int,
        choices=range(1, 9),
        default=1,
        metavar="N",
        help="ingest processes sharing the partitions of events.in (1 to 8, default 1)",
    )
    p.add_argument("--data", default=None, help="data folder (default: $COFFRE_DATA_DIR or var)")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser(
        "restore",
        help="rebuild the vault's journals from its archive after the loss of its volume (vault stopped)",
    )
    p.add_argument(
        "--rewind",
        choices=("auto", "earliest", "none"),
        default="auto",
        help="move the vault's offsets back so unsealed events are read again (default: auto, "
        "from the oldest last seal of the restored coffres minus COFFRE_LOT_MAX_AGE_SECONDS and a margin)",
    )
    p.add_argument(
        "--margin", type=float, default=300.0, help="seconds added to the auto rewind (default 300)"
    )
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser("keygen", help="a signing key and its self-signed certificate")
    p.add_argument("--out", required=True, help="folder for signing-key.pem and signing-cert.pem")
    p.add_argument("--algorithm", choices=("ecdsa", "rsa"), default="ecdsa", help="ECDSA P-256 or RSA 3072")
    p.add_argument("--days", type=int, default=3 * 365, help="validity of the certificate")
    p.add_argument("--name", default="coffre vault", help="the certificate's common name")
    p.set_defaults(func=cmd_keygen)

    p = sub.add_parser(
        "console-index",
        help="build or rebuild the regulator console's index of an archive folder (verified lots only)",
    )
    p.add_argument("path", help="the archive's root folder")
    p.add_argument(
        "--cert", action="append", default=[], metavar="PEM", help="a trusted certificate (repeatable)"
    )
    p.add_argument("--index", required=True, metavar="FILE", help="the index (an SQLite file)")
    p.add_argument(
        "--rebuild", action="store_true", help="a new index from the archive alone, put in place of FILE"
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes that read and check events (hands' replays) in parallel",
    )
    p.set_defaults(func=cmd_console_index)

    p = sub.add_parser(
        "witness-keygen", help="a witness's Ed25519 key and public key; prints its vkey (C2SP note verifier)"
    )
    p.add_argument("--name", required=True, help="the witness's name, e.g. witness.anj.example")
    p.add_argument("--out", required=True, help="folder for witness-key.pem and witness-key.pub.pem")
    p.set_defaults(func=cmd_witness_keygen)

    p = sub.add_parser(
        "verify", help="verify an archive offline: signatures, chain, IDEvt, Merkle roots, checkpoints"
    )
    p.add_argument("path", help="the archive's root, or a folder inside it")
    p.add_argument(
        "--cert", action="append", default=[], metavar="PEM", help="a trusted certificate (repeatable)"
    )
    p.add_argument(
        "--checkpoint", default=None, metavar="FILE", help="an older checkpoint the archive must extend"
    )
    p.add_argument(
        "--xsd", default=None, metavar="DIR", help="also validate every event against this schema folder"
    )
    p.add_argument(
        "--tsa-cert",
        action="append",
        default=[],
        metavar="PEM",
        help="a trusted TSA root (repeatable): every checkpoint needs a valid RFC 3161 token, each token is checked",
    )
    p.add_argument(
        "--tsa-max-delay",
        type=int,
        default=86400,
        metavar="SECONDS",
        help="how long after its checkpoint's Date a token may be (default 86400: one day)",
    )
    p.add_argument(
        "--witness-key",
        action="append",
        default=[],
        metavar="PEM",
        help="a witness's Ed25519 public key(s) (repeatable): each coffre's newest checkpoint must be "
        "cosigned by every one, each cosignature is checked",
    )
    p.add_argument(
        "--witness",
        default=None,
        metavar="URL",
        help="a witness (https://…): the archive must extend the newest checkpoint it cosigned per coffre",
    )
    p.add_argument("--witness-ca", default=None, metavar="PEM", help="the CA bundle of the witness's TLS")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="processes that verify the coffres, one coffre each at a time (default: the CPUs available; "
        "the report is the same whatever N)",
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "proof",
        help="an RFC 9162 inclusion proof for one IDEvt, or a consistency proof; or check one (--check)",
    )
    p.add_argument("path", nargs="?", help="the archive's root")
    p.add_argument(
        "--cert", action="append", default=[], metavar="PEM", help="a trusted certificate (repeatable)"
    )
    p.add_argument("--coffre", metavar="IDOPER/IDCOFFRE", help="for example 0099/1")
    p.add_argument("--check", metavar="FILE", help="check a saved proof (JSON) offline instead")
    p.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="XML",
        help="with --check: a signed checkpoint whose root the proof's must be (repeatable)",
    )
    p.add_argument("--id-evt", type=int, default=None, help="the event to prove the inclusion of")
    p.add_argument(
        "--since-size", type=int, default=None, help="prove the tree of this size is a prefix of today's"
    )
    p.set_defaults(func=cmd_proof)

    p = sub.add_parser(
        "audit",
        help="audit event files, folders or archives offline: each hand replayed, each money trail "
        "checked; findings listed (exit 1 when any), optionally as an HTML report",
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="event files (XML or JSON, one or several events each), folders of them, or archive folders",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p.add_argument("--html", default=None, metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument(
        "--cert",
        action="append",
        default=[],
        metavar="PEM",
        help="a certificate trusted to verify an archive (repeatable; needed when a PATH is an archive)",
    )
    p.add_argument(
        "--max-pictures",
        type=int,
        default=None,
        metavar="N",
        help="flagged hands drawn in the HTML report (default 200; the others are counted)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="processes that read, normalize and audit the events, the money trail kept in order "
        "(default: the CPUs available; 1 below 200 events; the output is the same whatever N)",
    )
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("publish", help="publish events and print each acquittal or rejection")
    p.add_argument("files", nargs="+", help="event files or folders (XML or JSON)")
    p.add_argument(
        "--bootstrap", default=None, metavar="HOST:PORT", help="Kafka (default: $COFFRE_BOOTSTRAP_SERVERS)"
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each outcome")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser(
        "annex-examples",
        help="extract the annex 1.4.3 example events from the annex text into a folder (a cross-check)",
    )
    p.add_argument(
        "--annex", default=None, help="the annex Markdown (default: $COFFRE_DET_ANNEX; there is no other)"
    )
    p.add_argument("--out", default="var/annex-examples", help="folder to write them to")
    p.set_defaults(func=cmd_annex_examples)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # output piped into `head`: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
