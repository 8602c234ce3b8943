"""The auditor service (``coffre auditor``): findings of recorded events to ``coffre.audit``."""
