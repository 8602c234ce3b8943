"""coffre's own events for the tests (not the regulator's): small hand-written poker events,
and the fixture files under ``tests/fixtures`` with their expected canonical output."""

from __future__ import annotations

from pathlib import Path

from coffre.domain.codec import canonical_bytes, split_documents
from coffre.domain.normalize import normalize

POINSCRIT = """<POINSCRIT>
  <IDOper>0099</IDOper>
  <IDCoffre>7</IDCoffre>
  <DateEvt>2026-03-01T10:00:00+01:00</DateEvt>
  <IDEvt>12</IDEvt>
  <IDJoueur>p-1</IDJoueur>
  <HashJoueur>a94a8fe5ccb19ba61c4c0873d391e987982fbbd3</HashJoueur>
  <IPJoueur>2001:0DB8:0000:0000:0000:0000:0000:0001</IPJoueur>
  <IDSession>s-1</IDSession>
  <Inscription>ins-1</Inscription>
  <Tech>T-1</Tech>
  <Description>Tournoi du dimanche</Description>
  <Format>T /AS</Format>
  <SoldeAvant>100.10</SoldeAvant>
  <SoldeMouvement>10.05</SoldeMouvement>
  <SoldeAprès>90.05</SoldeAprès>
</POINSCRIT>""".encode()


def pojeu(
    *, participants: int = 2, cards: tuple[int, ...] = (12, 51), regle: str = "THNL", extra_round: str = ""
) -> bytes:
    players = "".join(
        f"""<Joueur><IDOper>0099</IDOper><IDJoueur>p-{i}</IDJoueur><IPJoueur>192.0.2.{i}</IPJoueur>
        <Siege>{i}</Siege><Inscription>ins-{i}</Inscription>
        <Finance><Net>-1.00</Net><Total>1.00</Total><CaveAvant>10</CaveAvant><CaveApres>9</CaveApres></Finance></Joueur>"""
        for i in range(1, participants + 1)
    )
    draws = "".join(f"<Draw><Siege>1</Siege><Valeur>{c}</Valeur></Draw>" for c in cards)
    return f"""<POJEU><IDOper>0099</IDOper><IDCoffre>7</IDCoffre><DateEvt>260301100000</DateEvt><IDEvt>13</IDEvt>
    <Tech>T-1</Tech><Pool>1</Pool><Participants>{players}</Participants><Regle>{regle}</Regle>
    <Description>THNL 1/2</Description><Jeu>
    <Tour name="bet"><Timestamp>260301100001</Timestamp><Bet name="small blind"><Siege>1</Siege><Valeur>1</Valeur></Bet>
    <Bet name="big blind"><Siege>2</Siege><Valeur>2</Valeur></Bet><Total>3</Total></Tour>
    <Tour name="pre-flop"><Timestamp>260301100002</Timestamp>{draws}<Fold><Siege>1</Siege></Fold></Tour>{extra_round}
    </Jeu></POJEU>""".encode()


# --------------------------------------------------------------------------- the fixture files

FIXTURES = Path(__file__).resolve().parent / "fixtures"
"""coffre's own fixtures: ``events/<FAMILY>/<name>.xml|json`` (inputs, in the forms operators
send) and ``expected/<FAMILY>/<name>.xml`` (their canonical bytes, as ``coffre normalize``
prints them). ``<name>`` is the event type, or the event type, a dash and what the variant shows."""
EVENTS = FIXTURES / "events"
EXPECTED = FIXTURES / "expected"
FAMILIES = ("CJ", "PASP", "PAHI", "PO", "LOTI", "LOJI", "FA", "MO", "PDV")


def fixture_inputs(family: str | None = None, *, xml_only: bool = False) -> list[Path]:
    """The fixture input files (of one family), in a stable order."""
    folders = [EVENTS / family] if family else [EVENTS / f for f in FAMILIES]
    suffixes = (".xml",) if xml_only else (".xml", ".json")
    return sorted(p for folder in folders for p in folder.iterdir() if p.suffix in suffixes)


def expected_path(path: Path) -> Path:
    """Where the expected canonical output of a fixture input is."""
    return EXPECTED / path.parent.name / f"{path.stem}.xml"


def render(raw: bytes) -> bytes:
    """What ``coffre normalize`` prints for a file: each event's canonical bytes and a newline."""
    return b"".join(canonical_bytes(normalize(doc)) + b"\n" for doc in split_documents(raw))


def _find(name: str) -> Path:
    found = [p for p in fixture_inputs() if p.stem == name]
    if len(found) != 1:
        raise LookupError(f"{len(found)} fixture inputs are named {name!r}")
    return found[0]


def fixture(name: str) -> bytes:
    """A fixture input by name (``"CPTEREF"``, ``"PASPMISE-interleaved"``), as sent."""
    return _find(name).read_bytes()


def canonical(name: str) -> bytes:
    """The expected canonical bytes of a one-event fixture (schema form, ready to mutate)."""
    path = _find(name)
    if len(split_documents(path.read_bytes())) != 1:
        raise ValueError(f"{path.name} holds several events")
    return expected_path(path).read_bytes().removesuffix(b"\n")
