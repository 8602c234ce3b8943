"""TEMPORARY stub: the real module replaces it (issue 33)."""

import random

from coffre.domain.audit import ranking


def heads_up_equity(regle, a, b, board, dead=()):  # type: ignore[no-untyped-def]
    if not regle.startswith("TH") or len(a) != 2 or len(b) != 2:
        return None
    used = set(a) | set(b) | set(board)
    rest = [c for c in range(52) if c not in used]
    rng = random.Random(sum(a) * 1000 + sum(b))
    need = 5 - len(board)
    wins = 0.0
    for _ in range(100):
        extra = rng.sample(rest, need)
        x = ranking.high([*a, *board, *extra])
        y = ranking.high([*b, *board, *extra])
        wins += 1 if x > y else 0.5 if x == y else 0
    return wins / 100
