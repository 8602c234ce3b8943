"""The regulator console's search: time to the first page over a big synthetic index (console issue).

    .venv/bin/python bench/console_search.py [--events 1000000] [--path /tmp/console.sqlite]
        [--coffres 8] [--days 730] [--players 200000] [--repeats 5] [--json]

The target: "a search over 100 million events answers its first page in under 200 ms".

The index is synthetic, written DIRECTLY with SQL into the schema that
:func:`services.regulator.event_index.connect` creates (no archive, no verification, no audit): the
same columns and the same words in ``event_text`` as ``Indexer._add_event`` writes. To build fast,
the secondary indexes of the schema are dropped during the build and made again at the end (by
running the schema's own ``CREATE INDEX IF NOT EXISTS``), rows go in with ``executemany`` in big
transactions, and ``PRAGMA synchronous = OFF`` and ``journal_mode = OFF`` are set for the build only
(``journal_mode`` is put back to WAL after). ``--path`` keeps the index and reuses it when it holds
the same ``--events`` (and shape); without it the index is in a temporary folder, removed after.

Its shape is an operator's: ``--coffres`` coffres of one IDOper (``BENCHOP``), IDEvt 1..n in each,
dates in order over ``--days`` days; types mixed (POJEU 60 %, POINSCRIT 10 %, POACHAT / POGAIN /
POBILAN 10 %, CPTEALIM / CPTERETRAIT / CPTEBONUS / CPTEMODIF 20 %); ``--players`` players drawn
log-uniformly (Zipf, s = 1: player J1 is in about 6 % of the parties, most are rare); a POJEU has 2
to 9 parties (``parties`` rows, chips before and after, seat), the others one (with a HashJoueur);
about N/200 Tech values (cash tables ``C…`` and tournaments ``T…``, each played over a stretch of
time); a Pool per hand; an Inscription per registration (POINSCRIT to a tournament; the player's
hands in that tournament carry it); findings on about 0.5 % of the events, 10 codes skewed
(``findings``, ``flags`` and ``finding_days`` rows); lots of 1000 events per coffre (``lots``,
``lot_days``, ``coffres`` rows); free text on the account events (a few French words).

Then, for each kind of search, the time to the FIRST page (50 rows) is measured through
:class:`EventSearch` itself (its choice of index, its players of each row): "cold" is a new
``EventSearch`` (a new connection, SQLite's cache empty) after the index file's pages were evicted
from the OS page cache (``posix_fadvise(DONTNEED)``: every page read comes from the disk), "warm"
the median of ``--repeats`` more on that connection. Two kinds also go to their 2nd page with the
cursor of the first. The table gives the driving index (``Page.driver``), the rows of the page, the
milliseconds cold and warm, and whether both are under 200 ms.

Measured on this machine (2 shared cores, SQLite 3.40.1, the machine otherwise quiet; ms to the
first page of 50 rows, "cold" from the disk as said above): 1M events built in 58 s, 735 MB; 10M in
506 s, 7,431 MB; 30M in 1,688 s (28 min), 22,641 MB. That is about 750 bytes an event: 100M would
need about 75 GB and some 95 minutes, more than this machine's free disk, so it was not built. The
first page does not grow with the index: each search reads the first rows of one index (a B-tree
lookup, logarithmic in N), at most SCAN_WINDOW (5,000) rows of it, and its 50 events.

    search                     driver       1M cold  warm 10M cold  warm 30M rows   cold  warm  page (30M)
    player (busy)              IDJoueur         3.7   0.8      4.1   0.9       50    3.8   0.8  whole
    player (busy), page 2      IDJoueur         1.9   1.0      2.6   1.1       50    1.9   1.0  whole
    player (rare)              IDJoueur         1.5   0.0      2.8   0.1       23    9.1   0.3  whole
    HashJoueur                 HashJoueur       5.4   0.2     52.8   0.9       50   14.7   0.6  whole
    Inscription                Inscription      1.3   0.0      7.5   0.1        1    1.4   0.0  whole
    Tech (cash table)          Tech             5.4   0.7      6.5   0.7       50    3.3   0.7  whole
    Tech (tournament)          Tech             4.1   0.7      5.2   0.7       50    4.2   0.7  whole
    Pool                       Pool             1.4   0.0      1.9   0.0        1    1.4   0.0  whole
    finding                    finding         13.2   0.7     16.7   0.8       50   11.7   0.8  whole
    finding (rarest code)      finding         15.5   0.6     16.9   0.7       50   14.7   0.7  whole
    type POINSCRIT             type             3.7   0.7      4.6   1.4       50    3.6   0.7  whole
    type POINSCRIT, page 2     type             1.8   0.9      3.6   1.8       50    1.8   0.9  whole
    date (one day)             date             2.8   0.7      4.8   1.0       50    2.6   0.8  whole
    coffre + IDEvt range       IDEvt            3.4   0.8      3.6   0.8       50    3.0   0.8  whole
    oper + coffre + IDEvt      IDEvt            3.4   0.8      2.9   0.8       50    3.0   0.8  whole
    text (rare word)           text            14.4   0.7     16.2   0.7       50   14.3   0.8  whole
    text (common word)         text             6.1   0.8      6.7   0.8       50    5.8   0.8  whole
    player + type              IDJoueur        61.5   6.0     18.6   3.3       50   15.3   3.0  whole
    player (rare) + type       IDJoueur         6.1   1.1      4.5   0.9       20   10.9   1.1  whole
    player + date (day)        IDJoueur         4.9   0.8      5.0   1.5       50    5.3   2.1  whole
    finding + date (day)       finding          2.1   0.1      8.9   0.9       50   11.9   1.6  whole
    type + date (day)          type             4.1   0.7      5.5   1.4       50    5.1   1.8  whole
    type + coffre              IDEvt           17.7   3.9     13.7   3.1       50   14.7   3.1  whole
    type + Tech                Tech            11.4   2.3     11.5   1.6       50    9.4   2.3  whole
    player + Inscription       Inscription      5.3   1.4      4.3   0.9        0    4.7   1.3  whole
    finding + type             finding         21.6   3.3     35.6   2.7       50   34.9   4.2  whole
    player + Tech              Tech            12.6   2.1     11.3   1.5       30   12.8   1.3  whole
    player + type (none)       type             3.7   0.9      3.3   0.8        0    3.4   0.8  whole
    player + finding           finding        117.2   2.5    123.9   3.0       50   61.5   3.1  whole
    player + finding, page 2   finding         95.2   3.4     98.7   5.4       50   63.0   3.7  whole
    type + word (none)         text            18.2   3.9     20.6   4.3        0   18.7   4.1  window ended
    type + word (none), page 2 text            16.9   5.5     16.7   6.2        0   10.8   4.2  window ended

"page" says whether the page ended because the scan window did (the next page goes on). Before the
window was 5,000 rows (20,000, then none), the two worst cases ("player + finding", "type + word
(none)") took 0.7 to 1.7 s from a cold disk at 1M to 30M events, and with no window the busiest
player combined with a type he never plays read all of his 1.8M rows (736 ms warm at 10M).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _page_cache import evict
from coffre_regulator.event_index import (
    _SCHEMA,
    POSTGRESQL,
    SQLITE,
    TABLES,
    Dialect,
    EventSearch,
    IndexDB,
    Query,
    at_text,
    connect,
    seconds,
    words,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from postgres import LocalPostgres, bindir  # the tests' server (tests/postgres.py)

TARGET_MS = 200.0
OPER = "BENCHOP"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
LOT = 1000
SHAPE = "2"
"""Bumped when the synthetic data changes: an index kept with --path of another shape is rebuilt."""

TYPES = (
    ["POJEU"] * 60
    + ["POINSCRIT"] * 10
    + ["POACHAT"] * 4
    + ["POGAIN"] * 3
    + ["POBILAN"] * 3
    + ["CPTEALIM"] * 8
    + ["CPTERETRAIT"] * 5
    + ["CPTEBONUS"] * 4
    + ["CPTEMODIF"] * 3
)
CODES = [
    ("FORCED_BETS_WRONG", 30),
    ("BALANCE_CHAIN_BROKEN", 20),
    ("BET_ILLEGAL", 12),
    ("TIMESTAMP_OUT_OF_ORDER", 10),
    ("REFUND_MISMATCH", 8),
    ("BLIND_DODGED", 7),
    ("POOL_REUSED", 5),
    ("REGISTRATION_NEVER_SETTLED", 4),
    ("STARTING_STACK_WRONG", 3),
    ("REENTRY_FORBIDDEN", 1),
]
CODE_DRAW = [code for code, weight in CODES for _ in range(weight)]
WORDS = ["virement", "carte", "bancaire", "bonus", "bienvenue", "retrait", "plafond", "compte", "offre"]
RARE_WORD = "chargeback"
FINDING_RATE = 0.005

COLUMNS = {
    "events": "row, oper, coffre, id_evt, type, at, lot, tech, pool, inscription, forced, findings",
    "parties": "row, player, hash, inscription, seat, before, after, at",
    "findings": "row, n, code, message, round, seat, player",
    "flags": "code, at, row",
    "lots": "oper, coffre, number, first_id, last_id, key, digest, sealed_at",
    "lot_days": "day, oper, coffre, lots, events",
    "finding_days": "day, code, count",
    "coffres": "oper, coffre, lots, events, lot_digest, chain, frontier, sealed_at, refused",
}


@dataclass
class Built:
    target: Path | str
    events: int
    seconds: float
    reused: bool
    probes: dict[str, Any]


# -- building -------------------------------------------------------------------------------------


def _index_names() -> list[str]:
    return [line.split()[5] for line in _SCHEMA.splitlines() if line.startswith("CREATE INDEX IF NOT EXISTS")]


class Sink:
    """Where the synthetic rows go: the index's own tables, through :class:`IndexDB` (SQLite:
    ``executemany`` with the build's pragmas; PostgreSQL: ``COPY``). The secondary indexes are
    dropped for the build and made again at its end by the schema's own statements."""

    def __init__(self, db: IndexDB) -> None:
        self.db, self.dialect = db, db.dialect
        if self.dialect is SQLITE:
            for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -524288"):
                db.raw.execute(f"PRAGMA {pragma}")
        names = _index_names() + (["event_text_body"] if self.dialect is POSTGRESQL else [])
        for name in names:
            db.execute(f"DROP INDEX IF EXISTS {name}")

    def write(self, tables: dict[str, list[tuple[Any, ...]]]) -> None:
        """Rows of each table (``text``: (row, the event's words as one string)), in one transaction."""
        dialect: Dialect = self.dialect
        text = [(row, dialect.text_body(words(body))) for row, body in tables.pop("text", [])]
        if self.dialect is SQLITE:
            raw = self.db.raw
            raw.execute("BEGIN")
            for table, rows in tables.items():
                marks = ", ".join("?" * len(COLUMNS[table].split(",")))
                raw.executemany(f"INSERT INTO {table} ({COLUMNS[table]}) VALUES ({marks})", rows)
            raw.executemany("INSERT INTO event_text (rowid, body) VALUES (?, ?)", text)
            raw.execute("COMMIT")
            return
        raw = self.db.raw
        with raw.transaction(), raw.cursor() as cursor:
            for table, rows in [*tables.items(), ("event_text", text)]:
                columns = COLUMNS.get(table, "row, body")
                with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for values in rows:
                        copy.write_row(values)

    def finish(self) -> None:
        """The secondary indexes made over all the rows; PostgreSQL's statistics and visibility map
        made as autovacuum would (its index-only scans need the map)."""
        for statement in self.dialect.schema():
            if statement.strip().startswith("CREATE INDEX"):
                self.db.execute(statement)
        if self.dialect is POSTGRESQL:
            self.db.raw.execute("VACUUM (ANALYZE)")


def _read_meta(target: Path | str) -> dict[str, Any] | None:
    try:
        with closing(connect(target, readonly=True)) as db:
            found = db.execute("SELECT value FROM meta WHERE key = 'bench'").fetchone()
    except Exception:
        return None
    return None if found is None else json.loads(found[0])


def build(target: Path | str, events: int, coffres: int, days: int, players: int, seed: int = 7) -> Built:
    """The synthetic index at ``target`` (reused when it already holds this shape)."""
    from coffre_regulator.event_index import drop

    shape = json.dumps(
        {"shape": SHAPE, "events": events, "coffres": coffres, "days": days, "players": players, "seed": seed}
    )
    if isinstance(target, str) or target.exists():
        stored = _read_meta(target)
        if stored is not None and stored["shape"] == shape:
            return Built(target, events, stored["seconds"], True, stored["probes"])
        drop(target)
    started = time.monotonic()
    rng = random.Random(seed)
    db = connect(target)
    sink = Sink(db)
    t0 = seconds(T0)
    hashes = [""] + [hashlib.sha256(f"joueur {k}".encode()).hexdigest()[:32] for k in range(1, players + 1)]
    span = days * 86400
    techs = max(events // 200, 4)
    party_count: Counter[int] = Counter()
    codes_count: Counter[str] = Counter()
    next_id = [0] * (coffres + 1)
    lot_of = [1] * (coffres + 1)
    in_lot = [0] * (coffres + 1)
    lot_days: Counter[tuple[int, int]] = Counter()
    lot_day_events: Counter[tuple[int, int]] = Counter()
    finding_days: Counter[tuple[int, str]] = Counter()
    ev_rows: list[tuple[Any, ...]] = []
    party_rows: list[tuple[Any, ...]] = []
    finding_rows: list[tuple[Any, ...]] = []
    flag_rows: list[tuple[Any, ...]] = []
    text_rows: list[tuple[Any, ...]] = []
    lot_rows: list[tuple[Any, ...]] = []
    probes: dict[str, Any] = {}
    log_players = players  # k = int(players ** u): P(k) ~ 1/k

    def player() -> int:
        return min(int(log_players ** rng.random()), players)

    def flush() -> None:
        sink.write(
            {
                "events": ev_rows,
                "parties": party_rows,
                "findings": finding_rows,
                "flags": flag_rows,
                "lots": lot_rows,
                "text": text_rows,
            }
        )
        for rows in (ev_rows, party_rows, finding_rows, flag_rows, text_rows, lot_rows):
            rows.clear()

    for row in range(1, events + 1):
        at = t0 + (row - 1) * span // events + rng.randrange(max(span // events, 1))
        day = at - at % 86400
        coffre = rng.randrange(coffres) + 1
        next_id[coffre] += 1
        id_evt = next_id[coffre]
        kind = TYPES[rng.randrange(100)]
        # a Tech is played over a stretch of the archive: ~200 events each
        tech_n = min(row * techs // events + rng.randrange(40), techs - 1)
        tech = pool = inscription = forced = None
        said = [kind, OPER, str(coffre), str(id_evt)]
        if kind == "POJEU":
            tech = f"C{tech_n}" if tech_n % 4 else f"T{tech_n}"
            pool = f"P{row}"
            forced = "10/20" if tech[0] == "C" else "50/100"
            seen: set[int] = set()
            for seat in range(1, rng.randrange(2, 10) + 1):
                k = player()
                if k in seen:
                    continue
                seen.add(k)
                party_count[k] += 1
                name = f"J{k}"
                reg = f"{tech}-{name}" if tech[0] == "T" else None
                before = rng.randrange(100, 10000)
                party_rows.append((row, name, None, reg, str(seat), f"{before}.00", f"{before - 20}.00", at))
                said += [name, reg or ""]
        else:
            k = player()
            party_count[k] += 1
            name = f"J{k}"
            if kind == "POINSCRIT":
                tech = f"T{tech_n - tech_n % 4}"
                inscription = f"{tech}-{name}"
            before = rng.randrange(0, 5000)
            party_rows.append(
                (row, name, hashes[k], inscription, None, f"{before}.00", f"{before + 10}.00", at)
            )
            said += [name, hashes[k], inscription or ""]
        said += [tech or "", pool or "", inscription or ""]
        if kind.startswith("CPTE"):
            said += rng.sample(WORDS, 3)
            if rng.random() < 0.001:
                said.append(RARE_WORD)
        found = 0
        if rng.random() < FINDING_RATE:
            codes = {CODE_DRAW[rng.randrange(len(CODE_DRAW))] for _ in range(rng.choice((1, 1, 1, 2)))}
            for n, code in enumerate(sorted(codes)):
                finding_rows.append((row, n, code, f"{code.lower()} (synthetic)", None, None, None))
                flag_rows.append((code, at, row))
                finding_days[(day, code)] += 1
                codes_count[code] += 1
                said.append(code)
            found = len(codes)
        ev_rows.append(
            (row, OPER, coffre, id_evt, kind, at, lot_of[coffre], tech, pool, inscription, forced, found)
        )
        text_rows.append((row, " ".join(w for w in said if w)))
        in_lot[coffre] += 1
        if in_lot[coffre] == LOT:
            number = lot_of[coffre]
            lot_rows.append(
                (
                    OPER,
                    coffre,
                    number,
                    id_evt - LOT + 1,
                    id_evt,
                    f"{OPER}/{coffre}/lot-{number}",
                    b"\0" * 32,
                    at,
                )
            )
            lot_days[(day, coffre)] += 1
            lot_day_events[(day, coffre)] += LOT
            lot_of[coffre] += 1
            in_lot[coffre] = 0
        if row == events // 2:
            probes["middle_day"] = at_text(at)[:10]
        if len(ev_rows) >= 200_000:
            flush()
    # the last, open lot of each coffre is not sealed: its events are not in the index (as the real
    # index holds sealed lots only) - but kept here so N is N; they carry a lot number all the same
    flush()
    sink.write(
        {
            "lot_days": [(d, OPER, c, n, lot_day_events[(d, c)]) for (d, c), n in sorted(lot_days.items())],
            "finding_days": [(d, code, n) for (d, code), n in sorted(finding_days.items())],
            "coffres": [
                (OPER, c, lot_of[c] - 1, next_id[c], b"\0" * 32, b"\0" * 32, b"", None, None)
                for c in range(1, coffres + 1)
            ],
        }
    )
    sink.finish()
    busy = party_count.most_common(1)[0][0]
    rare = min(range(players, players // 2, -1), key=lambda k: party_count[k] or events)  # fewest parties
    mid = next(k for k in range(players // 100, players) if party_count[k] >= 3)
    tournament = next(
        t for t in range(min(events // 400, techs - 1) // 4 * 4, techs) if t % 4 == 0
    )  # a tournament in the middle
    probes.update(
        busy_player=f"J{busy}",
        busy_parties=party_count[busy],
        rare_player=f"J{rare}",
        hash_player=f"J{mid}",
        hash=hashes[mid],
        tech=f"C{events // 400 | 1}",
        tournament=f"T{tournament}",
        pool=f"P{events // 2 + 1 if (events // 2 + 1) else 1}",
        finding=CODES[0][0],
        rare_finding=min(codes_count, key=lambda c: codes_count[c]) if codes_count else CODES[-1][0],
        coffre=3 if coffres >= 3 else 1,
        coffre_events=next_id[3 if coffres >= 3 else 1],
        word=RARE_WORD,
    )
    # an Inscription that exists: the busy player's to the middle tournament, else any
    found_reg = db.execute(
        "SELECT inscription FROM events WHERE type = 'POINSCRIT' AND row > ? ORDER BY row LIMIT 1",
        (events // 2,),
    ).fetchone()
    probes["inscription"] = found_reg[0] if found_reg else None
    found_pool = db.execute(
        "SELECT pool FROM events WHERE pool IS NOT NULL AND row > ? ORDER BY row LIMIT 1", (events // 2,)
    ).fetchone()
    probes["pool"] = (found_pool or (None,))[0]
    seconds_taken = time.monotonic() - started
    db.execute(
        "INSERT INTO meta VALUES ('bench', ?)",
        (json.dumps({"shape": shape, "seconds": seconds_taken, "probes": probes}),),
    )
    if db.dialect is SQLITE:
        db.raw.execute("PRAGMA journal_mode = WAL")
    db.close()
    return Built(target, events, time.monotonic() - started, False, probes)


def index_bytes(target: Path | str) -> int:
    """The index's size: the SQLite file (and its WAL), or PostgreSQL's tables with their indexes."""
    if isinstance(target, Path):
        return sum(p.stat().st_size for p in (target, Path(f"{target}-wal")) if p.exists())
    with closing(connect(target, readonly=True)) as db:
        return sum(db.execute("SELECT pg_total_relation_size(?)", (t,)).fetchone()[0] for t in TABLES)


# -- measuring ------------------------------------------------------------------------------------


def kinds(p: dict[str, Any]) -> Iterator[tuple[str, Query, bool]]:
    """(name, query, measure its 2nd page too) of every kind of search."""
    day = datetime.fromisoformat(p["middle_day"]).replace(tzinfo=UTC)
    since, until = day, day + timedelta(hours=23, minutes=59, seconds=59)
    deep = int(p["coffre_events"] * 0.9)
    yield "player (busy)", Query(player=p["busy_player"]), True
    yield "player (rare)", Query(player=p["rare_player"]), False
    yield "HashJoueur", Query(hash_joueur=p["hash"]), False
    yield "Inscription", Query(inscription=p["inscription"]), False
    yield "Tech (cash table)", Query(tech=p["tech"]), False
    yield "Tech (tournament)", Query(tech=p["tournament"]), False
    yield "Pool", Query(pool=p["pool"]), False
    yield "finding", Query(finding=p["finding"]), False
    yield "finding (rarest code)", Query(finding=p["rare_finding"]), False
    yield "type POINSCRIT", Query(type="POINSCRIT"), True
    yield "date (one day)", Query(since=since, until=until), False
    yield "coffre + IDEvt range", Query(coffre=p["coffre"], first_id=deep, last_id=deep + 5000), False
    yield (
        "oper + coffre + IDEvt",
        Query(oper=OPER, coffre=p["coffre"], first_id=deep, last_id=deep + 5000),
        False,
    )
    yield "text (rare word)", Query(text=p["word"]), False
    yield "text (common word)", Query(text="virement"), False
    yield "player + type", Query(player=p["busy_player"], type="CPTEALIM"), False
    yield "player (rare) + type", Query(player=p["rare_player"], type="POJEU"), False
    yield "player + date (day)", Query(player=p["busy_player"], since=since, until=until), False
    yield "finding + date (day)", Query(finding=p["finding"], since=since, until=until), False
    yield "type + date (day)", Query(type="POINSCRIT", since=since, until=until), False
    yield "type + coffre", Query(type="POBILAN", coffre=p["coffre"]), False
    yield "type + Tech", Query(tech=p["tournament"], type="POINSCRIT"), False
    yield "player + Inscription", Query(player=p["busy_player"], inscription=p["inscription"]), False
    yield "finding + type", Query(finding=p["finding"], type="POJEU"), False
    # worst cases of one driving index: a busy driver, and a check few (or none) of its rows pass
    yield "player + Tech", Query(player=p["busy_player"], tech=p["tech"]), False
    yield "player + type (none)", Query(player=p["busy_player"], type="POANNUL"), False
    # two drivers both too busy to tell apart, and a combination few (or none) of their rows meet:
    # a page reads SCAN_WINDOW rows of one, then says where it stopped
    yield "player + finding", Query(player=p["busy_player"], finding=p["finding"]), True
    yield "type + word (none)", Query(type="POJEU", text="virement"), True


def measure(
    target: Path | str, probes: dict[str, Any], repeats: int, cold: Callable[[], None]
) -> list[dict[str, Any]]:
    """Every kind of search on the index at ``target``: the first page cold (``cold()`` first: the
    index's pages out of every cache, then a new connection), then warm."""
    results = []
    for name, query, second in kinds(probes):
        cold()
        search = EventSearch(target)
        search.db  # noqa: B018 - the connection opened before the clock starts (a replica's is open)
        started = time.perf_counter()
        page = search.search(query, page_size=50)
        cold_ms = (time.perf_counter() - started) * 1000
        warm_times = []
        for _ in range(repeats):
            started = time.perf_counter()
            search.search(query, page_size=50)
            warm_times.append((time.perf_counter() - started) * 1000)
        warm = statistics.median(warm_times)
        results.append(_result(name, page.driver, len(page.rows), cold_ms, warm, page.stopped_at))
        if second and page.next is not None:
            again = EventSearch(target)
            again.db  # noqa: B018
            started = time.perf_counter()
            nxt = again.search(query, after=page.next, page_size=50)
            cold2 = (time.perf_counter() - started) * 1000
            again.db.close()
            warm_times = []
            for _ in range(repeats):
                started = time.perf_counter()
                search.search(query, after=page.next, page_size=50)
                warm_times.append((time.perf_counter() - started) * 1000)
            results.append(
                _result(
                    f"{name}, page 2",
                    nxt.driver,
                    len(nxt.rows),
                    cold2,
                    statistics.median(warm_times),
                    nxt.stopped_at,
                )
            )
        search.db.close()
    return results


def _result(
    name: str, driver: str, rows: int, cold: float, warm: float, stopped_at: str | None = None
) -> dict[str, Any]:
    return {
        "kind": name,
        "driver": driver,
        "rows": rows,
        "window_ended": stopped_at is not None,
        "cold_ms": round(cold, 1),
        "warm_ms": round(warm, 1),
        "under_200ms": cold < TARGET_MS and warm < TARGET_MS,
    }


def table(results: list[dict[str, Any]]) -> str:
    lines = [f"{'search':<26} {'driver':<12} {'rows':>5} {'ms cold':>9} {'ms warm':>9}  < 200 ms  page"]
    for r in results:
        lines.append(
            f"{r['kind']:<26} {r['driver']:<12} {r['rows']:>5} {r['cold_ms']:>9.1f} {r['warm_ms']:>9.1f}  "
            f"{'yes' if r['under_200ms'] else 'NO':<8}  {'window ended' if r['window_ended'] else 'whole'}"
        )
    return "\n".join(lines)


def side_by_side(lite: list[dict[str, Any]], pg: list[dict[str, Any]]) -> str:
    """Both backends' results, kind by kind ("!" where the two answered differently)."""
    lines = [
        f"{'search':<26} {'driver':<12} {'rows':>5}  {'SQLite cold':>11} {'warm':>6}  {'PG cold':>9} {'warm':>6}"
        "  < 200 ms"
    ]
    for a, b in zip(lite, pg, strict=True):
        same = (a["kind"], a["driver"], a["rows"]) == (b["kind"], b["driver"], b["rows"])
        both = a["under_200ms"] and b["under_200ms"]
        lines.append(
            f"{a['kind']:<26} {a['driver']:<12} {a['rows']:>5}{' ' if same else '!'} {a['cold_ms']:>11.1f} "
            f"{a['warm_ms']:>6.1f}  {b['cold_ms']:>9.1f} {b['warm_ms']:>6.1f}  {'yes' if both else 'NO'}"
        )
    return "\n".join(lines)


def run_sqlite(path: Path, args: argparse.Namespace) -> dict[str, Any]:
    built = build(path, args.events, args.coffres, args.days, args.players)
    results = measure(path, built.probes, args.repeats, lambda: evict([path, Path(f"{path}-wal")]))
    return {
        "backend": "sqlite",
        "build_seconds": round(built.seconds, 1),
        "reused": built.reused,
        "index_bytes": index_bytes(path),
        "version": sqlite3.sqlite_version,
        "probes": built.probes,
        "results": results,
    }


def run_postgresql(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The index in a PostgreSQL server of its own (tests/postgres.py) in ``folder``: cold is the
    server restarted (its shared buffers empty) after its files' pages were dropped from the OS
    cache, as SQLite's file's are."""
    programs = bindir()
    if programs is None:
        raise SystemExit("PostgreSQL not found: apt-get install postgresql (or set COFFRE_POSTGRES_BIN)")
    server = LocalPostgres(programs, folder, {"shared_buffers": "256MB", "maintenance_work_mem": "512MB"})
    server.start()
    try:
        import psycopg

        with psycopg.connect(server.url("postgres"), autocommit=True) as admin:
            if admin.execute("SELECT 1 FROM pg_database WHERE datname = 'bench'").fetchone() is None:
                admin.execute("CREATE DATABASE bench")
        url = server.url("bench")
        built = build(url, args.events, args.coffres, args.days, args.players)
        version = _pg_version(url)

        def cold() -> None:
            server.stop(remove=False)
            os.sync()  # the checkpoint's writes on the disk (fsync is off): clean pages can go
            evict(p for p in server.data.rglob("*") if p.is_file())
            server.start()

        results = measure(url, built.probes, args.repeats, cold)
        size = index_bytes(url)
    finally:
        server.stop(remove=False)
    return {
        "backend": "postgresql",
        "build_seconds": round(built.seconds, 1),
        "reused": built.reused,
        "index_bytes": size,
        "version": version,
        "probes": built.probes,
        "results": results,
    }


def _pg_version(url: str) -> str:
    with closing(connect(url, readonly=True)) as db:
        return str(db.execute("SHOW server_version").fetchone()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--coffres", type=int, default=8)
    parser.add_argument("--days", type=int, default=730)
    parser.add_argument("--players", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgresql", "both"),
        default="sqlite",
        help="the index in SQLite, in PostgreSQL (a server of its own), or both side by side",
    )
    parser.add_argument(
        "--path",
        type=Path,
        help="keep the index here (reused when of the same shape); PostgreSQL's cluster in PATH.pgdata/",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    scratch = None
    path = args.path
    if path is None:
        scratch = Path(tempfile.mkdtemp(prefix="coffre-console-bench-"))
        os.chmod(scratch, 0o755)  # PostgreSQL's own user (as root) reaches its folder inside
        path = scratch / "console.sqlite"
    runs: dict[str, dict[str, Any]] = {}
    try:
        if args.backend in ("sqlite", "both"):
            runs["sqlite"] = run_sqlite(path, args)
        if args.backend in ("postgresql", "both"):
            runs["postgresql"] = run_postgresql(path.with_name(path.name + ".pgdata"), args)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    first = next(iter(runs.values()))
    summary = {
        "events": args.events,
        "build_seconds": first["build_seconds"],
        "reused": first["reused"],
        "index_bytes": first["index_bytes"],
        "sqlite": sqlite3.sqlite_version,
        "probes": first["probes"],
        "results": first["results"],
        "backends": runs,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(
        f"{args.events:,} events, {args.coffres} coffres, {args.days} days, {args.players:,} players; pid {os.getpid()}"
    )
    for name, run in runs.items():
        print(
            f"{name} {run['version']}: index {run['index_bytes'] / 1e6:,.0f} MB "
            f"({run['index_bytes'] / args.events:,.0f} bytes an event), built in {run['build_seconds']:.0f} s"
            f"{' (reused)' if run['reused'] else ''}"
        )
    if len(runs) == 2:
        print(side_by_side(runs["sqlite"]["results"], runs["postgresql"]["results"]))
    else:
        print(table(first["results"]))
    slow = [
        f"{name}: {r['kind']}" for name, run in runs.items() for r in run["results"] if not r["under_200ms"]
    ]
    print(f"over 200 ms: {', '.join(slow) if slow else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
