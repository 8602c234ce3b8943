"""``HashJoueur``: the player's identity as a SHA-1, checked where the event carries the identity.

The rule, as the regulator's samples reproduce it (``arjel-reference/README.md``)::

    HashJoueur = upper-case hex SHA1( PRENOM + NOM + AAAAMMJJ + VILLEN )

- ``PRENOM`` is the first ``Prenom`` element only (the sample's second, ``Guillaume Jacques``,
  is left out), ``NOM`` is ``Nom``, ``AAAAMMJJ`` is ``DateN``, ``VILLEN`` is ``VilleN``;
- each upper-cased, with hyphens and spaces removed, then concatenated with nothing between;
- the bytes hashed are the UTF-8 of that text.

Sample: ``Jean-pierre`` ``Dupond`` ``19791201`` ``Nice`` → ``JEANPIERREDUPOND19791201NICE`` →
``9853E488E24120BC18F9A650AED9CEE0FF72B09E``.

The texts say nothing of accents, apostrophes or other punctuation (the sample has none), nor of
a first ``Prenom`` holding several names. coffre accepts any of the readings an operator may have
made, and reports ``HASHJOUEUR_MISMATCH`` only when none of them gives the declared hash:

- accents kept (``HÉLÈNE``, UTF-8, or ISO-8859-1 where the text fits it) or stripped (``HELENE``;
  ``Œ``/``Æ`` written ``OE``/``AE``);
- apostrophes (and dots) kept (``D'ARC``) or removed (``DARC``);
- the whole first ``Prenom`` (``JEANPIERRE`` for ``Jean Pierre``) or only its first word (``JEAN``).

The comparison ignores the case of the hex digits. Only OUVINFOPERSO and MODIFINFOPERSO carry
Nom/Prenom/DateN/VilleN in the catalogue; every other event's ``HashJoueur`` is checked across
events (the trail: it must not change without a MODIFINFOPERSO).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import unicodedata
from collections.abc import Iterator

from ..catalogue.base import Event
from .findings import Finding, register

register(
    "identity",
    HASHJOUEUR_MISMATCH="an event's HashJoueur is not the SHA-1 of its own Prenom, Nom, DateN and VilleN",
)

_REMOVED = re.compile(r"[\s\-]+")
_PUNCTUATION = re.compile(r"['’.]+")
_LIGATURES = str.maketrans({"Œ": "OE", "Æ": "AE", "œ": "OE", "æ": "AE"})


def canonical_part(text: str, *, strip_accents: bool = False, keep_apostrophes: bool = True) -> str:
    """One field as the rule writes it: upper case, hyphens and spaces removed."""
    out = _REMOVED.sub("", text.upper())
    if not keep_apostrophes:
        out = _PUNCTUATION.sub("", out)
    if strip_accents:
        out = out.translate(_LIGATURES)
        out = "".join(c for c in unicodedata.normalize("NFKD", out) if not unicodedata.combining(c))
    return out


def identity_text(first_name: str, last_name: str, birth_date: str, birth_town: str, **options: bool) -> str:
    """``PRENOM + NOM + AAAAMMJJ + VILLEN`` (``options``: those of :func:`canonical_part`)."""
    return "".join(canonical_part(p, **options) for p in (first_name, last_name, birth_date, birth_town))


def hash_joueur(first_name: str, last_name: str, birth_date: str, birth_town: str) -> str:
    """The regulator's reading (accents and apostrophes kept, UTF-8): upper-case hex SHA-1."""
    text = identity_text(first_name, last_name, birth_date, birth_town)
    return hashlib.sha1(text.encode()).hexdigest().upper()


def accepted_hashes(
    first_names: list[str], last_name: str, birth_date: str, birth_town: str
) -> Iterator[str]:
    """Every reading coffre accepts, the regulator's first (see the module's docstring)."""
    first = first_names[0] if first_names else ""
    firsts = [first]
    words = first.split()
    if len(words) > 1:
        firsts.append(words[0])
    seen: set[bytes] = set()
    for given in firsts:
        for strip in (False, True):
            for keep in (True, False):
                text = identity_text(
                    given, last_name, birth_date, birth_town, strip_accents=strip, keep_apostrophes=keep
                )
                encodings = [text.encode()]
                if not strip:
                    with contextlib.suppress(UnicodeEncodeError):
                        encodings.append(text.encode("latin-1"))
                for data in encodings:
                    if data not in seen:
                        seen.add(data)
                        yield hashlib.sha1(data).hexdigest().upper()


def check_identity(event: Event) -> list[Finding]:
    """``HASHJOUEUR_MISMATCH`` when ``event`` carries the identity fields and none of the accepted
    readings gives its ``HashJoueur``; nothing otherwise."""
    fields = event.__dict__  # the model's fields (getattr on a field a model lacks goes through
    # pydantic's __getattr__: some 2 µs each, five times an event)
    declared = fields.get("HashJoueur")
    last_name = fields.get("Nom")
    first_names = fields.get("Prenom")
    birth_date = fields.get("DateN")
    birth_town = fields.get("VilleN")
    if not (
        isinstance(declared, str)
        and isinstance(last_name, str)
        and isinstance(first_names, list)
        and isinstance(birth_date, str)
        and isinstance(birth_town, str)
    ):
        return []
    wanted = declared.upper()
    if any(h == wanted for h in accepted_hashes(first_names, last_name, birth_date, birth_town)):
        return []
    expected = hash_joueur(first_names[0] if first_names else "", last_name, birth_date, birth_town)
    return [
        Finding(
            "HASHJOUEUR_MISMATCH",
            f"{event.xml_tag}: HashJoueur {declared} is not SHA1('{identity_text(first_names[0], last_name, birth_date, birth_town)}') "  # type: ignore[attr-defined]
            f"= {expected}, nor any accepted reading (accents or apostrophes removed, first word of Prenom)",
            player=getattr(event, "IDJoueur", None),
        )
    ]
