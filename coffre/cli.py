"""The ``coffre`` command line: its parser, and the dispatch to the command's module.

Each command's code is in :mod:`coffre.commands` (one module per command: ``coffre verify`` is
``coffre/commands/verify.py``), imported only when that command runs: importing the event catalogue
costs 0.3-1.2 s, which a restarted vault or acquittal service would pay before its first record
(issue 22: no wait after a hit). A subcommand names its module, and the function in it when not
``run`` (``keys:keygen``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence


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
    p.set_defaults(command_module="normalize")

    p = sub.add_parser("catalogue", help="list the event types coffre accepts")
    p.add_argument("--fields", action="store_true", help="also list each event's elements in schema order")
    p.set_defaults(command_module="catalogue")

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
        p.set_defaults(command_module="services")

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
    p.set_defaults(command_module="up")

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
    p.set_defaults(command_module="restore")

    p = sub.add_parser("keygen", help="a signing key and its self-signed certificate")
    p.add_argument("--out", required=True, help="folder for signing-key.pem and signing-cert.pem")
    p.add_argument("--algorithm", choices=("ecdsa", "rsa"), default="ecdsa", help="ECDSA P-256 or RSA 3072")
    p.add_argument("--days", type=int, default=3 * 365, help="validity of the certificate")
    p.add_argument("--name", default="coffre vault", help="the certificate's common name")
    p.set_defaults(command_module="keys:keygen")

    p = sub.add_parser(
        "console-index",
        help="build or rebuild the regulator console's index of an archive folder (verified lots only)",
    )
    p.add_argument("path", help="the archive's root folder")
    p.add_argument(
        "--cert", action="append", default=[], metavar="PEM", help="a trusted certificate (repeatable)"
    )
    p.add_argument(
        "--index",
        required=True,
        metavar="FILE|URL",
        help="the index: an SQLite file, or a PostgreSQL database (postgresql://user@host/db)",
    )
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="a new index from the archive alone, put in place of FILE (PostgreSQL: its tables made again)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes that read and check events (hands' replays) in parallel",
    )
    p.set_defaults(command_module="console_index")

    p = sub.add_parser(
        "witness-keygen", help="a witness's Ed25519 key and public key; prints its vkey (C2SP note verifier)"
    )
    p.add_argument("--name", required=True, help="the witness's name, e.g. witness.anj.example")
    p.add_argument("--out", required=True, help="folder for witness-key.pem and witness-key.pub.pem")
    p.set_defaults(command_module="keys:witness_keygen")

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
        help="processes that read and check the lots and checkpoints, a single coffre's too (default: "
        "the CPUs available; the report is the same whatever N)",
    )
    p.set_defaults(command_module="verify")

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
    p.set_defaults(command_module="proof")

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
    _report_options(p)
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
    p.set_defaults(command_module="audit.run")

    p = sub.add_parser(
        "signals",
        help="collusion and robot signals from event files, folders or archives (reasons to look, "
        "not findings): one person behind several seats, chip dumping, soft play, robots",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="event files or folders, or archive folders")
    _report_options(p)
    p.add_argument(
        "--console",
        default=None,
        metavar="URL",
        help="the regulator's console (https://host:port): the report links each evidence event to its "
        "page and its proof there (without: the coffre proof command that proves it)",
    )
    p.add_argument(
        "--state",
        default=None,
        metavar="FILE",
        help="keep the running statistics in FILE (gzip JSON): a later run reads only the events past it",
    )
    p.add_argument(
        "--oper", action="append", default=[], metavar="IDOPER", help="only this operator (repeatable)"
    )
    p.add_argument(
        "--since", default=None, metavar="DATE", help="only events from DATE (UTC, YYYY-MM-DD[THH:MM])"
    )
    p.add_argument("--until", default=None, metavar="DATE", help="only events before DATE (UTC)")
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="change a signal's threshold (repeatable; the names and defaults are in docs/signals.md)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="processes that read an archive's lots and compute the hands' equities (default: the CPUs "
        "available; the output is the same whatever N)",
    )
    p.set_defaults(command_module="signals")

    p = sub.add_parser("publish", help="publish events and print each acquittal or rejection")
    p.add_argument("files", nargs="+", help="event files or folders (XML or JSON)")
    p.add_argument(
        "--bootstrap", default=None, metavar="HOST:PORT", help="Kafka (default: $COFFRE_BOOTSTRAP_SERVERS)"
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each outcome")
    p.set_defaults(command_module="publish")

    p = sub.add_parser(
        "annex-examples",
        help="extract the annex 1.4.3 example events from the annex text into a folder (a cross-check)",
    )
    p.add_argument(
        "--annex", default=None, help="the annex Markdown (default: $COFFRE_DET_ANNEX; there is no other)"
    )
    p.add_argument("--out", default="var/annex-examples", help="folder to write them to")
    p.set_defaults(command_module="annex_examples")
    return parser


def _report_options(p: argparse.ArgumentParser) -> None:
    """What ``coffre audit`` and ``coffre signals`` share: their outputs and the archive's trust."""
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    p.add_argument("--html", default=None, metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument(
        "--cert",
        action="append",
        default=[],
        metavar="PEM",
        help="a certificate trusted to verify an archive (repeatable; needed when a PATH is an archive)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module, _, function = args.command_module.partition(":")
    command = getattr(importlib.import_module(f"coffre.commands.{module}"), function or "run")
    try:
        return int(command(args))
    except BrokenPipeError:  # output piped into `head`: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
