"""The acquittal decisions, without Kafka: never before the record, never for synthesis
or supervised events, late records (from the receipt's own times) counted once."""

from __future__ import annotations

from datetime import UTC, datetime

from coffre_acquittal.service import Acquitter

from coffre.domain.messages import Acquittal, Receipt, Rejection


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def receipt(
    event_type: str = "POINSCRIT",
    id_evt: int = 1,
    supervised: bool = False,
    ingested_at: float | None = 1000.0,
    recorded_after: float = 0.1,
    id_coffre: int = 7,
) -> Receipt:
    recorded_at = iso((ingested_at or 1000.0) + recorded_after)
    return Receipt(
        "0099",
        id_coffre,
        id_evt,
        event_type,
        "ab" * 32,
        f"req-{id_evt}",
        supervised,
        ingested_at,
        recorded_at,
    )


def test_recorded_acquittal_comes_from_the_receipt():
    acquitter = Acquitter({"POJEU"}, late_after=2.0, clock=Clock())
    acquittal = acquitter.on_receipt(receipt())
    assert acquittal is not None
    assert (acquittal.status, acquittal.correlation_id, acquittal.id_evt, acquittal.chain_hash) == (
        "recorded",
        "req-1",
        1,
        "ab" * 32,
    )


def test_no_acquittal_for_synthesis_or_supervised_events():
    acquitter = Acquitter({"POJEU"}, late_after=2.0, clock=Clock())
    assert acquitter.on_receipt(receipt("POJEU")) is None
    assert acquitter.on_receipt(receipt(id_evt=2, supervised=True)) is None
    assert acquitter.stats.not_acquitted == 2


def test_the_synthesis_set_is_configurable():
    acquitter = Acquitter({"POJEU", "FAJEU"}, late_after=2.0, clock=Clock())
    assert acquitter.on_receipt(receipt("FAJEU")) is None
    assert Acquitter(set(), late_after=2.0).on_receipt(receipt("POJEU")) is not None


def test_rejected_acquittal_carries_the_reasons():
    refusal = Rejection(
        "req-9",
        None,
        "POJEU",
        [{"code": "CARD_OUT_OF_RANGE", "path": "/POJEU/x", "message": "m"}],
        b"<POJEU/>",
        "in",
        0,
        5,
    )
    acquittal = Acquitter({"POJEU"}, 2.0).on_rejection(refusal)
    assert (acquittal.status, acquittal.correlation_id, acquittal.reasons[0]["code"]) == (
        "rejected",
        "req-9",
        "CARD_OUT_OF_RANGE",
    )


def test_a_record_is_late_when_its_receipt_came_later_than_late_after_after_ingest():
    acquitter = Acquitter({"POJEU"}, late_after=2.0, clock=Clock())
    acquitter.on_receipt(receipt(id_evt=1, recorded_after=1.9))
    acquitter.on_receipt(receipt(id_evt=2, ingested_at=None))  # an ingest time unknown: never late
    assert acquitter.stats.late == 0
    assert acquitter.on_receipt(receipt(id_evt=3, recorded_after=2.5)) is not None  # late, still acquitted
    assert acquitter.stats.late == 1
    acquitter.on_receipt(receipt(id_evt=3, recorded_after=2.5))  # the same receipt delivered again
    assert acquitter.stats.late == 1
    acquitter.on_receipt(receipt("POJEU", id_evt=4, recorded_after=60))  # no acquittal awaited: not counted
    acquitter.on_receipt(receipt(id_evt=5, supervised=True, recorded_after=60))
    assert acquitter.stats.late == 1
    acquitter.on_receipt(receipt(id_evt=6, recorded_after=3.0))
    assert acquitter.stats.late == 2
    assert acquitter.stats.recorded == 5 and acquitter.stats.not_acquitted == 2


def test_late_is_measured_from_the_receipt_not_from_when_the_acquittal_service_reads_it():
    clock = Clock()
    clock.now = 1000.0 + 3600  # read an hour later (the acquittal service was down): not the vault's fault
    acquitter = Acquitter({"POJEU"}, late_after=2.0, clock=clock)
    acquitter.on_receipt(receipt(id_evt=1, recorded_after=0.2))
    assert acquitter.stats.late == 0
    assert acquitter.stats.latencies == [3600.0]  # the player did wait that long for the acquittal


def test_a_receipt_carries_both_times_and_a_receipt_of_an_older_vault_still_reads():
    r = receipt(recorded_after=2.25)
    assert Receipt.decode(r.encode()) == r
    assert abs(r.recorded_after() - 2.25) < 0.001
    assert receipt(ingested_at=None).recorded_after() is None
    old = b'{"id_oper":"0099","id_coffre":7,"id_evt":1,"event_type":"POINSCRIT","chain_hash":"ab",'
    old += b'"correlation_id":null,"supervised":false,"ingested_at":null,"recorded_at":"2026-01-01T00:00:00"}'
    assert Receipt.decode(old).recorded_after() is None


def test_the_acquittal_of_an_input_that_is_no_event_round_trips():
    refusal = Rejection(
        "req-3", None, None, [{"code": "EMPTY_INPUT", "path": "/", "message": "m"}], b"", "in", 0, 1
    )
    acquittal = Acquitter({"POJEU"}, 2.0).on_rejection(refusal)
    assert Acquittal.decode(acquittal.encode()) == acquittal
    assert Acquittal.decode(b'{"status":"rejected","reasons":[]}').correlation_id is None


def test_late_records_are_logged_a_line_per_coffre_and_window_not_a_line_each(caplog, monkeypatch):
    """After a stall every record of the backlog is late: one line per coffre per LATE_LOG_SECONDS,
    then how many more (a chaos soak's stall wrote 9 MB of these lines in five minutes). The count
    and the metric still take every one."""
    import coffre_acquittal.service as service

    acquitter = Acquitter({"POJEU"}, late_after=2.0, clock=Clock())
    with caplog.at_level("WARNING", logger="coffre.acquittal"):
        for id_evt in range(1, 501):
            acquitter.on_receipt(receipt(id_evt=id_evt, recorded_after=5.0 + id_evt / 1000))
        acquitter.on_receipt(
            receipt(id_coffre=8, id_evt=1, recorded_after=3.0)
        )  # another coffre: its own line
    lines = [r.getMessage() for r in caplog.records]
    assert acquitter.stats.late == 501
    assert lines == [
        "late record: coffre 0099/7 IDEvt 1 recorded 5.001s after ingest",
        "late record: coffre 0099/8 IDEvt 1 recorded 3.000s after ingest",
    ]
    caplog.clear()
    monkeypatch.setattr(service, "LATE_LOG_SECONDS", 0.0)  # the window is over
    with caplog.at_level("WARNING", logger="coffre.acquittal"):
        acquitter.on_receipt(receipt(id_evt=501, recorded_after=2.5))
    summary, line = (r.getMessage() for r in caplog.records)
    assert summary.startswith("late records: 499 more of coffre 0099/7 in the last ")
    assert summary.endswith("the latest IDEvt 501, the longest recorded 5.500s after ingest")
    assert line == "late record: coffre 0099/7 IDEvt 501 recorded 2.500s after ingest"
