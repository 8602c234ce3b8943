"""A regulator's client for ``bench/pipeline.py``'s regulator phase, run as its own process.

    python bench/_regulator_client.py --port P --ca CA.pem --seconds S [--proofs 100] [--day YYYY-MM-DD]

The bearer token is read from the environment variable ``COFFRE_BENCH_TOKEN`` (not the command
line, which ``ps`` shows). Over TLS on 127.0.0.1:P, it first asks ``GET /v1/coffres`` until the
API answers (the sealed IDEvt of each coffre), prints ``ready`` on a line of its own, then for S
seconds, in a loop: downloads the day's export (``GET /v1/exports/{day}``, a new connection, the
body read and dropped), asks ``--proofs`` inclusion proofs
(``GET /v1/coffres/{oper}/{coffre}/events/{IDEvt}/proof``, one keep-alive connection, sealed
IDEvt drawn at random), then ``GET /v1/coffres`` again (what was sealed since). At least one
download and one whole batch of proofs are made, however short S is; after that the deadline is
checked before each request. At the end it prints one JSON object (timings in seconds and
milliseconds, statuses) on a line of its own.

Only the standard library: this process's CPU is the client's, not coffre's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import random
import ssl
import sys
import time
from collections.abc import Sequence
from typing import Any

TOKEN_VARIABLE = "COFFRE_BENCH_TOKEN"
CHUNK = 1 << 20


class Client:
    def __init__(self, port: int, ca: str, token: str, timeout: float):
        self.port = port
        self.context = ssl.create_default_context(cafile=ca)
        self.headers = {"Authorization": f"Bearer {token}", "User-Agent": "coffre-bench"}
        self.timeout = timeout
        self._connection: http.client.HTTPSConnection | None = None

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=self.timeout)

    def get(self, path: str, *, keep_alive: bool = True) -> tuple[int, int, bytes]:
        """(status, body bytes, the body when under 1 MB) of ``GET path``."""
        connection = self._connection if keep_alive and self._connection else self.connect()
        try:
            connection.request("GET", path, headers=self.headers)
            response = connection.getresponse()
            size = 0
            kept = bytearray()
            while chunk := response.read(CHUNK):
                size += len(chunk)
                if len(kept) < CHUNK:
                    kept += chunk
            if response.will_close or not keep_alive:
                connection.close()
                if connection is self._connection:
                    self._connection = None
            elif keep_alive:
                self._connection = connection
            return response.status, size, bytes(kept)
        except BaseException:
            connection.close()
            if connection is self._connection:
                self._connection = None
            raise

    def close(self) -> None:
        if self._connection:
            self._connection.close()
            self._connection = None


def sealed(client: Client, ready_timeout: float) -> list[dict[str, Any]]:
    """``GET /v1/coffres``' coffres, retried until the API answers 200."""
    deadline = time.monotonic() + ready_timeout
    while True:
        try:
            status, _, body = client.get("/v1/coffres", keep_alive=False)
            if status == 200:
                return list(json.loads(body)["coffres"])
            problem = f"status {status}: {body[:200]!r}"
        except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise SystemExit(
                f"regulator API on port {client.port} not ready after {ready_timeout:.0f} s: {problem}"
            )
        time.sleep(0.2)


def listing(coffres: list[dict[str, Any]], day: str | None) -> tuple[str, list[tuple[str, int, int]]]:
    """(the export's day, [(IDOper, IDCoffre, sealed IDEvt)]) from ``GET /v1/coffres``' answer."""
    days = sorted(c["last_sealed_day"] for c in coffres if c.get("last_sealed_day"))
    day = day or (days[-1] if days else dt.datetime.now(dt.UTC).date().isoformat())
    return day, [
        (c["id_oper"], int(c["id_coffre"]), int(c["events"])) for c in coffres if int(c["events"]) > 0
    ]


def run(args: argparse.Namespace, token: str) -> dict[str, Any]:
    client = Client(args.port, args.ca, token, args.request_timeout)
    day, targets = listing(sealed(client, args.ready_timeout), args.day)
    draw = random.Random(11)
    print("ready", flush=True)
    cpu_began = time.process_time()

    out: dict[str, Any] = {
        "day": day,
        "sealed_events_at_start": sum(t[2] for t in targets),
        "listings": 0,
        "downloads": [],  # [seconds, bytes, status]
        "proofs_ms": [],
        "proof_batches_s": [],  # whole batches only
        "statuses": {},
        "failures": [],
    }
    statuses: dict[str, int] = out["statuses"]

    def note(status: int, what: str, body: bytes) -> None:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if status != 200 and len(out["failures"]) < 5:
            out["failures"].append(f"{what}: status {status}: {body[:200]!r}")

    deadline = time.monotonic() + args.seconds
    first = True
    try:
        while first or time.monotonic() < deadline:
            if not first:  # what was sealed since: a regulator polls the listing
                status, _, body = client.get("/v1/coffres")
                note(status, "/v1/coffres", body)
                out["listings"] += 1
                if status == 200:
                    day, targets = listing(json.loads(body)["coffres"], args.day)
            began = time.perf_counter()
            status, size, body = client.get(f"/v1/exports/{day}", keep_alive=False)
            out["downloads"].append([time.perf_counter() - began, size, status])
            note(status, f"export {day}", body)
            if not targets:
                first = False
                continue
            batch_began = time.perf_counter()
            whole = True
            for _ in range(args.proofs):
                if not first and time.monotonic() >= deadline:
                    whole = False
                    break
                oper, coffre, events = draw.choice(targets)
                path = f"/v1/coffres/{oper}/{coffre}/events/{draw.randint(1, events)}/proof"
                began = time.perf_counter()
                status, _, body = client.get(path)
                out["proofs_ms"].append((time.perf_counter() - began) * 1000)
                note(status, path, body)
            if whole:
                out["proof_batches_s"].append(time.perf_counter() - batch_began)
            first = False
    except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
        out["failures"].append(f"{type(exc).__name__}: {exc}")
    client.close()
    if not out["proofs_ms"]:
        out["failures"].append("no sealed event in the archive: no proof asked")
    out["day"] = day
    out["sealed_events_at_end"] = sum(t[2] for t in targets)
    out["cpu_s"] = time.process_time() - cpu_began
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True, help="PEM CA bundle the server certificate chains to")
    parser.add_argument("--seconds", type=float, required=True, help="how long the loop runs")
    parser.add_argument("--proofs", type=int, default=100, help="inclusion proofs per round")
    parser.add_argument("--day", help="the export's day (default: the newest seal day the API lists)")
    parser.add_argument("--ready-timeout", type=float, default=30.0)
    parser.add_argument("--request-timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_VARIABLE, "")
    if not token:
        parser.error(f"{TOKEN_VARIABLE} is not set")
    print(json.dumps(run(args, token)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
