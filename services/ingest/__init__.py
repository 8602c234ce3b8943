"""ingest: normalizes operator events, assigns IDEvt (gapless per coffre), publishes them.

A consumer as a chain of steps (after Sentry's arroyo): read a batch from
``coffre.events.in`` -> fold it into the partition's state (normalize each message, the
domain core; assign IDEvt or forward it to its coffre's partition) -> publish every output and
wait for the broker's acknowledgements -> commit the input offsets; the state is snapshotted to
``<prefix>ingest.state`` every few seconds (``app.py``, ``docs/architecture.md``).
"""
