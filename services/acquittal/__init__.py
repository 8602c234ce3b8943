"""acquittal: tells the platform it may acknowledge the player's operation, only after
the vault recorded it (annex 1.1.3), never for synthesis or supervised events."""
