"""The audit of what operators declare (issue 12): findings are evidence, never refusals.

- :mod:`.findings`: the :class:`Finding` every check reports, and the catalogue of codes.
- :mod:`.hand`: one ``POJEU`` replayed with pokerkit (cards, order and legality, showdown)
  and its money checked (rounds' totals, each player's ``Finance``).
- :mod:`.single`: the checks of one event alone (its balance arithmetic, its ``HashJoueur``),
  run by ingest so that an event's acquittal carries them.
- :mod:`.trail`: the checks across events (a player's balances chaining, registrations,
  ``POBILAN``, ``POANNUL``), over a small key/value store (a dict, or the auditor's tables).
"""

from . import _pokerkit  # noqa: F401  (before pokerkit: its hand tables built once per kind)
