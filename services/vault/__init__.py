"""vault: records normalized events durably, hash-chained, one journal per coffre, and
publishes a receipt for each only after its fsync."""
