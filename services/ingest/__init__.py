"""ingest: normalizes operator events, assigns IDEvt (gapless per coffre), publishes them.

A consumer as a chain of steps (after Sentry's arroyo): read a batch from
``coffre.events.in`` -> normalize each message (the domain core) -> in one durable
transaction, assign IDEvt and write each output to the outbox -> publish the outbox ->
mark it published; Kafka offsets are committed only after that (faust acks a batch
once this step returns).
"""
