"""Real hands for the hand audit: a reader of the PHH corpus in tests/fixtures/phh and the tests' own
writer of POJEU, independent of coffre's (coffre/domain/audit/play.py) and of the engine it audits with.

``corpus.hands()`` yields the corpus's hands as PHH dicts, ``writer.to_pojeu()`` turns one into a POJEU
JSON dict (or raises ``writer.Skip`` with the reason the annex cannot express it), ``triage`` prints
what today's audit finds on them (``python -m tests.phh.triage``).
"""
