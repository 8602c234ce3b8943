"""coffre: a signed, hash-chained vault for French licensed online-gambling operators."""

__version__ = "0.1.0"
