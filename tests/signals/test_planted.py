"""signals/planted.py: the world of honest players and planted cheats, read back from its raw events.

The cheats' behaviour is counted here from the events alone (who acted how, facing whom, with which
cards), with a reading of the cards that is not the generator's own, so that what the signals are to
find is visible to anyone reading the hands.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from coffre.domain.audit import ranking
from coffre.domain.audit.hand import audit_hand
from coffre.domain.audit.trail import MoneyTrail
from coffre.domain.normalize import normalize
from coffre.domain.signals.planted import World, play_world


@pytest.fixture(scope="module")
def world() -> World:
    return play_world()


@pytest.fixture(scope="module")
def events(world: World) -> list[tuple[str, dict[str, Any]]]:
    """(type, body) of each event."""
    out = []
    for raw in world.events:
        ((kind, body),) = json.loads(raw).items()
        out.append((kind, body))
    return out


@pytest.fixture(scope="module")
def hands(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [body for kind, body in events if kind == "POJEU"]


def _when(text: str) -> float:
    if len(text) == 12:  # a Tour's aammjjhhmmss
        return datetime.strptime(text, "%y%m%d%H%M%S").replace(tzinfo=UTC).timestamp()
    return datetime.fromisoformat(text).timestamp()


def _players(hand: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {j["IDJoueur"]: j for j in hand["Participants"]["Joueur"]}


def _walk(hand: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each betting action of a hand: who, in which round, what it did (fold, check, call, raise),
    whether it faced a bet, who made the last bet or raise of the round before it (None: nobody, the
    blinds aside), who was still in the hand, its hole cards and the board it saw."""
    seats = {j["Siege"]: j["IDJoueur"] for j in hand["Participants"]["Joueur"]}
    live = set(seats)
    hole: dict[int, list[int]] = defaultdict(list)
    board: list[int] = []
    put: dict[int, Decimal] = {}
    for tour in hand["Jeu"]["Tour"]:
        name = tour["name"]
        if name == "bet":
            for action in tour["Action"]:
                bet = action["Bet"]
                put[bet["Siege"]] = put.get(bet["Siege"], Decimal(0)) + Decimal(bet["Valeur"])
            continue
        if name != "pre-flop":
            put = {}
        aggressor = None
        for action in tour["Action"]:
            ((kind, body),) = action.items()
            if kind == "Draw":
                (board if body.get("commune") else hole[body["Siege"]]).append(body["Valeur"])
                continue
            if kind == "Reveal":
                continue
            seat = body["Siege"]
            top, mine = max(put.values(), default=Decimal(0)), put.get(seat, Decimal(0))
            if kind == "Fold":
                act = "fold"
            elif kind == "Check":
                act = "check"
            else:
                after = put[seat] = mine + Decimal(body["Valeur"])
                act = "raise" if after > top else "call"
            yield {
                "round": name,
                "player": seats[seat],
                "act": act,
                "facing": top > mine,
                "aggressor": seats.get(aggressor) if aggressor is not None else None,
                "live": {seats[s] for s in live},
                "hole": list(hole[seat]),
                "board": list(board),
            }
            if act == "raise":
                aggressor = seat
            elif act == "fold":
                live.discard(seat)


def _grade(hole: list[int], board: list[int]) -> str:
    """strong, weak or middling, read simply: before the flop a pair of eights or better or two
    cards from the queen up are strong, two unpaired cards below the queen are weak; after it, top
    pair or better made with a hole card is strong, hole cards that pair nothing and make no
    straight or flush are weak."""
    ranks = sorted((c >> 2 for c in hole), reverse=True)
    if not board:
        if ranks[0] == ranks[1]:
            return "strong" if ranks[0] >= 6 else "middling"
        if ranks[1] >= 10:
            return "strong"
        return "weak" if ranks[0] < 10 else "middling"
    value = ranking.high(hole + board)
    category = value >> 20
    on_board = [c >> 2 for c in board]
    if category >= 4:
        return "strong"
    uses_hole = any(r in on_board for r in ranks) or ranks[0] == ranks[1]
    if category >= 2 and uses_hole and (category > 2 or len(set(on_board)) == len(on_board)):
        return "strong"
    pair = ((value >> 16) & 15) - 2
    if category == 1 and pair >= max(on_board) and pair in ranks:
        return "strong"
    if ranks[0] != ranks[1] and not any(r in on_board for r in ranks) and category <= 1:
        return "weak"
    return "middling"


# --------------------------------------------------------------------------- the world and its events


def test_the_world_is_numbered_in_time_order_and_counts_its_hands(world, events, hands):
    assert world.hands == len(hands) == 2500
    assert [body["IDEvt"] for _, body in events] == list(range(1, len(events) + 1))
    assert {body["IDOper"] for _, body in events} == {"0099"}
    assert {body["IDCoffre"] for _, body in events} == {1}
    dates = [_when(body["DateEvt"]) for _, body in events]
    assert dates == sorted(dates)
    assert {kind for kind, _ in events} == {"CPTEALIM", "POINSCRIT", "POACHAT", "POJEU", "POBILAN"}
    for hand in hands:  # rounds begin in order, the hand ends after its last round began
        stamps = [_when(t["Timestamp"]) for t in hand["Jeu"]["Tour"]]
        assert stamps == sorted(stamps) and stamps[-1] <= _when(hand["DateEvt"])
    assert 60 < world.cash_hand_interval < 3600


def test_the_same_seed_gives_the_same_bytes_and_another_seed_another_world():
    small = {"players": 14, "hands": 300, "days": 2, "tournaments": 1}
    first = play_world(**small, seed=5)
    assert play_world(**small, seed=5).events == first.events
    other = play_world(**small, seed=6)
    assert other.events != first.events
    assert first.hands == sum(e.startswith(b'{"POJEU"') for e in first.events) > 0


def test_every_event_normalizes_and_the_money_trail_finds_nothing(world):
    """Each POJEU audits clean on its own (below); read in order, every balance chains, every
    participant is registered (cash sittings too), every tournament's chips and blinds add up."""
    trail = MoneyTrail()
    findings = []
    kinds = Counter()
    for raw in world.events:
        event = normalize(raw)
        kinds[type(event).__name__] += 1
        findings += trail.observe(event)
    findings += [f for *_, f in trail.finish()]
    assert kinds["POJEU"] == world.hands
    assert findings == []


def test_a_sample_of_hands_audits_clean(world, hands):
    planted = world.planted
    pairs = [planted.chip_dumping, planted.soft_play, planted.same_person, planted.same_ip]
    tournament = [h for h in hands if h["Tech"].startswith("T-")]
    together = [h for h in hands if any(set(pair) <= set(_players(h)) for pair in pairs)]
    robot = [h for h in hands if planted.robot in _players(h)]
    rng = random.Random(1)
    sample = {id(h): h for h in [*tournament[:80], *together[:100], *robot[:40], *rng.sample(hands, 80)]}
    assert len(sample) >= 250
    for hand in sample.values():
        event = normalize(json.dumps({"POJEU": hand}).encode())
        assert audit_hand(event) == [], hand["Info"]


def test_tournaments_register_rise_their_blinds_and_end_with_a_winner(events, hands):
    registered = Counter(b["Tech"] for k, b in events if k == "POINSCRIT" and b["Format"] == "T")
    assert len(registered) == 2 and all(8 <= n <= 12 for n in registered.values())
    for tech in registered:
        played = [h for h in hands if h["Tech"] == tech]
        assert len(played) >= 30
        assert {j["Finance"]["CaveAvant"] for j in played[0]["Participants"]["Joueur"]} == {"1500"}
        big = [max(int(a["Bet"]["Valeur"]) for a in h["Jeu"]["Tour"][0]["Action"]) for h in played[:3]]
        assert big[0] == 20 and int(played[-1]["Description"].split("-")[-1].rstrip(")")) > 100
        places = [b["Classement"] for k, b in events if k == "POBILAN" and b["Tech"] == tech]
        assert sorted(places) == list(range(1, registered[tech] + 1))


# --------------------------------------------------------------------------- the planted cheats


def _flows(hands: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """Per (loser, winner), the money of the cash hands that went from one to the other: each loser's
    loss shared among the winners in proportion to their gains."""
    flows: Counter[tuple[str, str]] = Counter()
    for hand in hands:
        if hand["Tech"].startswith("T-"):
            continue
        nets = {j["IDJoueur"]: Decimal(j["Finance"]["Net"]) for j in hand["Participants"]["Joueur"]}
        won = {p: n for p, n in nets.items() if n > 0}
        for loser, net in nets.items():
            if net < 0:
                for winner, gain in won.items():
                    flows[loser, winner] += -net * gain / sum(won.values())
    return flows


def test_the_chip_dumper_pays_the_receiver(world, hands):
    """D calls R's bets with weak cards and folds strong ones to them; honest players do the opposite.
    D never bets or raises into R with a strong hand. The money goes one way, from D to R: of all
    pairs of players, the most (R's all-ins that D's weak calls win now and then, and pots D wins
    from others that R paid into, make the flow back)."""
    dumper, receiver = world.planted.chip_dumping
    honest = set(world.planted.honest)
    facing_r: Counter[tuple[str, str]] = Counter()
    facing_any: Counter[tuple[str, str]] = Counter()
    strong_into_r = together = 0
    sittings: dict[str, bool] = {}  # per cash sitting of R (its Inscription): whether D played at it
    for hand in hands:
        players = _players(hand)
        if dumper in players and receiver in players:
            together += 1
        if receiver in players and not hand["Tech"].startswith("T-"):
            inscription = players[receiver]["Inscription"]
            sittings[inscription] = sittings.get(inscription, False) or dumper in players
        for x in _walk(hand):
            grade = _grade(x["hole"], x["board"])
            if x["player"] == dumper and receiver in x["live"]:
                if x["facing"] and x["aggressor"] == receiver:
                    facing_r[grade, "fold" if x["act"] == "fold" else "on"] += 1
                elif x["act"] == "raise" and grade == "strong":
                    strong_into_r += 1
            elif x["player"] in honest and x["facing"] and x["aggressor"] is not None:
                facing_any[grade, "fold" if x["act"] == "fold" else "on"] += 1

    def share(counts: Counter[tuple[str, str]], grades: tuple[str, ...], act: str) -> tuple[float, int]:
        total = sum(counts[g, a] for g in grades for a in ("fold", "on"))
        return sum(counts[g, act] for g in grades) / max(total, 1), total

    assert together >= 60 and sum(sittings.values()) / len(sittings) >= 0.45  # D sits at most of R's tables
    weak_on, weak_n = share(facing_r, ("weak",), "on")
    strong_fold, strong_n = share(facing_r, ("strong",), "fold")
    assert weak_n >= 8 and weak_on >= 0.9
    assert strong_n >= 3 and strong_fold >= 0.75
    assert share(facing_any, ("weak",), "on")[0] < 0.25
    assert share(facing_any, ("strong",), "fold")[0] < 0.15
    assert strong_into_r == 0
    flows = _flows(hands)
    net = {(a, b): flows[a, b] - flows[b, a] for a, b in flows}
    assert max(net, key=net.__getitem__) == (dumper, receiver)  # of all pairs, the most one-sided
    assert flows[dumper, receiver] > 2 * flows[receiver, dumper]


def test_the_soft_players_never_bet_into_each_other(world, hands):
    first, second = world.planted.soft_play
    acts: Counter[tuple[bool, str]] = Counter()
    together = 0
    for hand in hands:
        if {first, second} <= set(_players(hand)):
            together += 1
        for x in _walk(hand):
            if x["player"] in (first, second):
                partner = second if x["player"] == first else first
                acts[partner in x["live"], x["act"]] += 1
    assert together >= 50
    assert sum(n for (live, _), n in acts.items() if live) >= 100
    assert acts[True, "raise"] == 0
    assert acts[False, "raise"] >= 20  # aggressive as anyone against the others


def test_the_two_accounts_of_one_person_share_a_hash(world, events, hands):
    first, second = world.planted.same_person
    hashes: dict[str, set[str]] = defaultdict(set)
    for _, body in events:
        if "HashJoueur" in body:
            hashes[body["IDJoueur"]].add(body["HashJoueur"])
    assert all(len(h) == 1 for h in hashes.values())
    assert hashes[first] == hashes[second]
    owners = Counter(next(iter(h)) for h in hashes.values())
    assert owners.most_common(2)[0][1] == 2 and owners.most_common(2)[1][1] == 1
    addresses = {b["IPJoueur"] for k, b in events if k == "CPTEALIM" and b["IDJoueur"] in (first, second)}
    assert len(addresses) >= 2  # one address now and then, two others
    assert any({first, second} <= set(_players(h)) for h in hands)


def test_the_household_plays_from_one_address_at_the_same_tables(world, events, hands):
    first, second = world.planted.same_ip
    hashes = {b["IDJoueur"]: b["HashJoueur"] for _, b in events if "HashJoueur" in b}
    assert hashes[first] != hashes[second]
    entered = defaultdict(set)
    for kind, body in events:
        if kind == "POINSCRIT" and body["Format"] == "T":
            entered[body["IDJoueur"]].add(body["Tech"])
    assert entered[first] & entered[second]  # one tournament together
    shared = [h for h in hands if {first, second} <= set(_players(h))]
    fewer = min(sum(first in _players(h) for h in hands), sum(second in _players(h) for h in hands))
    assert len(shared) >= 30 and len(shared) >= fewer / 3  # often at one table
    for hand in shared:
        players = _players(hand)
        assert players[first]["IPJoueur"] == players[second]["IPJoueur"]
    users: dict[str, set[str]] = defaultdict(set)
    for h in hands:
        for j in h["Participants"]["Joueur"]:
            users[j["IPJoueur"]].add(j["IDJoueur"])
    address = _players(shared[0])[first]["IPJoueur"]
    assert users[address] == {first, second}
    shared_addresses = {ip: who for ip, who in users.items() if len(who) > 1}
    assert set(shared_addresses) - {address} in (set(), {next(iter(shared_addresses.keys() - {address}), "")})
    assert all(who == set(world.planted.same_person) for ip, who in shared_addresses.items() if ip != address)


def _sessions(
    events: list[tuple[str, dict[str, Any]]], hands: list[dict[str, Any]], player: str
) -> list[dict]:
    """The player's sessions (from its CPTEALIM's IDSession), each with its hands' (start, end, Tech,
    Inscription)."""
    starts: dict[str, float] = {}
    for kind, body in events:
        if kind == "CPTEALIM" and body["IDJoueur"] == player:
            starts.setdefault(body["IDSession"], _when(body["DateEvt"]))
    ordered = sorted(starts.values())
    sessions: list[dict[str, Any]] = [{"start": t, "hands": []} for t in ordered]
    for hand in hands:
        joueur = _players(hand).get(player)
        if joueur is None:
            continue
        begin, end = _when(hand["Jeu"]["Tour"][0]["Timestamp"]), _when(hand["DateEvt"])
        k = max(i for i, t in enumerate(ordered) if t <= begin)
        sessions[k]["hands"].append((begin, end, hand["Tech"], joueur["Inscription"]))
    return [s for s in sessions if s["hands"]]


def _most_tables(played: list[tuple[float, float, str, str]]) -> int:
    """The most sittings (Inscriptions) of one session between their first hand and their last at once."""
    spans: dict[str, list[float]] = {}
    for begin, end, _, inscription in played:
        span = spans.setdefault(inscription, [begin, end])
        span[0], span[1] = min(span[0], begin), max(span[1], end)
    marks = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()])
    most = now = 0
    for _, step in marks:
        now += step
        most = max(most, now)
    return most


def test_the_robot_plays_all_day_and_night_on_many_tables_at_a_steady_pace(world, events, hands):
    robot = world.planted.robot
    sessions = _sessions(events, hands, robot)
    assert len(sessions) >= 4
    for s in sessions:
        span = max(e for _, e, _, _ in s["hands"]) - min(b for b, _, _, _ in s["hands"])
        assert span >= 16 * 3600
        assert _most_tables(s["hands"]) >= 4
        nights = {datetime.fromtimestamp(b, UTC).hour for b, *_ in s["hands"]}
        assert nights & {1, 2, 3}  # it plays through the night
    # a round of one action lasts the dealing (2 s) and one think time: the robot's, always the same
    lengths: dict[bool, list[float]] = {True: [], False: []}
    for hand in hands:
        tours = hand["Jeu"]["Tour"]
        seats = {j["Siege"]: j["IDJoueur"] for j in hand["Participants"]["Joueur"]}
        ends = [_when(t["Timestamp"]) for t in tours[1:]] + [_when(hand["DateEvt"])]
        for tour, end in zip(tours, ends, strict=True):
            acting = [a for a in tour["Action"] if next(iter(a)) in ("Bet", "Check", "Fold")]
            if tour["name"] != "bet" and len(acting) == 1:
                who = seats[next(iter(acting[0].values()))["Siege"]]
                lengths[who == robot].append(end - _when(tour["Timestamp"]))
    assert len(lengths[True]) >= 100 and len(lengths[False]) >= 100
    assert set(lengths[True]) <= {3.0, 4.0}
    assert max(lengths[False]) >= 15.0 and len(set(lengths[False])) >= 10


def test_the_honest_population_is_varied(world, events, hands):
    """Casual players, night owls and grinders (several tables, long sessions), none of them a robot."""
    spans, tables = [], []
    for player in world.planted.honest:
        for s in _sessions(events, hands, player):
            spans.append(max(e for _, e, _, _ in s["hands"]) - min(b for b, _, _, _ in s["hands"]))
            tables.append(_most_tables(s["hands"]))
    hours = sorted(x / 3600 for x in spans)
    assert hours[-1] < 12 and hours[len(hours) // 2] < 4 and sum(h >= 5 for h in hours) >= 5
    assert Counter(tables)[1] >= 20 and Counter(tables)[4] >= 5
    per_player = Counter(j["IDJoueur"] for h in hands for j in h["Participants"]["Joueur"])
    assert len([p for p in world.planted.honest if per_player[p]]) == len(world.planted.honest)
    night = Counter(
        j["IDJoueur"]
        for h in hands
        if datetime.fromtimestamp(_when(h["DateEvt"]), UTC).hour in (1, 2, 3, 4)
        for j in h["Participants"]["Joueur"]
    )
    assert len(set(night) & set(world.planted.honest)) >= 3
