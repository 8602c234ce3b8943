"""The command line's entry points, one module per command (:mod:`coffre.cli` parses and dispatches).

A command module reads its arguments, calls the domain and the adapters, prints, and returns the
exit status; it holds no rule of its own (a rule two commands need is the domain's). What two
commands share is a small module here (:mod:`.inputs`, :mod:`.stack`, :mod:`.verify`'s archive
walk).
"""
