"""``coffre ingest|vault|acquittal|regulator-api|auditor|witness``: one service, configured by ``COFFRE_*``
variables, as Kubernetes runs it."""

from __future__ import annotations

import argparse
import signal

from coffre.logs import setup_logging


def run(args: argparse.Namespace) -> int:
    """``coffre ingest|vault|acquittal|regulator-api|auditor|witness``: one service, configured by COFFRE_* variables."""

    from coffre.config import load_settings

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
