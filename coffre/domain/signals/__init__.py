"""Collusion and robot signals from the sealed hands (issue 33; décret 2016-1326 art. 8 I asks every
poker operator for « un système de détection des ententes entre joueurs et de détection des robots
informatiques »). Signals are reasons to look, never findings of the rules: docs/signals.md.

- :mod:`.facts`: what a ``POJEU`` (seats, cards, decisions, rounds' times) and a player event
  (IDJoueur, HashJoueur, IDSession, IP) tell the signals, in one pass;
- :mod:`.equity`: a player's share of the pot against one opponent, from both hands' cards;
- :mod:`.state`: the running counters per player and per pair, kept between runs;
- :mod:`.scores`: the signals, their thresholds and sources, the ranking;
- :mod:`.planted`: honest players and planted cheats played by coffre's own engine (the tests'
  and the bench's known answers).
"""
