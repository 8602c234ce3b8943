"""coffre's own poker hand evaluators (issue 31): pure Python, no pokerkit, built for the replay's hot path.

Cards are the annex's codes 0..51 (annex 1.3.6.d.3): ``code = rank * 4 + suit``, ranks ``23456789TJQKA``
(0 = 2, 12 = ace), suits in the order c d h s (0 = 2 of clubs, 51 = ace of spades), as
:data:`coffre.domain.audit.variants.CARDS` maps them to pokerkit's cards.

Every evaluator returns an ``int``: **a bigger int is a better hand for that half of the pot, equal
ints are exact ties** (lows are encoded so that a better low is bigger). ``None`` is "no hand for
this half" (no qualifying eight-or-better low); it is worse than any hand. The values of different
kinds are not comparable with each other.

- :data:`HIGH`, ``high(cards)``: the best standard five-card high hand of 5, 6 or 7 cards (hold'em
  THL THPL THNL, stud 7SHL, 7SJL's high half);
- :data:`OMAHA_HIGH`, ``omaha_high(hole, board)``: exactly two of the 4 or 5 hole cards and exactly
  three of the 3 to 5 board cards (O4HPL, O5HPL, the high half of O4JL and O4JPL);
- :data:`LOW8`, ``low8(cards) -> int | None``: the best ace-to-five low, eight or better, of 5 to 7
  cards, ``None`` when none qualifies (7SJL's low half);
- :data:`OMAHA_LOW8`, ``omaha_low8(hole, board) -> int | None``: the same of two hole cards and three
  board cards (the low half of O4JL and O4JPL);
- :data:`RAZZ`, ``razz(cards)``: the best ace-to-five low of 5 to 7 cards, no qualifier, pairs
  counted (7SLL);
- :data:`DEUCE_SEVEN`, ``deuce_seven(cards)``: five cards exactly, as decree 2016-1326 reads triple
  draw 2-7 (2T7TD).

:data:`HAND_KINDS` gives each ``Regle`` its kinds in pokerkit's order of ``hand_types`` (high half
first), and :data:`EVALUATORS` each kind's function with one signature, ``(hole, board) -> int |
None`` (the board is empty at stud and draw; for the non-Omaha kinds hole and board are pooled).
:func:`describe` writes a value for a finding's message ("flush, ace high (A-Q-9-5-2)", "8-6-4-3-A
low").

The rules, and pokerkit's hand types these agree with (tests/audit/test_ranking.py holds them
against each other on random deals):

- high (pokerkit ``StandardHighHand``, ``OmahaHoldemHand``): straight flush > four of a kind > full
  house > flush > straight > three of a kind > two pair > one pair > high card, then the ranks of
  the five cards, grouped by their count then by rank; A-2-3-4-5 (the wheel) is the lowest straight
  (five high), the ace is otherwise high.
- eight or better (pokerkit ``EightOrBetterLowHand``, ``OmahaEightOrBetterLowHand``): five cards of
  different ranks, none above eight, the ace low; straights and flushes do not count; compared from
  the highest card down (5-4-3-2-A is the best).
- razz (pokerkit ``RegularLowHand``; decree art. 6 II: "il n'est pas tenu compte des combinaisons
  constituées d'une couleur ou d'une quinte et l'As y compte toujours comme une carte basse"): the
  ace low, no straights nor flushes, no qualifier; no pair < one pair < two pair < three of a kind
  < full house < four of a kind (from best to worst), then the ranks grouped as for high.
- 2-7 (coffre's ``DecreeDeuceToSevenLowHand``; decree art. 6 II as above and art. 7 IV: "l'As y
  compte toujours comme carte haute"): razz's categories, the ace high, straights and flushes not
  counted. So 6-5-4-3-2 is a six high, the best hand, and beats 7-5-4-3-2 (of one suit or not),
  which beats 8-6-4-3-2; A-5-4-3-2 is an ace high (docs/hand-audit.md, *2-7*).

Encoding (what :func:`describe` decodes): ``category << 20`` plus the five cards' ranks in four bits
each, most significant first, in the order they are compared. High: category 0 (high card) .. 8
(straight flush), ranks 2..14 (the ace of a wheel is 1). Lows: category ``5 - c`` where ``c`` is 0
(no pair) .. 5 (four of a kind), each rank ``r`` written ``15 - r`` (a lower card is a bigger
digit): the ace is 1 at eight or better and razz, 14 at 2-7. Eight or better: category 5 (no pair),
always.

Speed: a hand's five to seven cards are added up into one key (three bits per rank counting its
cards, four bits per suit counting its cards), so ``high`` is a sum, one test for a flush and one
dict lookup (a flush: one more pass over the cards and a list lookup by the suit's rank mask); razz
and 2-7 the same without the suits. Omaha multiplies the rank primes of each pair of hole cards (6
or 10) by those of each triple of the board (1 to 10): 60 to 100 lookups in a small five-card table,
and a flush is looked for only when the board holds three cards of a suit and the hole two of them.
Eight or better is a bit mask of the hand's ranks from the ace to the eight and one list lookup
(Omaha: the disjoint pairs of hole masks and board triples). bench/ranking.py measures each function
beside pokerkit's best hand of the same cards (``variants._evaluate``, uncached). On this
project's 2-core machine, shared with a running benchmark (CPU time, best of 5 rounds): a
seven-card ``high`` 0.7-0.9 µs (about 20 times pokerkit's), a five-card one 0.5 µs (7 times);
``omaha_high`` 4 + 5 cards 8.5 µs (4 times), 5 + 5 17 µs (3 times); ``low8`` of seven cards 0.3 µs
(30 times); ``omaha_low8`` 4 + 5 2 µs (12 times); ``razz`` of seven 0.75-1 µs (20 times);
``deuce_seven`` 0.4 µs (10 times).

The tables are built on first use, or all at once by :func:`build_tables` (CPU time and the memory
they keep, as bench/ranking.py measures them):

- high: a dict of every rank multiset of 5, 6 and 7 cards (6,175 + 18,395 + 49,205 = 73,775 keys,
  the six- and seven-card values the best of their five-card sub-multisets), Omaha's dict of the
  6,175 five-card multisets by prime product, and a list of 8,192 values by a flush's rank mask:
  0.2-0.3 s, 6 MB;
- razz: the same multisets for the ace-to-five order: 0.2-0.25 s, 5.4 MB;
- 2-7: the 6,175 five-card multisets: about 0.06 s, 0.7 MB;
- eight or better: a list of 256 values by rank mask, built at import (under 1 ms).

Cards must be different: a card given twice is not always noticed (the audit reports it before any
evaluation). ``high``, ``razz`` and ``deuce_seven`` raise ``ValueError`` for a hand of the wrong size,
``omaha_high`` for fewer than two hole or three board cards; the eight-or-better functions take what
they are given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations, combinations_with_replacement, product, starmap
from math import prod
from operator import mul

HIGH = "high"
OMAHA_HIGH = "omaha high"
LOW8 = "eight or better"
OMAHA_LOW8 = "omaha eight or better"
RAZZ = "razz"
DEUCE_SEVEN = "2-7"

HAND_KINDS: dict[str, tuple[str, ...]] = {
    "THL": (HIGH,),
    "THPL": (HIGH,),
    "THNL": (HIGH,),
    "O4HPL": (OMAHA_HIGH,),
    "O4JL": (OMAHA_HIGH, OMAHA_LOW8),
    "O4JPL": (OMAHA_HIGH, OMAHA_LOW8),
    "O5HPL": (OMAHA_HIGH,),
    "7SHL": (HIGH,),
    "7SJL": (HIGH, LOW8),
    "7SLL": (RAZZ,),
    "2T7TD": (DEUCE_SEVEN,),
}
"""Each ``Regle``'s hand kinds, in the order of its engine variant's ``hand_types`` (the high half first)."""

# --------------------------------------------------------------------------- the keys

_RANKS = "23456789TJQKA"
_SUITS = "cdhs"
_RANK_BITS = 3
_SUIT_SHIFT = 40
_RANK_MASK = (1 << _SUIT_SHIFT) - 1
_FLUSH_TEST = 0x3333  # added to the four suit counts: bit 3 of a count's nibble set when it is >= 5
_FLUSH_BITS = 0x8888

_RANK_KEY: tuple[int, ...] = tuple(1 << (_RANK_BITS * (code >> 2)) for code in range(52))
"""Per card: one in its rank's three bits. A hand's key: its cards' sum (each rank's count)."""
_KEY: tuple[int, ...] = tuple(_RANK_KEY[code] + (1 << (_SUIT_SHIFT + 4 * (code & 3))) for code in range(52))
"""Per card: its rank key, plus one in its suit's four bits."""
_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
_PRIME: tuple[int, ...] = tuple(_PRIMES[code >> 2] for code in range(52))
"""Per card: its rank's prime (a five cards' product names their ranks, and stays under 2**30)."""
_SUIT_COUNT: tuple[int, ...] = tuple(1 << (4 * (code & 3)) for code in range(52))
"""Per card: one in its suit's four bits."""
_SUIT_OF_FLUSH: dict[int, int] = {8 << (4 * suit): suit for suit in range(4)}
_LOW_BIT: tuple[int, ...] = tuple(
    (1 if code >> 2 == 12 else (1 << ((code >> 2) + 1) if code >> 2 <= 6 else 0)) for code in range(52)
)
"""Per card: its bit among the eight-or-better ranks (bit 0 the ace, bit 7 the eight), 0 above eight."""

HIGH_CATEGORIES = (
    "high card",
    "pair",
    "two pair",
    "three of a kind",
    "straight",
    "flush",
    "full house",
    "four of a kind",
    "straight flush",
)
LOW_CATEGORIES = ("no pair", "pair", "two pair", "three of a kind", "full house", "four of a kind")
"""Razz and 2-7, from the best to the worst (the value's category is ``5 - index``)."""

_HIGH_CARD, _PAIR, _TWO_PAIR, _TRIPS, _STRAIGHT, _FLUSH, _FULL, _QUADS, _STRAIGHT_FLUSH = range(9)
_SHAPES = {(1, 1, 1, 1, 1): 0, (2, 1, 1, 1): 1, (2, 2, 1): 2, (3, 1, 1): 3, (3, 2): 4, (4, 1): 5}
"""Razz's and 2-7's categories (0 no pair .. 5 four of a kind) by the counts of the ranks."""
_HIGH_SHAPES = {
    (1, 1, 1, 1, 1): _HIGH_CARD,
    (2, 1, 1, 1): _PAIR,
    (2, 2, 1): _TWO_PAIR,
    (3, 1, 1): _TRIPS,
    (3, 2): _FULL,
    (4, 1): _QUADS,
}


def _pack(category: int, ranks: Sequence[int]) -> int:
    value = category
    for rank in ranks:
        value = (value << 4) | rank
    return value


def _grouped(values: Sequence[int]) -> tuple[tuple[int, ...], list[int]]:
    """The counts of ``values`` (largest first) and the values grouped: by count, then by value, down."""
    counts = Counter(values)
    order = sorted(counts, key=lambda v: (counts[v], v), reverse=True)
    return tuple(counts[v] for v in order), [v for v in order for _ in range(counts[v])]


def _high5(ranks: Sequence[int], flush: bool) -> int:
    """The high value of five cards of these rank indices (0..12), of one suit or not."""
    shape, grouped = _grouped([r + 2 for r in ranks])
    if len(shape) == 5:
        if grouped[0] - grouped[4] == 4:
            return _pack(_STRAIGHT_FLUSH if flush else _STRAIGHT, grouped)
        if grouped == [14, 5, 4, 3, 2]:
            return _pack(_STRAIGHT_FLUSH if flush else _STRAIGHT, [5, 4, 3, 2, 1])
        return _pack(_FLUSH if flush else _HIGH_CARD, grouped)
    return _pack(_HIGH_SHAPES[shape], grouped)


def _low5(ranks: Sequence[int], ace_low: bool) -> int:
    """The razz (``ace_low``) or 2-7 value of five cards of these rank indices: no straights, no flushes."""
    values = [1 if ace_low and r == 12 else r + 2 for r in ranks]  # the ace: 1 in razz, 14 at 2-7
    shape, grouped = _grouped(values)
    return _pack(5 - _SHAPES[shape], [15 - v for v in grouped])


def _multisets(score: Callable[[Sequence[int]], int], sizes: Sequence[int]) -> dict[int, int]:
    """``score`` of every five-rank multiset (no rank more than four times), by rank key; then, for each
    larger size in ``sizes``, the best of each multiset's five-card sub-multisets (a multiset of n+1
    ranks is the best of the n-rank ones it contains: every one of its n-rank sub-multisets is reached
    by adding its missing rank)."""
    level: dict[int, int] = {}
    for ranks in combinations_with_replacement(range(13), 5):
        if max(Counter(ranks).values()) <= 4:
            level[sum(1 << (_RANK_BITS * r) for r in ranks)] = score(ranks)
    table = dict(level) if 5 in sizes else {}
    shared: dict[int, int] = {v: v for v in level.values()}  # one int object per value
    for size in range(6, max(sizes) + 1):
        bigger: dict[int, int] = {}
        for key, value in level.items():
            for rank in range(13):
                shift = _RANK_BITS * rank
                if (key >> shift) & 7 < 4:
                    k = key + (1 << shift)
                    if bigger.get(k, -1) < value:
                        bigger[k] = shared[value]
        level = bigger
        if size in sizes:
            table.update(level)
    return table


# --------------------------------------------------------------------------- high


_HIGH_TABLE: dict[int, int] = {}
"""A rank key (5, 6 or 7 cards) -> the best high value its ranks make without a flush."""
_OMAHA_TABLE: dict[int, int] = {}
"""The product of five cards' rank primes (:data:`_PRIME`) -> their high value without a flush: Omaha's
five-card lookups (6,175 keys, small ints, a table that stays in the processor's cache)."""
_FLUSH_TABLE: list[int] = []
"""A flush's rank mask (bit r: rank index r, 5 to 7 bits) -> its best high value (a straight flush or a flush)."""


def _build_high() -> None:
    if _HIGH_TABLE:
        return
    flushes = [0] * (1 << 13)
    for size in range(5, 8):
        for ranks in combinations(range(13), size):
            mask = sum(1 << r for r in ranks)
            if size == 5:
                flushes[mask] = _high5(ranks, True)
            else:
                flushes[mask] = max(flushes[mask ^ (1 << r)] for r in ranks)
    _FLUSH_TABLE[:] = flushes
    _HIGH_TABLE.update(_multisets(lambda ranks: _high5(ranks, False), (5, 6, 7)))
    for ranks in combinations_with_replacement(range(13), 5):
        if max(Counter(ranks).values()) <= 4:
            _OMAHA_TABLE[prod(_PRIMES[r] for r in ranks)] = _HIGH_TABLE[
                sum(1 << (_RANK_BITS * r) for r in ranks)
            ]


def _flush_high(cards: Sequence[int], key: int) -> int:
    """The flush of ``cards``, whose ``key`` holds five or more cards of one suit (with at most seven
    cards, that suit's best five is the hand: no full house nor four of a kind is left beside it)."""
    suit = _SUIT_OF_FLUSH[((key >> _SUIT_SHIFT) + _FLUSH_TEST) & _FLUSH_BITS]
    mask = 0
    for card in cards:
        if card & 3 == suit:
            mask |= 1 << (card >> 2)
    if not _FLUSH_TABLE:
        _build_high()
    value = _FLUSH_TABLE[mask]
    if not value or len(cards) > 7:
        raise ValueError(f"not a hand of 5 to 7 different cards: {list(cards)}")
    return value


def high(cards: Sequence[int]) -> int:
    """The best standard five-card high hand among ``cards`` (5, 6 or 7 card codes, all different: a card
    twice is not always noticed, the audit reports it before any evaluation)."""
    keys = _KEY
    if len(cards) == 7:
        a, b, c, d, e, f, g = cards
        key = keys[a] + keys[b] + keys[c] + keys[d] + keys[e] + keys[f] + keys[g]
    elif len(cards) == 5:
        a, b, c, d, e = cards
        key = keys[a] + keys[b] + keys[c] + keys[d] + keys[e]
    else:
        key = 0
        for card in cards:
            key += keys[card]
    if ((key >> _SUIT_SHIFT) + _FLUSH_TEST) & _FLUSH_BITS:
        return _flush_high(cards, key)
    try:
        return _HIGH_TABLE[key & _RANK_MASK]
    except KeyError:
        return _missed(_HIGH_TABLE, _build_high, key & _RANK_MASK, cards, "5 to 7")


def high_showdowns(
    hand_a: Sequence[int], hand_b: Sequence[int], runouts: Iterable[Sequence[int]]
) -> tuple[int, int]:
    """(A's wins, ties) when each runout's cards complete both hands (to 5 to 7 cards), valued as
    :func:`high` values them: the equity of two hold'em hands (coffre.domain.signals.equity). The
    hands' keys are added up once, then each runout's, instead of calling :func:`high` twice."""
    if not _HIGH_TABLE:
        _build_high()
    keys, table, mask = _KEY, _HIGH_TABLE, _RANK_MASK
    shift, test, bits = _SUIT_SHIFT, _FLUSH_TEST, _FLUSH_BITS
    base_a = sum(keys[c] for c in hand_a)
    base_b = sum(keys[c] for c in hand_b)
    wins = ties = 0
    for runout in runouts:
        extra = 0
        for card in runout:
            extra += keys[card]
        key_a, key_b = base_a + extra, base_b + extra
        if ((key_a >> shift) + test) & bits:
            value_a = _flush_high([*hand_a, *runout], key_a)
        else:
            value_a = table[key_a & mask]
        if ((key_b >> shift) + test) & bits:
            value_b = _flush_high([*hand_b, *runout], key_b)
        else:
            value_b = table[key_b & mask]
        if value_a > value_b:
            wins += 1
        elif value_a == value_b:
            ties += 1
    return wins, ties


def _missed(
    table: dict[int, int], build: Callable[[], None], key: int, cards: Sequence[int], sizes: str
) -> int:
    """A key not in ``table``: the table is built on this first use, or the cards are not a hand."""
    if not table:
        build()
        if key in table:
            return table[key]
    raise ValueError(f"not a hand of {sizes} different cards: {list(cards)}")


def omaha_high(hole: Sequence[int], board: Sequence[int]) -> int:
    """The best high hand of exactly two of ``hole`` (4 or 5 cards) and exactly three of ``board``
    (3 to 5 cards)."""
    if not _OMAHA_TABLE:
        _build_high()
    prime = _PRIME
    if len(hole) == 4:
        a, b, c, d = hole
        pa, pb, pc, pd = prime[a], prime[b], prime[c], prime[d]
        pairs: Sequence[int] = (pa * pb, pa * pc, pa * pd, pb * pc, pb * pd, pc * pd)
    else:
        pairs = [prime[a] * prime[b] for a, b in combinations(hole, 2)]
    if len(board) == 5:
        a, b, c, d, e = board
        pa, pb, pc, pd, pe = prime[a], prime[b], prime[c], prime[d], prime[e]
        ab, ac, bc, de = pa * pb, pa * pc, pb * pc, pd * pe
        triples: Sequence[int] = (
            ab * pc,
            ab * pd,
            ab * pe,
            ac * pd,
            ac * pe,
            pa * de,
            bc * pd,
            bc * pe,
            pb * de,
            pc * de,
        )
    else:
        triples = [prime[a] * prime[b] * prime[c] for a, b, c in combinations(board, 3)]
    try:  # each pair times each triple, looked up and compared in C
        best = max(map(_OMAHA_TABLE.__getitem__, starmap(mul, product(pairs, triples))))
    except (KeyError, ValueError):
        raise ValueError(f"not an Omaha hand: hole {list(hole)}, board {list(board)}") from None
    suits = 0
    for card in board:
        suits += _SUIT_COUNT[card]
    three = (suits + 0x5555) & _FLUSH_BITS  # bit 3 of a suit's count set when it is >= 3
    if three:  # one suit at most, the board having five cards or fewer
        suit = _SUIT_OF_FLUSH[three]
        held = [1 << (card >> 2) for card in hole if card & 3 == suit]
        if len(held) >= 2:
            flushes = _FLUSH_TABLE
            common = [1 << (card >> 2) for card in board if card & 3 == suit]
            for a, b in combinations(held, 2):
                for c, d, e in combinations(common, 3):
                    value = flushes[a | b | c | d | e]
                    if value > best:
                        best = value
    return best


# --------------------------------------------------------------------------- eight or better


def _build_low8() -> list[int | None]:
    table: list[int | None] = [None] * 256
    for mask in range(256):
        values = [bit + 1 for bit in range(8) if mask >> bit & 1]  # the ace 1, the deuce 2 .. the eight 8
        if len(values) >= 5:
            table[mask] = _pack(5, [15 - v for v in reversed(values[:5])])
    return table


_LOW8_TABLE: list[int | None] = _build_low8()
"""The eight-or-better ranks a hand holds (a mask of :data:`_LOW_BIT`) -> the value of its five lowest,
None under five."""


def low8(cards: Sequence[int]) -> int | None:
    """The best ace-to-five low, eight or better, among ``cards`` (5 to 7 card codes): five different
    ranks from the ace to the eight (straights and flushes do not count), or None."""
    bits = _LOW_BIT
    mask = 0
    for card in cards:
        mask |= bits[card]
    return _LOW8_TABLE[mask]


def omaha_low8(hole: Sequence[int], board: Sequence[int]) -> int | None:
    """The best eight-or-better low of exactly two of ``hole`` and exactly three of ``board``, or None."""
    bits = _LOW_BIT
    common = {bits[card] for card in board} - {0}
    if len(common) < 3:
        return None
    held = {bits[card] for card in hole} - {0}
    if len(held) < 2:
        return None
    table = _LOW8_TABLE
    best = None
    for a, b in combinations(held, 2):
        pair = a | b
        for c, d, e in combinations(common, 3):
            if not pair & (c | d | e):
                value = table[pair | c | d | e]
                if best is None or value > best:  # type: ignore[operator]
                    best = value
    return best


# --------------------------------------------------------------------------- razz and 2-7


_RAZZ_TABLE: dict[int, int] = {}
"""A rank key (5, 6 or 7 cards) -> the best razz value of its ranks."""
_DEUCE_SEVEN_TABLE: dict[int, int] = {}
"""A rank key (5 cards) -> its 2-7 value."""


def _build_razz() -> None:
    if not _RAZZ_TABLE:
        _RAZZ_TABLE.update(_multisets(lambda ranks: _low5(ranks, True), (5, 6, 7)))


def _build_deuce_seven() -> None:
    if not _DEUCE_SEVEN_TABLE:
        _DEUCE_SEVEN_TABLE.update(_multisets(lambda ranks: _low5(ranks, False), (5,)))


def _rank_key(cards: Sequence[int]) -> int:
    keys = _RANK_KEY
    if len(cards) == 7:
        a, b, c, d, e, f, g = cards
        return keys[a] + keys[b] + keys[c] + keys[d] + keys[e] + keys[f] + keys[g]
    if len(cards) == 5:
        a, b, c, d, e = cards
        return keys[a] + keys[b] + keys[c] + keys[d] + keys[e]
    key = 0
    for card in cards:
        key += keys[card]
    return key


def razz(cards: Sequence[int]) -> int:
    """The best ace-to-five low among ``cards`` (5 to 7 card codes), no qualifier: the ace low, straights
    and flushes not counted, pairs counted (any pair worse than any five different ranks)."""
    key = _rank_key(cards)
    try:
        return _RAZZ_TABLE[key]
    except KeyError:
        return _missed(_RAZZ_TABLE, _build_razz, key, cards, "5 to 7")


def deuce_seven(cards: Sequence[int]) -> int:
    """The 2-7 low of exactly five cards as decree 2016-1326 reads triple draw: straights and flushes
    not counted (art. 6 II), the ace always high (art. 7 IV). 6-5-4-3-2 is a six high, the best hand,
    then 7-5-4-3-2 (of one suit or not), 7-6-4-3-2 …; A-K-Q-J-9 is the worst hand of five different
    ranks, and every pair is worse (then two pair, three of a kind, full house, four of a kind)."""
    key = _rank_key(cards) if len(cards) == 5 else -1
    try:
        return _DEUCE_SEVEN_TABLE[key]
    except KeyError:
        return _missed(_DEUCE_SEVEN_TABLE, _build_deuce_seven, key, cards, "5")


def build_tables() -> None:
    """Build every table now rather than at its first use (a worker before its first hand, a benchmark)."""
    _build_high()
    _build_razz()
    _build_deuce_seven()


# --------------------------------------------------------------------------- one signature, and words


def _pooled(
    evaluate: Callable[[Sequence[int]], int | None],
) -> Callable[[Sequence[int], Sequence[int]], int | None]:
    def of(hole: Sequence[int], board: Sequence[int]) -> int | None:
        return evaluate([*hole, *board]) if board else evaluate(hole)

    of.__name__ = of.__qualname__ = evaluate.__name__
    return of


EVALUATORS: dict[str, Callable[[Sequence[int], Sequence[int]], int | None]] = {
    HIGH: _pooled(high),
    OMAHA_HIGH: omaha_high,
    LOW8: _pooled(low8),
    OMAHA_LOW8: omaha_low8,
    RAZZ: _pooled(razz),
    DEUCE_SEVEN: _pooled(deuce_seven),
}
"""Each kind's evaluator as ``(hole, board) -> value``: hole and board pooled but at Omaha."""

_SHORT = "?A23456789TJQKA"
_PLURAL = (
    "",
    "aces",
    "twos",
    "threes",
    "fours",
    "fives",
    "sixes",
    "sevens",
    "eights",
    "nines",
    "tens",
    "jacks",
    "queens",
    "kings",
    "aces",
)
_SINGULAR = (
    "",
    "ace",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "jack",
    "queen",
    "king",
    "ace",
)


def _dashed(values: Sequence[int]) -> str:
    return "-".join(_SHORT[v] for v in values)


def _grouped_words(category: str, v: Sequence[int]) -> str:
    """A hand with a pair or more (``v``: its five ranks as compared), in words."""
    if category == "four of a kind":
        return f"four of a kind, {_PLURAL[v[0]]}, {_SHORT[v[4]]} kicker"
    if category == "full house":
        return f"full house, {_PLURAL[v[0]]} full of {_PLURAL[v[3]]}"
    if category == "three of a kind":
        return f"three of a kind, {_PLURAL[v[0]]} ({_dashed(v[3:])})"
    if category == "two pair":
        return f"two pair, {_PLURAL[v[0]]} and {_PLURAL[v[2]]} ({_SHORT[v[4]]})"
    return f"pair, {_PLURAL[v[0]]} ({_dashed(v[2:])})"


def describe(kind: str, value: int | None) -> str:
    """A value of ``kind`` in words, for a finding's message: "flush, ace high (A-Q-9-5-2)", "straight,
    five high", "full house, kings full of twos", "8-6-4-3-A low", "pair, fours (8-6-A)", "no low"."""
    if value is None:
        return "no low"
    category = value >> 20
    digits = [(value >> (4 * (4 - i))) & 15 for i in range(5)]
    if kind in (HIGH, OMAHA_HIGH):
        name = HIGH_CATEGORIES[category]
        if category in (_STRAIGHT, _STRAIGHT_FLUSH):
            return f"{name}, {_SINGULAR[digits[0]]} high"
        if category in (_FLUSH, _HIGH_CARD):
            return f"{name}, {_SINGULAR[digits[0]]} high ({_dashed(digits)})"
        return _grouped_words(name, digits)
    if kind not in (LOW8, OMAHA_LOW8, RAZZ, DEUCE_SEVEN):
        raise ValueError(f"no such kind of hand: {kind!r}")
    ranks = [15 - d for d in digits]
    name = LOW_CATEGORIES[5 - category]
    if name == "no pair":
        return f"{_dashed(ranks)} low"
    return _grouped_words(name, ranks)


# --------------------------------------------------------------------------- a hand's name, for a page


@dataclass(frozen=True, slots=True)
class HandName:
    """A hand's name in parts a page can put in its own language: its category and its five ranks.
    ``str()`` writes it in English ("Full house, kings over tens", "Eight low (8-6-4-3-A)")."""

    category: str
    """A high hand: one of :data:`HIGH_CATEGORIES`. A low hand: ``"low"`` (five different ranks), or
    one of :data:`LOW_CATEGORIES` but "no pair" (a razz or 2-7 hand with pairs); ``"no low"``: no
    eight-or-better low qualifies."""
    ranks: tuple[int, ...]
    """The five ranks in the order they are compared (grouped by count, then by rank): 2 … 13 the
    king, the ace 14 (high hands, 2-7) or 1 (ace-to-five lows). Empty for "no low"."""
    low: bool
    """The hand is a low one (eight or better, razz, 2-7)."""

    def __str__(self) -> str:
        r = self.ranks
        name = {
            "no low": "No low",
            "low": f"{_SINGULAR[r[0]].capitalize()} low ({_dashed(r)})" if r else "",
            "high card": f"{_SINGULAR[r[0]].capitalize()} high ({_dashed(r)})" if r else "",
        }.get(self.category)
        if name is not None:
            return name
        if self.category in ("straight", "flush", "straight flush"):
            return f"{self.category.capitalize()}, {_SINGULAR[r[0]]} high"
        if self.category == "pair":
            return f"Pair of {_PLURAL[r[0]]}"
        if self.category == "two pair":
            return f"Two pair, {_PLURAL[r[0]]} and {_PLURAL[r[2]]}"
        if self.category == "full house":
            return f"Full house, {_PLURAL[r[0]]} over {_PLURAL[r[3]]}"
        return f"{self.category.capitalize()}, {_PLURAL[r[0]]}"  # three, four of a kind


def hand_name(kind: str, value: int | None) -> HandName:
    """The name of a value of ``kind`` (one of :data:`EVALUATORS`' kinds), decoded from the value as
    :func:`describe` decodes it: "full house" with the ranks (13, 13, 13, 10, 10) is "Full house,
    kings over tens"; a ``None`` low is "no low"."""
    if kind not in EVALUATORS:
        raise ValueError(f"no such kind of hand: {kind!r}")
    if value is None:
        return HandName("no low", (), True)
    category = value >> 20
    digits = tuple((value >> (4 * (4 - i))) & 15 for i in range(5))
    if kind in (HIGH, OMAHA_HIGH):
        return HandName(HIGH_CATEGORIES[category], digits, False)
    name = LOW_CATEGORIES[5 - category]
    return HandName("low" if name == "no pair" else name, tuple(15 - d for d in digits), True)
