"""The regulator API and its console over a signed archive, on its own event loop in a thread, for
the console's tests (tests/test_console.py, tests/browser/test_console_browser.py)."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

from coffre_regulator import console
from coffre_regulator.api import start_regulator_api, stop_regulator_api

from coffre.adapters.storage import LocalStorage
from coffre.adapters.tls import api_tls_material
from coffre.config import Settings
from coffre.domain.signing import Signer, TrustStore, generate_key_and_certificate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ConsoleServer:
    """``coffre regulator-api`` over the archive at ``root`` (lots signed by ``cert``), token mode.
    With ``tokens`` (``name:token`` lines) the API reads them from a file; without, it makes its
    development material and token (as ``coffre up`` does). Started once its index caught up."""

    def __init__(self, tmp: Path, root: Path, cert: Path, tokens: str | None = None, **settings: Any) -> None:
        self.root, self.data = root, tmp / "data"
        self.tokens = tmp / "tokens"
        if tokens is not None:
            self.tokens.write_text(tokens)
        self.settings = Settings(
            data_dir=self.data,
            archive_dir=root,
            api_host="127.0.0.1",
            api_port=free_port(),
            api_auth="token",
            api_tokens_file=self.tokens if tokens is not None else None,
            console_index_interval_seconds=0.2,
            **settings,
        )
        key, signing_cert = generate_key_and_certificate("console test", "ecdsa")
        self.trust = TrustStore.from_pem_files([cert])
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner = asyncio.run_coroutine_threadsafe(
            start_regulator_api(
                self.settings, LocalStorage(root), self.trust, Signer.from_pem(key, signing_cert)
            ),
            self.loop,
        ).result(30)
        self.base = f"https://127.0.0.1:{self.settings.api_port}"
        index = self.runner.app[console._CONSOLE].thread
        assert index is not None and index.caught_up.wait(60), "the console's index never caught up"

    def development_token(self) -> str:
        development = api_tls_material(self.settings).development
        assert development is not None, "no TLS certificate given: the development material serves"
        return development.token()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(stop_regulator_api(self.runner), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
