"""``coffre up``: the whole stack on this machine (:mod:`coffre.commands.stack`), the demo's events
published and the auditor's findings shown, the archive verified at the end."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from coffre.config import Settings
from coffre.demo import DemoEvent

from .publish import submit_all
from .stack import Stack


def run(args: argparse.Namespace) -> int:
    """The whole stack on this machine (its own Apache Kafka unless --bootstrap). The settings and
    the demo's events are checked before anything starts (exit 2). SIGTERM, as Ctrl-C, stops it at
    any moment, the services first (they drain and commit), then the broker; SIGKILL takes every
    child with it (:mod:`coffre.adapters.lifeline`)."""
    import asyncio
    import signal
    import time

    from coffre.config import load_settings
    from coffre.demo import expected_findings

    overrides = {"data_dir": args.data} if args.data else {}
    settings = load_settings(**overrides)
    demo_events = packaged_demo() if args.demo else []
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
        show_stack(stack, bootstrap)
        if args.demo:
            print(
                f"demo: {len(demo)} events shipped with coffre: the annex 1.4.3 examples' facts, "
                "cash table CG-9 (one hand falsified on purpose), tournament T-77 (24 hands of mixed "
                "games played by pokerkit), then tournament T-42 from a deposit to a withdrawal",
                flush=True,
            )
            audit_from = asyncio.run(audit_start(bootstrap, settings))
            replayed = any(offset > 0 for offset in audit_from.values())  # the auditor flagged a run before
            failures = asyncio.run(submit_all(bootstrap, settings, demo, timeout=90.0, chain_digits=16))
            failures += asyncio.run(
                show_audit(bootstrap, settings, audit_from, expected, timeout=120.0, replayed=replayed)
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
        failures += show_archive(settings, stack.dev_witness.public_key if stack.dev_witness else None)
    return 0 if failures == 0 else 1


def show_stack(stack: Stack, bootstrap: str) -> None:
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


def show_archive(settings: Settings, witness_key: Path | None = None) -> int:
    """Where the sealed archive is, the certificate that verifies it, and the verification's
    verdict (with the development witness's key: each coffre's newest checkpoint cosigned)."""
    from coffre.adapters.archive import signing_files
    from coffre.commands.verify import verify_archive

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


def packaged_demo() -> list[DemoEvent]:
    """The packaged demo events; exit 2 if one does not normalize."""
    from coffre.demo import DemoEventError, load_demo

    try:
        return load_demo()
    except DemoEventError as exc:
        print("coffre up: the demo's events do not normalize:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        raise SystemExit(2) from None


async def audit_start(bootstrap: str, settings: Settings) -> dict[int, int]:
    """The audit topic's partitions and their end offsets now: the demo's records are those that
    come after (the stack created the topic at start-up)."""
    from aiokafka import TopicPartition

    from coffre.adapters.kafka import read_end_offsets, span_reader, topic_partitions
    from coffre.adapters.kafka_security import client_options

    async with span_reader(bootstrap, client_options(settings)) as consumer:
        partitions = await topic_partitions(consumer, settings.topics.audit)
        reported = await consumer.end_offsets([TopicPartition(settings.topics.audit, p) for p in partitions])
        ends = await read_end_offsets(consumer, reported)
        return {tp.partition: offset for tp, offset in ends.items()}


async def show_audit(
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

    from coffre.adapters.kafka import read_span, span_reader
    from coffre.adapters.kafka_security import client_options
    from coffre.adapters.keys import record_keys
    from coffre.domain.messages import AuditRecord, InvalidMessage

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
