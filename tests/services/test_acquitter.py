"""The acquittal decisions, without Kafka: never before the record, never for synthesis
or supervised events, late records counted once."""

from __future__ import annotations

from coffre_acquittal.service import Acquitter

from coffre.domain.messages import (
    EVENT_TYPE,
    ID_COFFRE,
    ID_EVT,
    ID_OPER,
    INGESTED_AT,
    SUPERVISED,
    Acquittal,
    Receipt,
    Rejection,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def receipt(
    event_type: str = "POINSCRIT", id_evt: int = 1, supervised: bool = False, ingested_at: float = 1000.0
) -> Receipt:
    return Receipt("0099", 7, id_evt, event_type, "ab" * 32, f"req-{id_evt}", supervised, ingested_at)


def normalized_headers(event_type: str = "POINSCRIT", id_evt: int = 1, supervised: bool = False) -> list:
    return [
        (EVENT_TYPE, event_type.encode()),
        (ID_OPER, b"0099"),
        (ID_COFFRE, b"7"),
        (ID_EVT, str(id_evt).encode()),
        (SUPERVISED, b"1" if supervised else b"0"),
        (INGESTED_AT, b"1000.0"),
    ]


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


def test_late_records_are_counted_once_whether_seen_waiting_or_at_receipt():
    clock = Clock()
    acquitter = Acquitter({"POJEU"}, late_after=2.0, clock=clock)
    acquitter.on_normalized(normalized_headers(id_evt=1))
    acquitter.on_normalized(normalized_headers(id_evt=2))
    acquitter.on_normalized(normalized_headers("POJEU", id_evt=3))  # never awaited
    clock.now = 1001.0
    acquitter.sweep()
    assert acquitter.stats.late == 0
    clock.now = 1003.0
    acquitter.sweep()
    acquitter.sweep()
    assert acquitter.stats.late == 2  # IDEvt 1 and 2, once each
    acquitter.on_receipt(receipt(id_evt=1))
    assert acquitter.stats.late == 2  # already reported while waiting
    acquitter.on_receipt(receipt(id_evt=4, ingested_at=1000.0))  # late, never seen waiting
    assert acquitter.stats.late == 3
    assert acquitter.stats.latencies[-1] == 3.0


def test_the_acquittal_of_an_input_that_is_no_event_round_trips():
    refusal = Rejection(
        "req-3", None, None, [{"code": "EMPTY_INPUT", "path": "/", "message": "m"}], b"", "in", 0, 1
    )
    acquittal = Acquitter({"POJEU"}, 2.0).on_rejection(refusal)
    assert Acquittal.decode(acquittal.encode()) == acquittal
    assert Acquittal.decode(b'{"status":"rejected","reasons":[]}').correlation_id is None
