"""Property: whatever one input holds, normalize → fold → publish answers it with exactly one
record the producer takes, never raises, and the valid event after it still gets its IDEvt."""

from __future__ import annotations

import json

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from coffre_ingest.step import InputMessage
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from coffre.config import Settings
from coffre.domain.codec import Limits, canonical_bytes
from coffre.domain.messages import CORRELATION_ID, ID_COFFRE, ID_EVT, ID_OPER, SOURCE_ID, Rejection, header
from coffre.domain.normalize import normalize

from events import POINSCRIT
from hostile import poinscrit_json
from ingest_fold import IngestFold, ingest_batch

TOPICS = Settings().topics
FIELDS = list(poinscrit_json()["POINSCRIT"])

numbers = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.builds(
        lambda digits, exponent: f"{digits}E{exponent:+d}",
        st.integers(min_value=0, max_value=10**30),
        st.integers(min_value=-(10**10), max_value=10**10),
    ),
    st.builds(
        lambda whole, fraction: f"{whole}.{fraction}",
        st.integers(min_value=0, max_value=10**30),
        st.integers(min_value=0, max_value=10**30),
    ),
)
texts = st.one_of(
    st.text(max_size=50),
    st.builds(
        lambda ch, n: ch * n,
        st.sampled_from(["x", "é", "<", "&", '"', "\u0000", "€"]),
        st.integers(0, 1_200_000),
    ),
)


@st.composite
def hostile_inputs(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, bytes]]]:
    """A POINSCRIT with some fields replaced by extreme numbers, texts or structures, as JSON or XML,
    with extreme headers."""
    event = poinscrit_json()["POINSCRIT"]
    literals: dict[str, str] = {}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4, unique=True)):
        kind = draw(st.sampled_from(["number", "text", "list", "object"]))
        if kind == "number":
            literals[name] = draw(numbers)
        elif kind == "text":
            event[name] = draw(texts)
        elif kind == "list":
            event[name] = [draw(st.text(max_size=5))] * draw(st.integers(0, 30_000))
        else:
            event[name] = {f"k{i}": i for i in range(draw(st.integers(0, 30_000)))}
    for i in range(draw(st.integers(0, 3))):
        event[f"Extra{i}" * draw(st.integers(1, 5_000))] = "1"
    text = json.dumps({"POINSCRIT": event}, ensure_ascii=draw(st.booleans()))
    for name, literal in literals.items():
        text = text.replace(json.dumps(event[name]), literal, 1) if name in event else text
    raw = text.encode()
    if draw(st.booleans()):  # the XML form of a few of the same extremes
        value = literals.get("SoldeAvant") or draw(texts)
        raw = POINSCRIT.replace(b"100.10", value.encode("utf-8", "surrogatepass"), 1)
    headers = [
        (CORRELATION_ID, b"c" * draw(st.one_of(st.integers(0, 300), st.integers(0, 300_000)))),
        (SOURCE_ID, b"s" * draw(st.integers(0, 300))),
    ]
    return raw, headers


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    hostile=hostile_inputs(),
    max_message_bytes=st.integers(min_value=64 * 1024, max_value=1_000_000),
)
def test_any_input_is_answered_by_one_bounded_record_and_never_stops_the_next(
    hostile: tuple[bytes, list[tuple[str, bytes]]], max_message_bytes: int
):
    raw, headers = hostile
    fold = IngestFold()
    batch = [InputMessage(0, 0, raw, headers), InputMessage(0, 1, POINSCRIT, [(CORRELATION_ID, b"next")])]
    counts = ingest_batch(batch, fold, TOPICS, Limits(), max_message_bytes)
    rows = fold.unpublished()
    assert counts.accepted + counts.rejected == 2 and len(rows) == 2  # answered, once each
    for row in rows:  # bounded: the producer, given COFFRE_MAX_MESSAGE_BYTES, takes it
        size = DefaultRecordBatchBuilder.estimate_size_in_bytes(row.key, row.value, row.headers)
        assert size <= max_message_bytes
    first, after = rows
    if first.topic == TOPICS.rejected:
        rejection = Rejection.decode(first.value)
        assert rejection.codes and "INTERNAL_ERROR" not in rejection.codes, rejection.problems
        assert raw.startswith(rejection.original) and rejection.original_size == len(raw)
        event(f"rejected {sorted(set(rejection.codes))[:2]} truncated={rejection.truncated}")
    else:  # accepted: what was published is a normalized event, which normalizes to itself
        assert canonical_bytes(normalize(first.value)) == first.value
        event("accepted")
    assert after.topic == TOPICS.normalized
    same_coffre = first.topic == TOPICS.normalized and all(
        header(first.headers, name) == header(after.headers, name) for name in (ID_OPER, ID_COFFRE)
    )
    assert header(after.headers, ID_EVT) == ("2" if same_coffre else "1")
