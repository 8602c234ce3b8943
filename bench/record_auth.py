"""What authenticating coffre's own records costs per record, measured side by side in one run.

Each normalized event, copy, rejection, receipt and snapshot carries an HMAC-SHA256 tag
(``coffre/domain/authenticity.py``); ingest tags, the vault verifies and tags the receipt, the
acquittal service verifies. Compared with building the record's headers alone (the work that was
there before) and with an Ed25519 signature, the alternative docs/architecture.md weighs.

    .venv/bin/python bench/record_auth.py               # 20,000 records of 600 and 2,000 bytes
    .venv/bin/python bench/record_auth.py --records 5000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from coffre.domain.authenticity import Purpose, RecordKeys
from coffre.domain.messages import NormalizedEvent


def per_record(work: Callable[[], object], records: int) -> float:
    """The best of three runs, in microseconds per record (the machine is shared: the least disturbed run)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(records):
            work()
        best = min(best, time.perf_counter() - started)
    return best / records * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    records = parser.parse_args().records
    keys = RecordKeys.parse(RecordKeys.new_key_line("bench"))
    signer = Ed25519PrivateKey.generate()
    print(f"{records} records each, best of 3, microseconds per record")
    print(
        f"{'value':>6} {'headers':>8} {'hmac tag':>9} {'hmac check':>11} {'ed25519 sign':>13} {'ed25519 check':>14}"
    )
    for size in (600, 2000):
        measure(size, records, keys, signer)


def headers() -> list:
    return NormalizedEvent.headers_of([("correlation-id", b"req-1")], "POINSCRIT", "0099", 7, 12, False, 1.0)


def measure(size: int, records: int, keys: RecordKeys, signer: Ed25519PrivateKey) -> None:
    value = b"<POINSCRIT>" + b"x" * (size - 25) + b"</POINSCRIT>"
    tagged = keys.seal(Purpose.NORMALIZED, b"7", value, headers())
    signature = signer.sign(value)
    public = signer.public_key()
    base = per_record(headers, records)
    tag = per_record(lambda: keys.seal(Purpose.NORMALIZED, b"7", value, headers()), records) - base
    check = per_record(lambda: keys.authentic(Purpose.NORMALIZED, b"7", value, tagged), records)
    sign = per_record(lambda: signer.sign(value), records // 4)
    verify = per_record(lambda: public.verify(signature, value), records // 4)
    print(f"{size:>6} {base:>8.1f} {tag:>9.1f} {check:>11.1f} {sign:>13.1f} {verify:>14.1f}")
    print(
        f"       a tag costs {tag / base:.1f}x building the headers; Ed25519 would cost "
        f"{sign / tag:.0f}x the tag to sign and {verify / check:.0f}x the check to verify"
    )


if __name__ == "__main__":
    main()
