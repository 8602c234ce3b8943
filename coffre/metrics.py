"""The Prometheus metrics of the three services (PRODUCT.md, Operations). Each process
exposes the ones it updates on ``/metrics`` (see coffre.ops); names are stable for alerts."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# fsync and seal times: from a fraction of a millisecond on a good disk to seconds on a sick one
_SYNC_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)

EVENTS_IN = Counter("coffre_events_in_total", "Input messages read by ingest from events.in")
EVENTS_NORMALIZED = Counter(
    "coffre_events_normalized_total", "Events normalized and given an IDEvt by ingest", ["event_type"]
)
INPUTS_REDELIVERED = Counter(
    "coffre_inputs_redelivered_total",
    "Inputs ingest folded again after taking a partition over, whose outputs were already on Kafka",
)
INPUTS_FORWARDED = Counter(
    "coffre_inputs_forwarded_total",
    "Inputs ingest forwarded to the partition of events.in that owns their coffre (not keyed by IDCoffre)",
)
FORWARDED_DUPLICATES = Counter(
    "coffre_forwarded_duplicates_total",
    "Forwarded copies a partition had already folded (a forwarder re-sent them after a take-over)",
)
SNAPSHOTS = Counter("coffre_ingest_snapshots_total", "Partition snapshots ingest wrote to its state topic")
PARTITIONS_OWNED = Gauge("coffre_ingest_partitions", "Partitions of events.in this ingest replica folds")
EVENTS_REJECTED = Counter(
    "coffre_events_rejected_total", "Inputs refused by ingest, by reason code", ["reason"]
)
INTERNAL_ERRORS = Counter(
    "coffre_internal_errors_total",
    "Inputs that met a defect of coffre's and were refused with INTERNAL_ERROR instead of stopping "
    "the service: alert on any increase",
    ["service"],
)
EVENTS_RECORDED = Counter("coffre_events_recorded_total", "Events durably appended to a vault journal")
EVENTS_REDELIVERED = Counter(
    "coffre_events_redelivered_total", "Events the vault had already recorded (receipt re-emitted)"
)
RECEIPTS_ACKNOWLEDGED = Counter(
    "coffre_vault_receipts_acknowledged_total",
    "Redelivered events whose receipt the vault had published before a restart or a rebalance (below the "
    "acknowledged position of its committed offset's metadata): checked again, receipt not sent again",
)
OFFSET_METADATA_REFUSED = Counter(
    "coffre_vault_offset_metadata_refused_total",
    "Committed offset metadata of the vault's group that did not verify (malformed, or no valid tag): "
    "ignored, every receipt sent again; any is worth a look (who writes the vault's group?)",
    ["reason"],
)
EVENTS_SKIPPED = Counter(
    "coffre_vault_skipped_total", "Messages the vault passed over without recording them", ["reason"]
)
FOREIGN_RECORDS = Counter(
    "coffre_foreign_records_total",
    "Records on coffre's own topics that coffre did not write (no valid coffre-auth tag, or misplaced), "
    "refused and never obeyed: any is worth an alert (a platform or a stranger writes where it should not)",
    ["service", "reason"],
)
FSYNC_SECONDS = Histogram(
    "coffre_fsync_seconds",
    "Time of one durable write (vault journal group commit, ingest snapshot)",
    ["store"],
    buckets=_SYNC_BUCKETS,
)
LOTS_SEALED = Counter("coffre_lots_sealed_total", "Lots sealed, signed and stored")
LOT_SEAL_SECONDS = Histogram(
    "coffre_lot_seal_seconds", "Time to build, sign and store one lot", buckets=_SYNC_BUCKETS
)
SEAL_FAILURES = Counter(
    "coffre_lot_seal_failures_total",
    "Seals that failed and will be tried again (storage unreachable...): the archive lags the journal",
)
ACQUITTALS = Counter("coffre_acquittals_total", "Acquittals published, by status", ["status"])
ACQUITTAL_LATENCY = Histogram(
    "coffre_acquittal_latency_seconds",
    "From ingest's normalization of an event to its acquittal being published",
    buckets=_LATENCY_BUCKETS,
)
LATE_RECORDS = Counter(
    "coffre_late_records_total", "Acquittable events whose record came later than COFFRE_LATE_AFTER_SECONDS"
)
UNREADABLE = Counter("coffre_unreadable_records_total", "Records a service could not read and passed over")
CONSUMER_LAG = Gauge(
    "coffre_consumer_lag", "Records not yet handled: high watermark minus position", ["topic", "partition"]
)
READY = Gauge("coffre_ready", "1 when every readiness check holds")
API_REQUESTS = Counter(
    "coffre_api_requests_total", "Regulator API requests answered (and logged), by HTTP status", ["status"]
)
API_REQUEST_SECONDS = Histogram(
    "coffre_api_request_seconds",
    "Regulator API: from a request to its answer being ready to send (an export once its bundle is built)",
    buckets=_LATENCY_BUCKETS,
)
AUDIT_EVENTS = Counter(
    "coffre_audit_events_total", "Recorded events the auditor audited, by event type", ["event_type"]
)
FINDINGS = Counter(
    "coffre_findings_total",
    "Findings of the audit, by code and by where they were found: ingest (an event's own checks, "
    "carried by its acquittal) or auditor (every check, on coffre.audit)",
    ["code", "source"],
)
AUDIT_NOT_CHECKED = Counter(
    "coffre_audit_not_checked_total",
    "Times the auditor could not judge a rule because the events it needs are not in what it audited "
    "(not checked, context absent: a coffre whose IDEvt did not start at 1 or had a gap), by finding code",
    ["code"],
)
AUDIT_SECONDS = Histogram(
    "coffre_audit_seconds",
    "Time to audit one event (decoding, its own checks, its hand replayed, the money trail)",
    buckets=_SYNC_BUCKETS,
)
AUDIT_PUBLISHED = Counter(
    "coffre_audit_records_total", "Audit records the auditor published to coffre.audit (events with findings)"
)
CHECKPOINTS_UNTIMESTAMPED = Gauge(
    "coffre_checkpoints_untimestamped",
    "Checkpoints of the archive still without a time-stamp token from this TSA (fetched later, in order)",
    ["tsa"],
)
CHECKPOINT_UNTIMESTAMPED_AGE = Gauge(
    "coffre_checkpoint_untimestamped_age_seconds",
    "Now minus the Date of the oldest checkpoint without a token from this TSA (0: none missing)",
    ["tsa"],
)
CHECKPOINTS_UNCOSIGNED = Gauge(
    "coffre_checkpoints_uncosigned",
    "Checkpoints of the archive still without a cosignature from this witness (sent later, in order)",
    ["witness"],
)
CHECKPOINT_UNCOSIGNED_AGE = Gauge(
    "coffre_checkpoint_uncosigned_age_seconds",
    "Now minus the Date of the oldest checkpoint without a cosignature from this witness (0: none missing)",
    ["witness"],
)
EVIDENCE_FAILURES = Counter(
    "coffre_evidence_failures_total",
    "Calls to a TSA or a witness that failed and will be tried again (no answer, a 5xx, an answer that "
    "does not verify): the evidence lags",
    ["kind", "name"],
)
EVIDENCE_REFUSED = Counter(
    "coffre_evidence_refused_total",
    "Checkpoints a witness refused to cosign (truncation, fork, rewrite, signature): the witness says "
    "the archive is not what it cosigned, nothing more of that coffre is sent to it; alert on any",
    ["witness", "kind"],
)
CONSOLE_INDEX_LAG = Gauge(
    "coffre_console_index_lag_seconds",
    "Age of the oldest sealed lot the console's index does not hold yet (0: every lot indexed)",
)
CONSOLE_INDEX_LOTS_BEHIND = Gauge(
    "coffre_console_index_coffres_behind", "Coffres with a sealed lot the console's index does not hold yet"
)
CONSOLE_INDEX_EVENTS = Counter("coffre_console_index_events_total", "Events added to the console's index")
CONSOLE_INDEX_REFUSED = Gauge(
    "coffre_console_index_refused_coffres",
    "Coffres whose next lot does not verify: the console's index stops before it (alert on any)",
)
