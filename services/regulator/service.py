"""``coffre regulator-api``: the regulator's HTTPS API as a process of its own.

It reads the vault's archive (the local folder, or the S3 bucket) and never writes to it, so it
runs beside the vault (a sidecar sharing its volume read-only) or anywhere the bucket is
readable, and nothing it does (an export of a large day, a proof over a large coffre, a slow
client) takes time from recording. It signs export manifests with the vault's signing key.

Its own ``/healthz``, ``/readyz`` (checks ``archive``: the archive can be listed now, and
``signing_key``: the signing certificate is valid today) and ``/metrics`` are on
``COFFRE_OPS_PORT``. SIGTERM stops accepting connections and lets the answers in flight finish
within ``COFFRE_SHUTDOWN_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable

from coffre.adapters.archive import older_certs
from coffre.adapters.keys import KeyFileError, load_signer
from coffre.adapters.stream import run_until_signalled
from coffre.config import Settings, configuration_error
from coffre.domain.signing import Signer, TrustStore
from coffre.ops import Ops, in_thread

from .api import start_regulator_api, stop_regulator_api
from .readonly import open_archive

log = logging.getLogger("coffre.api")

KEY_WAIT_SECONDS = 20.0
"""How long to wait, at start, for signing key files that are not there yet: beside a vault
that signs with its generated development key, the vault makes it at its own first start."""


def load_keys(settings: Settings, wait: float = KEY_WAIT_SECONDS) -> tuple[Signer, TrustStore]:
    """The signing key (for export manifests) and the certificates lots are checked against,
    read as they are: unlike the vault, this process never generates a key. Exit 2 when they
    cannot be read."""
    key, cert, _ = settings.key_paths
    deadline = time.monotonic() + wait
    announced = False
    while not (key.is_file() and cert.is_file()) and time.monotonic() < deadline:
        if not announced:
            log.warning(
                "regulator API: waiting up to %gs for the signing key %s and certificate %s", wait, key, cert
            )
            announced = True
        time.sleep(0.5)
    try:
        signer = load_signer(key, cert)
    except KeyFileError as exc:
        configuration_error(f"COFFRE_SIGNING_KEY, COFFRE_SIGNING_CERT: {exc}")
    try:
        trust = TrustStore.from_pem_files([cert, *older_certs(settings)])
    except (OSError, ValueError) as exc:
        configuration_error(f"COFFRE_TRUSTED_CERTS: {exc}")
    return signer, trust


def certificate_check(
    key: Signer, clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
) -> Callable[[], None]:
    """Readiness: the signing certificate is valid now (an export manifest signed outside its
    validity would not verify)."""

    def check() -> None:
        now = clock()
        cert = key.certificate
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            raise RuntimeError(
                f"the signing certificate is valid from {cert.not_valid_before_utc:%Y-%m-%d} "
                f"to {cert.not_valid_after_utc:%Y-%m-%d}"
            )

    return check


async def serve(
    settings: Settings, stop: asyncio.Event | None = None, *, key_wait: float = KEY_WAIT_SECONDS
) -> None:
    """Serve the API and the ops endpoints until ``stop`` is set."""
    stop = stop or asyncio.Event()
    if settings.api_port == 0:
        configuration_error(
            "COFFRE_API_PORT: coffre regulator-api serves the API over HTTPS: give it a port, not 0"
        )
    archive = open_archive(settings)
    key, trust = await asyncio.to_thread(load_keys, settings, key_wait)
    ops = Ops("regulator", settings)
    ops.add_check("archive", in_thread(archive.probe))
    ops.add_check("signing_key", in_thread(certificate_check(key)))
    try:
        api = await start_regulator_api(settings, archive, trust, key)
    except ValueError as exc:
        configuration_error(f"regulator API: {str(exc).removeprefix('regulator API: ')}")
    except OSError as exc:
        configuration_error(
            f"COFFRE_API_HOST, COFFRE_API_PORT: cannot listen on {settings.api_host}:{settings.api_port}: "
            f"{exc.strerror or exc}"
        )
    try:
        await ops.start()
        log.info("regulator API ready over the archive %s (read-only)", archive.where)
        await stop.wait()
        log.info("regulator API stopping: no new connection; answers in flight may finish")
    finally:
        await stop_regulator_api(api)
        await ops.stop()


def run(settings: Settings) -> None:
    """``coffre regulator-api``: until SIGTERM or SIGINT."""
    run_until_signalled(serve, settings)


__all__ = ["KEY_WAIT_SECONDS", "certificate_check", "load_keys", "run", "serve"]
