"""``coffre witness``: the witness as a process of its own, run by the regulator.

Configured by ``COFFRE_WITNESS_*`` (docs/witness.md): its name and Ed25519 key, the operators'
signing certificates it trusts, its state folder, and its HTTPS address, certificate and key.
There is no development fallback: without a server certificate and key it does not start.
SIGTERM stops accepting connections and lets the answers in flight finish.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

from cryptography import x509

from coffre.adapters.stream import run_until_signalled
from coffre.adapters.tls import server_ssl_context
from coffre.config import Settings, configuration_error
from coffre.domain.signing import TrustStore
from coffre.domain.witness import OperatorTrust, WitnessKey, check_witness_name

from .server import Metrics, Witness, start, stop
from .state import StateLocked, WitnessState

log = logging.getLogger("coffre.witness")

__all__ = ["load_witness_key", "run", "serve", "state_dir"]


def state_dir(settings: Settings) -> Path:
    return settings.witness_state_dir or Path(settings.data_dir) / "witness"


def load_witness_key(settings: Settings) -> WitnessKey:
    """The witness's name and key, or exit 2 naming the variable."""
    if not settings.witness_name:
        configuration_error("COFFRE_WITNESS_NAME: the witness needs a name (e.g. witness.anj.example)")
    try:
        check_witness_name(settings.witness_name)
    except ValueError as exc:
        configuration_error(f"COFFRE_WITNESS_NAME: {exc}")
    if settings.witness_key is None:
        configuration_error("COFFRE_WITNESS_KEY: the witness's Ed25519 key (see coffre witness-keygen)")
    try:
        return WitnessKey.from_pem(settings.witness_name, settings.witness_key.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        configuration_error(f"COFFRE_WITNESS_KEY: cannot read {settings.witness_key}: {exc}")


def load_trust(settings: Settings) -> OperatorTrust:
    """``COFFRE_WITNESS_OPERATOR_CERTS``: comma-separated PEM paths, each ``IDOper=path`` (that
    file's certificates sign only that operator's checkpoints) or a bare ``path`` (any operator's:
    a witness of one operator)."""
    anyone: list[x509.Certificate] = []
    by_oper: dict[str, list[x509.Certificate]] = {}
    entries = [entry.strip() for entry in settings.witness_operator_certs.split(",") if entry.strip()]
    if not entries:
        configuration_error(
            "COFFRE_WITNESS_OPERATOR_CERTS: the operators' signing certificates the witness trusts"
        )
    for entry in entries:
        oper, bound, path = entry.partition("=")
        if bound and not re.fullmatch(r"[0-9]{4}", oper):
            configuration_error(
                f"COFFRE_WITNESS_OPERATOR_CERTS: {entry!r}: an IDOper is 4 digits (0099=path)"
            )
        try:
            certificates = list(TrustStore.from_pem_files([Path(path if bound else oper)]))
        except (OSError, ValueError) as exc:
            configuration_error(f"COFFRE_WITNESS_OPERATOR_CERTS: {exc}")
        (by_oper.setdefault(oper, []) if bound else anyone).extend(certificates)
    return OperatorTrust(tuple(anyone), {oper: tuple(certs) for oper, certs in by_oper.items()})


async def serve(settings: Settings, stop_event: asyncio.Event | None = None) -> None:
    """Serve the witness until ``stop_event`` is set."""
    stop_event = stop_event or asyncio.Event()
    if settings.witness_tls_cert is None or settings.witness_tls_key is None:
        configuration_error(
            "COFFRE_WITNESS_TLS_CERT, COFFRE_WITNESS_TLS_KEY: the witness serves HTTPS only and has no "
            "development certificate: give it its server certificate and key"
        )
    key = load_witness_key(settings)
    trust = load_trust(settings)
    try:
        context = server_ssl_context(settings.witness_tls_cert, settings.witness_tls_key, None)
    except ValueError as exc:
        configuration_error(
            f"COFFRE_WITNESS_TLS_CERT, COFFRE_WITNESS_TLS_KEY: {str(exc).removeprefix('regulator API: ')}"
        )
    try:
        state = WitnessState(state_dir(settings))
    except StateLocked as exc:
        configuration_error(f"COFFRE_WITNESS_STATE_DIR: {exc}")
    except (OSError, ValueError) as exc:
        configuration_error(
            f"COFFRE_WITNESS_STATE_DIR: cannot open the state in {state_dir(settings)}: {exc}"
        )
    try:
        witness = Witness(key, trust, state, Metrics())
        try:
            runner = await start(witness, settings.witness_host, settings.witness_port, context)
        except OSError as exc:
            configuration_error(
                f"COFFRE_WITNESS_HOST, COFFRE_WITNESS_PORT: cannot listen on "
                f"{settings.witness_host}:{settings.witness_port}: {exc.strerror or exc}"
            )
        log.info(
            "witness %s ready on https://%s:%d, state in %s, operator certificates trusted: %s; vkey %s",
            key.name,
            settings.witness_host,
            settings.witness_port,
            state.directory,
            trust.describe(),
            key.public.vkey,
        )
        try:
            await stop_event.wait()
            log.info("witness stopping: no new connection; answers in flight may finish")
        finally:
            await stop(runner)
    finally:
        state.close()


def run(settings: Settings) -> None:
    """``coffre witness``: until SIGTERM or SIGINT."""
    run_until_signalled(serve, settings)
