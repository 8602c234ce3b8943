"""The consumer-group settings the chaos run tunes (no broker): every group's session and static
membership (docs/operations.md, "Timeouts after a hit")."""

from __future__ import annotations

from coffre.adapters.stream import group_options
from coffre.config import Settings


def test_every_group_takes_the_ingest_session_unless_its_own_is_set():
    options = group_options(Settings())
    assert (options["session_timeout_ms"], options["heartbeat_interval_ms"]) == (3000, 500)
    assert group_options(Settings(ingest_session_seconds=6))["session_timeout_ms"] == 6000
    assert (
        group_options(Settings(ingest_session_seconds=6, kafka_session_seconds=2))["session_timeout_ms"]
        == 2000
    )
    # ingest passes its own
    assert group_options(Settings(kafka_session_seconds=2), 1.5)["session_timeout_ms"] == 1500
    assert "group_instance_id" not in options


def test_a_static_member_name_is_given_only_to_a_consumer_that_joins_its_group():
    settings = Settings(kafka_group_instance_id="coffre-vault-0")
    assert group_options(settings)["group_instance_id"] == "coffre-vault-0"
    # a vault replica assigned its partitions by hand is no member: a static name would be refused
    assert "group_instance_id" not in group_options(settings, joins=False)
    assert "group_instance_id" not in group_options(Settings(kafka_group_instance_id=""))
