"""witness: ``coffre witness``, run by the regulator: it cosigns each coffre's new checkpoint once
a consistency proof shows that it extends the one it cosigned before, and refuses a truncation,
a fork or a rewrite (services/witness/README.md, docs/witness.md)."""
