"""``coffre audit``: :mod:`.run` reads the inputs and replays them (the hands in worker processes,
:mod:`coffre.adapters.audit_workers`), :mod:`.report` writes the HTML report."""
