"""coffre's own limits (coffre/domain/limits.py): every hostile input is refused with a reason code,
in time linear in its size, and every refusal is bounded; the valid extremes pass."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from coffre.domain.codec import canonical_bytes
from coffre.domain.errors import Problem, ReasonCode, Rejected
from coffre.domain.limits import MAX_PROBLEM_TEXT, MAX_PROBLEMS
from coffre.domain.messages import HEADROOM, Rejection
from coffre.domain.normalize import normalize

from events import POINSCRIT
from hostile import Case, extreme_valid_cases, hostile_cases, poinscrit_json

# the header case is refused by ingest, not by normalize: its event is valid
BODY_CASES = [c for c in hostile_cases() if not c.headers]


@pytest.mark.parametrize("case", BODY_CASES, ids=lambda c: c.name)
def test_each_hostile_input_is_refused_with_its_code(case: Case):
    with pytest.raises(Rejected) as refused:
        normalize(case.value)
    refusal = refused.value
    assert "INTERNAL_ERROR" not in refusal.codes
    if case.code:
        assert case.code in refusal.codes
    assert len(refusal.problems) <= MAX_PROBLEMS
    assert all(
        len(p.path) <= MAX_PROBLEM_TEXT and len(p.message) <= MAX_PROBLEM_TEXT for p in refusal.problems
    )
    rejection = Rejection.of(refusal, case.value, [], "in", 0, 0)
    assert len(rejection.encode()) <= 1_000_000 - HEADROOM


@pytest.mark.parametrize("case", extreme_valid_cases(), ids=lambda c: c.name)
def test_the_valid_extremes_are_accepted(case: Case):
    assert canonical_bytes(normalize(case.value))


def test_an_exponent_form_within_the_limits_is_written_out():
    event = normalize(json.dumps(poinscrit_json()).replace('"100.10"', "1.5E+3").encode())
    assert event.SoldeAvant == Decimal(1500)
    assert b"<SoldeAvant>1500</SoldeAvant>" in canonical_bytes(event)


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("999999999999999999", True),  # 18 digits
        ("1000000000000000000", False),  # 19
        ("000000000000000000000000000001", True),  # leading zeros are not digits of the value
        ("-1", False),
    ],
)
def test_idcoffre_is_at_most_18_digits(value: str, accepted: bool):
    raw = json.dumps(poinscrit_json(IDCoffre=value)).encode()
    if accepted:
        assert normalize(raw).IDCoffre == int(value)
    else:
        with pytest.raises(Rejected):
            normalize(raw)


def test_problems_are_capped_and_counted():
    problems = [
        Problem(ReasonCode.UNEXPECTED_ELEMENT, f"/E/X[{i}]", "no element 'X' here") for i in range(250)
    ]
    refusal = Rejected(problems, "POINSCRIT")
    assert len(refusal.problems) == MAX_PROBLEMS and refusal.omitted == 150
    assert refusal.as_dict()["problems_omitted"] == 150


def test_a_long_path_or_message_is_cut_and_marked():
    problem = Problem(ReasonCode.UNEXPECTED_ELEMENT, "/" + "N" * 10_000, "m" * 10_000)
    assert len(problem.path) == MAX_PROBLEM_TEXT and problem.path.endswith("…")
    assert len(problem.message) == MAX_PROBLEM_TEXT


def test_structure_past_coffre_s_limits_is_refused_where_it_is():
    deep = POINSCRIT.replace(b"</POINSCRIT>", b"<a>" * 40 + b"</a>" * 40 + b"</POINSCRIT>")
    crowded = POINSCRIT.replace(b"<Tech>", b"<Tech " + b" ".join(b'x%d="1"' % i for i in range(17)) + b">")
    many = POINSCRIT.replace(b"</POINSCRIT>", b"<X/>" * 20_001 + b"</POINSCRIT>")
    for raw, message, path in (
        (deep, "levels of nesting", "/"),
        (crowded, "attributes on one element", "/POINSCRIT/Tech"),
        (many, "elements", "/"),
    ):
        with pytest.raises(Rejected) as refused:
            normalize(raw)
        (problem,) = refused.value.problems
        assert (problem.code, problem.path) == (ReasonCode.LIMIT_EXCEEDED, path)
        assert message in problem.message
    at_the_limit = POINSCRIT.replace(
        b"<Tech>", b"<Tech " + b" ".join(b'x%d="1"' % i for i in range(16)) + b">"
    )
    with pytest.raises(Rejected) as refused:
        normalize(at_the_limit)
    assert "LIMIT_EXCEEDED" not in refused.value.codes  # 16 are coffre's bound: the schema refuses them
