"""The events ``coffre up --demo`` publishes: coffre's own files, shipped in the package.

``events/annex/`` holds the facts of the six examples of annex 1.4.3 (poker, référentiel 2)
and ``events/tournament/`` a small tournament told from a deposit to a withdrawal; README.md
beside this file says where their facts come from. They are read with ``importlib.resources``,
so an installed wheel finds them as a clone does, from any folder, with nothing beside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from importlib.abc import Traversable
from typing import Any

from ..domain.catalogue.base import Event
from ..domain.codec import split_documents
from ..domain.errors import Rejected
from ..domain.normalize import normalize

EVENTS: Traversable = resources.files(__name__) / "events"
"""One folder per story, published in name order; in each, the event files in name order."""


@dataclass(frozen=True, slots=True)
class DemoEvent:
    story: str
    """The folder: ``annex`` or ``tournament``."""
    name: str
    """The file name (``#2`` … appended for the second … event of a file holding several)."""
    raw: bytes
    event: Event
    """The event normalized: what the vault will record (but its IDEvt)."""

    @property
    def line(self) -> str:
        """``annex 1.4.3.a: arjel-demo01 registers for NPT16 …``: the file's number, then the story."""
        return f"{self.story} {self.name.split('-', 1)[0]}: {narrate(self.event)}"


class DemoEventError(ValueError):
    """Demo events that do not normalize (one line per problem, file named)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def demo_files(root: Traversable | None = None) -> Iterator[tuple[str, str, bytes]]:
    """(story, file name, bytes) of each event under ``root`` (default: the packaged ``events``)."""
    folders = sorted((f for f in (root or EVENTS).iterdir() if f.is_dir()), key=lambda f: f.name)
    for folder in folders:
        files = sorted(
            (f for f in folder.iterdir() if f.is_file() and f.name.endswith((".xml", ".json"))),
            key=lambda f: f.name,
        )
        for file in files:
            documents = split_documents(file.read_bytes())
            for index, raw in enumerate(documents, start=1):
                yield folder.name, file.name if index == 1 else f"{file.name}#{index}", raw


def load_demo(root: Traversable | None = None) -> list[DemoEvent]:
    """Every demo event, normalized; :class:`DemoEventError` naming each one that is refused."""
    events: list[DemoEvent] = []
    problems: list[str] = []
    for story, name, raw in demo_files(root):
        try:
            events.append(DemoEvent(story, name, raw, normalize(raw)))
        except Rejected as refusal:
            problems.extend(f"{story}/{name}: {p.code} {p.path}: {p.message}" for p in refusal.problems)
    if not events and not problems:
        problems.append(f"no event file (.xml, .json) under {root or EVENTS}")
    if problems:
        raise DemoEventError(problems)
    return events


def expected_findings(events: list[DemoEvent]) -> list[tuple[str, int, str, tuple[str, ...]]]:
    """What the auditor must report of the demo: (IDOper, IDCoffre, event type, sorted codes) of each
    event with findings, from the same audit run here over each coffre's events in order (the
    auditor follows each coffre's money trail from its first event, as here), numbered as ingest
    numbers them: IDEvt 1, 2, … per coffre in publication order, with no gap (the files' own IDEvt,
    such as the annex examples' 1337…1361, are not what the auditor sees)."""
    from ..domain.audit.events import audit_event
    from ..domain.audit.trail import MoneyTrail

    trail = MoneyTrail()  # its keys begin with the coffre: one trail follows each coffre apart
    expected = []
    numbers: dict[tuple[str, int], int] = {}
    for demo in events:
        coffre = (demo.event.id_oper, demo.event.id_coffre)
        numbers[coffre] = numbers.get(coffre, 0) + 1
        event = demo.event.model_copy(update={"IDEvt": numbers[coffre]})
        findings = audit_event(event, trail)
        if findings:
            expected.append(
                (event.id_oper, event.id_coffre, event.xml_tag, tuple(sorted(f.code for f in findings)))
            )
    return expected


# -- one line of story per event ---------------------------------------------------------------------


def _balance(event: Any) -> str:
    """The financial movement: ``balance 50.00 -> 40.00`` (or the bonus balance's)."""
    for kind, prefix in (("balance", "Solde"), ("bonus", "Bonus")):
        before = getattr(event, f"{prefix}Avant", None)
        if before is not None:
            return f"{kind} {before} -> {getattr(event, f'{prefix}Apres')}"
    return "no movement"


def _moved(event: Any) -> Decimal:
    return getattr(event, "SoldeMouvement", None) or getattr(event, "BonusMouvement", None) or Decimal(0)


def _hand(event: Any) -> str:
    """Who won what, whether at showdown, who is out."""
    players = event.Participants.Joueur
    unit = next((f" {j.Finance.Unite}" for j in players if j.Finance.Unite), "")
    winners = [f"{j.IDJoueur} wins {j.Finance.Net}{unit}" for j in players if j.Finance.Net > 0]
    showdown = any(a.xml_tag == "Reveal" for tour in event.Jeu.Tour for a in tour.Action)
    outcome = " and ".join(winners) or "nobody ends ahead"
    outcome += " at showdown" if showdown else " uncontested" if winners else ""
    rake = sum((j.Finance.Rake or 0 for j in players), Decimal(0))
    if rake:
        outcome += f", rake {rake}"
    out = [j.IDJoueur for j in players if j.Finance.CaveApres == 0 and j.Finance.CaveAvant > 0]
    if out:
        outcome += f"; {' and '.join(out)} {'is' if len(out) == 1 else 'are'} bust"
    return f"hand {event.Pool} of {event.Tech}, {len(players)} players, {event.Description}: {outcome}"


def narrate(event: Any) -> str:
    """One line telling what the event says happened, for the demo's output."""
    tag = event.xml_tag
    who = getattr(event, "IDJoueur", "")
    amount, money = _moved(event), f"({_balance(event)})"
    if tag == "POINSCRIT":
        return f"{who} registers for {event.Tech} and pays {amount} {money}"
    if tag in ("POACHAT", "POGAIN"):
        verb = "pays" if tag == "POACHAT" else "is paid"
        return f"{who} {verb} {amount} during {event.Tech}: {event.Description or event.Motif} {money}"
    if tag == "POBILAN":
        place = f" in place {event.Classement}" if event.Classement is not None else ""
        paid = f"is paid {amount}" if amount else "has nothing to be paid"
        return f"{who} ends {event.Tech}{place} and {paid} {money}"
    if tag == "POANNUL":
        why = event.Motif + (f": {event.Info}" if event.Info else "")
        return f"{who}'s registration {event.Inscription} to {event.Tech} is cancelled ({why}) and refunded {amount} {money}"
    if tag == "POJEU":
        return _hand(event)
    if tag == "CPTEALIM":
        return f"{who} deposits {amount} by {event.TypeMoyenPaiement} {money}"
    if tag == "CPTERETRAIT":
        return f"{who} withdraws {amount} {money}"
    return f"{tag}" + (f" of {who}" if who else "")
