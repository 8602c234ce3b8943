"""An oracle that is not the engine (issue 20, item 5): real hands, played at real tables, audit clean.

The hands are the PHH corpus in tests/fixtures/phh (see its README: the 10,000 hands of the Pluribus
match, 6-max no-limit hold'em; the 83 televised hands of the WSOP 2023 $50k Poker Players
Championship final table, a mixed game; 42 online hands of 2 to 9 players from handhq, raked, one
with a dead small blind). tests/phh/writer.py turns each into a POJEU by its own arithmetic: no
pokerkit, no coffre module; the outcome (``CaveApres``) is the dataset's (``finishing_stacks``, or
the room's winnings). So a rule the engine gets wrong shows here, where today's property tests
(tests/audit/test_hand_property.py: pokerkit plays, pokerkit judges) cannot see it.

- every hand converts (or is skipped for a reason the annex cannot express, counted), normalizes
  as ingest reads it and, with the regulator's schemas at hand, validates against PO.xsd;
- every hand of every variant audits with no finding, but for the hands in ``EXCLUDED`` (each a
  real inconsistency of the dataset, with its reason);
- each kind of mutation (a card dealt twice, an amount changed, two actions swapped, a winner
  swapped) of a clean real hand is flagged, on a sample of hands of each variant.

The Pluribus hands are sampled (``PLURIBUS_SAMPLE`` of the 10,000, fixed seed; all of them are
converted and checked by the writer's own arithmetic) to keep the run short; ``COFFRE_PHH_FULL=1``
audits all of them (about 70 s here, against 25 s).
"""

from __future__ import annotations

import ast
import json
import os
import random
import sys
from collections import Counter
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from phh import corpus, writer

from coffre.domain.codec import canonical_bytes
from coffre.domain.normalize import normalize

from hands import audit, swap_winner

FULL = os.environ.get("COFFRE_PHH_FULL") == "1"
PLURIBUS_SAMPLE = 3000
MUTATION_SAMPLE = 30
SEED = 20

VARIANTS = ("THNL", "THL", "O4HPL", "O4JL", "7SHL", "7SJL", "7SLL", "2T7TD")
"""Every Regle the corpus has a hand of (the dataset holds no THPL, O4JPL nor O5HPL)."""

EXCLUDED: dict[str, str] = {}
# wsop/2023/43/5/85 (razz heads up, a limit raise recorded cut at the one opponent's all-in) was
# excluded as BET_ILLEGAL; the audit now reads a raise short of the minimum that puts every other
# player all in as the minimum raise with its excess returned (docs/hand-audit.md), so it is clean.
"""Hands whose record is itself inconsistent, by name, with the reason. Nothing else is left out."""

SKIP_REASONS = {
    "variant with no Regle",  # no-limit 2-7 single draw, badugi, short deck: not in annex 1.3.6.d.5
    # the outcome would have to be computed: by an engine, the thing under test
    "no outcome in the dataset (neither finishing stacks nor winnings)",
    "unknown discarded card",  # 2-7: a folded player's discards unknown, so its replacements unplaceable
}


@cache
def converted() -> tuple[tuple[tuple[str, str, dict[str, Any]], ...], Counter[str]]:
    hands, skipped = writer.convert_all(corpus.hands())
    return tuple(hands), skipped


def _of(regle: str) -> list[tuple[str, dict[str, Any]]]:
    return [(name, event) for name, r, event in converted()[0] if r == regle]


def _audited(regle: str) -> list[tuple[str, dict[str, Any]]]:
    hands = _of(regle)
    if FULL:
        return hands
    pluribus = [h for h in hands if h[0].startswith("pluribus/")]
    picked = set(random.Random(SEED).sample(range(len(pluribus)), min(len(pluribus), PLURIBUS_SAMPLE)))
    return [h for h in hands if not h[0].startswith("pluribus/")] + [
        h for i, h in enumerate(pluribus) if i in picked
    ]


@cache
def _findings(regle: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """(name, POJEU as JSON, its findings as "CODE: message") of each audited hand of ``regle``."""
    return tuple(
        (name, json.dumps(event), tuple(f"{f.code}: {f.message}" for f in audit(event)))
        for name, event in _audited(regle)
    )


# --------------------------------------------------------------------------- the corpus


def test_the_corpus_has_thousands_of_hands_of_every_variant_it_holds():
    hands, skipped = converted()
    per_variant = Counter(regle for _, regle, _ in hands)
    assert set(per_variant) == set(VARIANTS)
    assert per_variant["THNL"] >= 10_000
    assert sum(per_variant.values()) - per_variant["THNL"] >= 60
    assert set(skipped) <= SKIP_REASONS, skipped
    assert sum(skipped.values()) <= 20


def test_every_hand_normalizes_and_validates_against_the_regulators_schema(optional_schema_set):
    """Every hand but the Pluribus ones (500 of them; all with COFFRE_PHH_FULL=1) normalizes and, with
    ../shared at hand, validates against PO.xsd (the audit tests normalize the others they audit)."""
    failures = []
    for regle in VARIANTS:
        hands = _of(regle)
        if not FULL:  # 500 of the Pluribus hands (every 20th), all the others
            hands = [h for i, h in enumerate(hands) if not h[0].startswith("pluribus/") or i % 20 == 0]
        for name, event in hands:
            try:
                normalized = normalize(json.dumps(event).encode())
            except Exception as exc:  # every failure listed, not the first
                failures.append(f"{name}: {exc}")
                continue
            if optional_schema_set is not None:
                errors = optional_schema_set.errors("PO", canonical_bytes(normalized))
                failures.extend(f"{name}: {e}" for e in errors)
    assert failures == []


def test_every_hand_adds_up_by_the_writers_own_arithmetic():
    """The writer's money, checked without coffre: the rounds' Totals add up to the players' Totals
    (the pot), the Nets and the Rake to zero, and every player's share of the pot (CaveApres −
    CaveAvant + Total + Rake, from the dataset's outcome) is at least zero, the shares adding up to
    the pot."""
    wrong = []
    for name, _, event in converted()[0]:
        pojeu = event["POJEU"]
        finances = [j["Finance"] for j in pojeu["Participants"]["Joueur"]]
        pot = sum(Decimal(t.get("Total", 0)) for t in pojeu["Jeu"]["Tour"])
        rake = [Decimal(f.get("Rake", 0)) for f in finances]
        won = [
            Decimal(f["CaveApres"]) - Decimal(f["CaveAvant"]) + Decimal(f["Total"]) + r
            for f, r in zip(finances, rake, strict=True)
        ]
        if (
            pot != sum(Decimal(f["Total"]) for f in finances)
            or sum(Decimal(f["Net"]) for f in finances) + sum(rake) != 0
            or min(won) < 0
            or sum(won) != pot
        ):
            wrong.append(name)
    assert wrong == []


# --------------------------------------------------------------------------- the audit


@pytest.mark.parametrize("regle", VARIANTS)
def test_every_real_hand_audits_clean(regle):
    flagged = {name: list(found) for name, _, found in _findings(regle) if found and name not in EXCLUDED}
    by_code = Counter(line.split(":")[0] for lines in flagged.values() for line in lines)
    first = dict(list(flagged.items())[:8])
    assert flagged == {}, (
        f"{len(flagged)} real {regle} hands flagged, by code {dict(by_code)}; first: {first}"
    )


def test_the_excluded_hands_are_flagged_for_their_reason():
    """An excluded hand stays excluded only while coffre flags it (and it is in the corpus)."""
    names = {name for name, _, _ in converted()[0]}
    for name in EXCLUDED:
        assert name in names
        regle = next(r for n, r, _ in converted()[0] if n == name)
        found = next(f for n, _, f in _findings(regle) if n == name)
        assert [line.split(":")[0] for line in found] == ["BET_ILLEGAL"]


# --------------------------------------------------------------------------- mutations


def _sample(regle: str) -> list[tuple[str, dict[str, Any]]]:
    clean = [(name, text) for name, text, found in _findings(regle) if not found]
    picked = random.Random(SEED).sample(clean, min(MUTATION_SAMPLE, len(clean)))
    return [(name, json.loads(text)) for name, text in picked]


def _tours(event: dict[str, Any]) -> list[dict[str, Any]]:
    return event["POJEU"]["Jeu"]["Tour"]


def _dealt_twice(event: dict[str, Any], rng: random.Random) -> bool:
    draws = [a["Draw"] for t in _tours(event) for a in t["Action"] if "Draw" in a]
    one, other = rng.sample(range(len(draws)), 2)
    draws[other]["Valeur"] = draws[one]["Valeur"]
    return True


def _amount_changed(event: dict[str, Any], rng: random.Random) -> bool:
    """A call, a player's Total, CaveApres or Net, or a round's Total, by one chip up or down (or by a
    hundredth). A bet's or a blind's may be uncalled and come back, leaving no trace: calls only."""
    bets = [a["Bet"] for t in _tours(event) for a in t["Action"] if "Bet" in a and a["Bet"]["name"] == "call"]
    players = [j["Finance"] for j in event["POJEU"]["Participants"]["Joueur"]]
    fields = [(b, "Valeur") for b in bets] + [(f, k) for f in players for k in ("Total", "CaveApres", "Net")]
    fields += [(t, "Total") for t in _tours(event) if "Total" in t]
    where, key = rng.choice(fields)
    delta = rng.choice([Decimal(1), Decimal(-1), Decimal("0.01")])
    changed = Decimal(where[key]) + delta
    if changed < 0 and key != "Net":
        changed = Decimal(where[key]) + abs(delta)
    where[key] = str(changed)
    return True


def _swapped(event: dict[str, Any], rng: random.Random) -> bool:
    """Two consecutive actions of two seats in one betting round (neither a forced bet)."""
    pairs = []
    for t in _tours(event):
        acts = t["Action"]
        for k in range(len(acts) - 1):
            a, b = acts[k], acts[k + 1]
            if not {next(iter(a)), next(iter(b))} <= {"Bet", "Check", "Fold"}:
                continue
            names = {x["Bet"]["name"] for x in (a, b) if "Bet" in x}
            seats = {next(iter(a.values()))["Siege"], next(iter(b.values()))["Siege"]}
            if not names & {"ante", "small blind", "big blind", "bring-in"} and len(seats) == 2:
                pairs.append((acts, k))
    if not pairs:
        return False
    acts, k = rng.choice(pairs)
    acts[k], acts[k + 1] = acts[k + 1], acts[k]
    return True


def _winner_swapped(event: dict[str, Any], rng: random.Random) -> bool:
    return swap_winner(event, rng.choice)


MUTATIONS = {
    "card-dealt-twice": _dealt_twice,
    "amount-changed": _amount_changed,
    "actions-swapped": _swapped,
    "winner-swapped": _winner_swapped,
}


@pytest.mark.parametrize("regle", VARIANTS)
@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_mutation_of_a_real_hand_is_flagged(mutation, regle):
    sample = _sample(regle)
    if not sample:
        pytest.skip(f"no {regle} hand audits clean today: test_every_real_hand_audits_clean[{regle}] fails")
    rng = random.Random(f"{SEED}-{mutation}-{regle}")
    missed, mutated = [], 0
    for name, event in sample:
        if MUTATIONS[mutation](event, rng):
            mutated += 1
            if not audit(event):
                missed.append(name)
    assert mutated
    assert missed == [], f"{mutation} of these real {regle} hands went unflagged: {missed}"


# --------------------------------------------------------------------------- the writer, by hand


def test_the_writer_on_a_hand_worked_out_by_hand():
    """pluribus/100/0: blinds 50/100, every stack 10000. p4 raises to 210, p1 (small blind) calls 160,
    p2 folds; flop and turn checked; on the river p1 bets 230 and p4 folds: the 230 comes back.
    The pot of 520 goes to p1: 10310, as the dataset's finishing stacks say."""
    hand = next(h for name, h in corpus.hands() if name == "pluribus/100/0")
    pojeu = writer.to_pojeu(hand, "pluribus/100/0")["POJEU"]
    rounds = {t["name"]: t for t in pojeu["Jeu"]["Tour"]}
    assert list(rounds) == ["bet", "pre-flop", "flop", "turn", "river"]
    assert rounds["bet"]["Total"] == "150"
    assert rounds["pre-flop"]["Total"] == "370"
    assert "Total" not in rounds["river"]
    assert rounds["river"]["Action"][-2:] == [
        {"Bet": {"name": "bet", "Siege": 1, "Valeur": "230"}},
        {"Fold": {"Siege": 4}},
    ]
    finance = {j["Siege"]: j["Finance"] for j in pojeu["Participants"]["Joueur"]}
    assert finance[1] == {"Net": "310", "Total": "210", "CaveAvant": "10000", "CaveApres": "10310"}
    assert finance[2] == {"Net": "-100", "Total": "100", "CaveAvant": "10000", "CaveApres": "9900"}
    assert finance[4] == {"Net": "-210", "Total": "210", "CaveAvant": "10000", "CaveApres": "9790"}
    assert rounds["pre-flop"]["Action"][:2] == [
        {"Draw": {"Siege": 1, "Valeur": writer.card_code("Tc")}},
        {"Draw": {"Siege": 1, "Valeur": writer.card_code("Qc")}},
    ]
    assert writer.card_code("Jh") == 38 and writer.card_code("2c") == 0 and writer.card_code("As") == 51


def test_the_writer_shares_nothing_with_what_it_tests():
    """The oracle imports neither coffre nor pokerkit: the standard library only."""
    for module in ("writer", "corpus"):
        tree = ast.parse((Path(writer.__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
        imported = {
            a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
        }
        imported |= {
            n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
        }
        assert imported <= set(sys.stdlib_module_names) | {"__future__"}, (module, imported)
