"""``coffre witness``: the witness as a process of its own, run by the regulator.

Configured by ``COFFRE_WITNESS_*`` (docs/witness.md): its name and Ed25519 key, the operators'
signing certificates it trusts, its state folder, and its HTTPS address, certificate and key.
There is no development fallback: without a server certificate and key it does not start.
SIGTERM stops accepting connections and lets the answers in flight finish.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from coffre.adapters.stream import run_until_signalled
from coffre.adapters.tls import server_ssl_context
from coffre.config import Settings, configuration_error
from coffre.domain.signing import TrustStore
from coffre.domain.witness import WitnessKey, check_witness_name

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


def load_trust(settings: Settings) -> TrustStore:
    paths = [Path(p.strip()) for p in settings.witness_operator_certs.split(",") if p.strip()]
    if not paths:
        configuration_error(
            "COFFRE_WITNESS_OPERATOR_CERTS: the operators' signing certificates the witness trusts"
        )
    try:
        return TrustStore.from_pem_files(paths)
    except (OSError, ValueError) as exc:
        configuration_error(f"COFFRE_WITNESS_OPERATOR_CERTS: {exc}")


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
            "witness %s ready on https://%s:%d, state in %s, %d operator certificate(s) trusted; vkey %s",
            key.name,
            settings.witness_host,
            settings.witness_port,
            state.directory,
            len(trust),
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
