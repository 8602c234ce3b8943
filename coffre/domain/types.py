"""The schema set's simple types, as pydantic ``Annotated`` types that normalize and check.

Each type accepts the forms an operator may send (the annex's and the schema's, XML text
or JSON values) and holds the one form the schema set defines, so that serializing a
validated model always yields schema-valid text. A value that cannot be normalized
raises a ``PydanticCustomError`` whose type is a :class:`~coffre.domain.errors.ReasonCode`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from .errors import ReasonCode
from .limits import (
    MAX_DECIMAL_FRACTION_DIGITS,
    MAX_DECIMAL_INTEGER_DIGITS,
    MAX_ID,
    MAX_INTEGER_DIGITS,
    MAX_TEXT_CHARS,
)

_WS = re.compile(r"[ \t\r\n]+")
_NOT_XML_CHAR = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


_T = TypeVar("_T")

MEMO_LONGEST = 64
"""Texts up to this length have their checked form remembered (:func:`_memo`)."""


MEMO_SIZE = 4096
"""Texts remembered per check (:func:`_memo`)."""


def _memo(check: Callable[[str], _T], size: int = MEMO_SIZE) -> Callable[[str], _T]:
    """``check`` of a text, remembered for short texts: a hand repeats its seats, amounts, player
    ids and dates many times, and an audit reads thousands of hands at one table. Only values are
    remembered (immutable: str, int, Decimal); a refusal is raised anew each time, as without the
    memo. Long texts are checked every time (the memo's memory stays small). The validators most
    called (patterns, enumerations, amounts, counts, IP addresses) write the same test inline."""
    remembered = lru_cache(maxsize=size)(check)

    def memo(text: str) -> _T:
        return remembered(text) if len(text) <= MEMO_LONGEST else check(text)

    return memo


def fail(code: ReasonCode, message: str, **ctx: Any) -> PydanticCustomError:
    """The error a validator raises: its type is the reason code."""
    return PydanticCustomError(str(code), message, ctx or None)


def collapse(value: str) -> str:
    """xs:token whitespace processing: trim and collapse inner runs to one space."""
    return _WS.sub(" ", value).strip()


def _text(value: Any) -> str:
    """Text content from XML (str) or JSON (str, or an integer for convenience).

    Characters XML 1.0 cannot carry (NUL, most controls, lone surrogates) are refused:
    JSON can hold them, the archive could not. No text is longer than
    :data:`~coffre.domain.limits.MAX_TEXT_CHARS`, whatever its type.
    """
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            raise fail(
                ReasonCode.LIMIT_EXCEEDED,
                "{length} characters: coffre takes at most {limit} in one value",
                length=len(value),
                limit=MAX_TEXT_CHARS,
            )
        bad = _NOT_XML_CHAR.search(value)
        if bad:
            raise fail(
                ReasonCode.INVALID_VALUE,
                "character {codepoint} cannot be written in XML",
                codepoint=f"U+{ord(bad.group()):04X}",
            )
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(_bounded_int(value))
    raise fail(ReasonCode.INVALID_VALUE, "expected text, got {kind}", kind=type(value).__name__)


# --------------------------------------------------------------------------- strings


Text = Annotated[str, BeforeValidator(_text)]
"""xs:string: kept exactly as sent."""


def pattern_type(
    regex: str,
    code: ReasonCode = ReasonCode.INVALID_VALUE,
    *,
    what: str = "value",
    token: bool = True,
    min_length: int | None = None,
    max_length: int | None = None,
    upper: bool = False,
) -> Any:
    """A string type restricted by an XSD pattern (implicitly anchored) and lengths.

    ``token`` applies xs:token whitespace collapsing first; ``upper`` upper-cases the
    value before checking (a normalization, documented per type).
    """
    compiled = re.compile(regex)

    def check(value: Any) -> str:
        if type(value) is str and len(value) <= MEMO_LONGEST:  # _memo, one call less
            return remembered(value)
        return checked(value)

    def checked(value: Any) -> str:
        text = _text(value)
        if token:
            text = collapse(text)
        if upper:
            text = text.upper()
        if max_length is not None and len(text) > max_length:
            raise fail(ReasonCode.TOO_LONG, "{what} longer than {max} characters", what=what, max=max_length)
        if (min_length is not None and len(text) < min_length) or not compiled.fullmatch(text):
            raise fail(
                code, "{what} '{value}' does not match {pattern}", what=what, value=text, pattern=regex
            )
        return text

    remembered = lru_cache(maxsize=MEMO_SIZE)(checked)
    return Annotated[str, BeforeValidator(check)]


def enum_type(
    values: Iterable[str], code: ReasonCode = ReasonCode.INVALID_VALUE, *, what: str = "value"
) -> Any:
    """A string restricted to an XSD enumeration (exact, case-sensitive match)."""
    allowed = tuple(values)

    def check(value: Any) -> str:
        if type(value) is str and len(value) <= MEMO_LONGEST:  # _memo, one call less
            return remembered(value)
        return checked(value)

    def checked(value: Any) -> str:
        text = _text(value).strip()
        if text not in allowed:
            raise fail(
                code,
                "{what} '{value}' is not one of {allowed}",
                what=what,
                value=text,
                allowed=", ".join(allowed),
            )
        return text

    remembered = lru_cache(maxsize=MEMO_SIZE)(checked)
    return Annotated[str, BeforeValidator(check)]


OpId = pattern_type(r"[0-9]{4}", ReasonCode.INVALID_OPERATOR_ID, what="operator id (4 digits)")
"""types:opId / Common ``operator``: the operator's 4-digit ARJEL number. Never padded."""

NumId = pattern_type(r"[0-9]+", what="numeric id")
Sha1 = pattern_type(r"[0-9A-F]{40}", ReasonCode.INVALID_HASH, what="SHA-1 (40 hex digits)", upper=True)
"""types:sha1. Lower-case hex is upper-cased; any other length or character is refused."""

Canonical = pattern_type(r"[A-Z0-9-]+", what="canonical code")
Extended = pattern_type(r"[A-Z() '-]+", what="extended code")
Reference = pattern_type(r"[a-zA-Z0-9._/#-]+", ReasonCode.INVALID_REFERENCE, what="reference")
Country = pattern_type(r"[A-Z]{2}", ReasonCode.INVALID_COUNTRY, what="ISO 3166-1 alpha-2 country", upper=True)
_CercleFormatPattern = pattern_type(
    r"(CG|T(DV)?(/[AGMS]+)?)|([0-9]+/[0-9]+/[0-9]+(/[SAG]+)?)", ReasonCode.INVALID_FORMAT_CODE, what="format"
)

_FR_CHARS = r"[0-9A-Za-zÀÂÄÇÉÈÊËÎÏÔÖÙÛÜŸàâäçéèêëîïôöùûüÿÆŒæœ€#$'()*+,./:;=?!@_ -]*"


def fr_string(max_length: int) -> Any:
    """Common.xsd ``string-N``: the ``fr`` character set, at most N characters."""
    return pattern_type(_FR_CHARS, what=f"string-{max_length}", max_length=max_length)


def _format_code(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub(r"\s*/\s*", "/", value)
    return value


CercleFormat = Annotated[_CercleFormatPattern, BeforeValidator(_format_code)]
"""cercle:format. The annex writes ``T /AS`` with a space: spaces around the slash are
removed before the check (``T /AS`` becomes ``T/AS``)."""


def empty_text(value: Any) -> str:
    """types:empty: a marker element with no content."""
    text = "" if value is None else _text(value)
    if text.strip():
        raise fail(ReasonCode.NOT_EMPTY, "element must be empty, holds '{value}'", value=text)
    return ""


# --------------------------------------------------------------------------- numbers

_XS_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)")
_XS_INTEGER = re.compile(r"[+-]?[0-9]+")


def _decimal(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise fail(ReasonCode.INVALID_DECIMAL, "expected a decimal, got a boolean")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise fail(ReasonCode.INVALID_DECIMAL, "decimal must be finite")
        result = value
    elif isinstance(value, int):
        result = Decimal(_bounded_int(value))
    elif isinstance(value, str):
        return _decimal_text(value)
    elif isinstance(value, float):
        raise fail(ReasonCode.INVALID_DECIMAL, "amounts are exact decimals: send text, not a binary float")
    else:
        raise fail(ReasonCode.INVALID_DECIMAL, "expected a decimal, got {kind}", kind=type(value).__name__)
    _check_digits(result)
    if result == 0:
        result = abs(result)  # -0.00 -> 0.00: one lexical form for zero
    return result


def _decimal_of_text(value: str) -> Decimal:
    text = value.strip()
    if not _XS_DECIMAL.fullmatch(text):
        raise fail(ReasonCode.INVALID_DECIMAL, "'{value}' is not an xs:decimal", value=value)
    try:
        result = Decimal(text)
    except InvalidOperation as exc:  # pragma: no cover - the pattern already excludes this
        raise fail(ReasonCode.INVALID_DECIMAL, "'{value}' is not a decimal", value=value) from exc
    _check_digits(result)
    if result == 0:
        result = abs(result)  # -0.00 -> 0.00: one lexical form for zero
    return result


_decimal_text = _memo(_decimal_of_text)


def _check_digits(value: Decimal) -> None:
    """coffre's bound on a decimal, read from its exponent and digit count (never by writing it
    out: ``1E+999999999`` would take gigabytes), so the check costs the same for any value."""
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite
    whole = len(digits) + exponent if digits != (0,) else 1
    if whole > MAX_DECIMAL_INTEGER_DIGITS:
        raise fail(
            ReasonCode.LIMIT_EXCEEDED,
            "a decimal of {digits} digits before the point: coffre takes at most {limit}",
            digits=whole,
            limit=MAX_DECIMAL_INTEGER_DIGITS,
        )
    if -exponent > MAX_DECIMAL_FRACTION_DIGITS:
        raise fail(
            ReasonCode.LIMIT_EXCEEDED,
            "a decimal of {digits} digits after the point: coffre takes at most {limit}",
            digits=-exponent,
            limit=MAX_DECIMAL_FRACTION_DIGITS,
        )


def _non_negative_decimal(value: Any) -> Decimal:
    if type(value) is str and len(value) <= MEMO_LONGEST:  # _memo, one call less
        return _non_negative_decimal_text(value)
    return _non_negative_decimal_of(value)


def _non_negative_decimal_of(value: Any) -> Decimal:
    result = _decimal(value)
    if result < 0:
        raise fail(ReasonCode.NEGATIVE_AMOUNT, "amount {value} is negative", value=str(value))
    return result


_non_negative_decimal_text = lru_cache(maxsize=MEMO_SIZE)(_non_negative_decimal_of)


def _too_many_digits() -> PydanticCustomError:
    return fail(
        ReasonCode.LIMIT_EXCEEDED,
        "an integer of more than {limit} digits: coffre takes at most {limit}",
        limit=MAX_INTEGER_DIGITS,
    )


def _bounded_int(value: int) -> int:
    if abs(value) >= 10**MAX_INTEGER_DIGITS:
        raise _too_many_digits()
    return value


def _integer(value: Any) -> int:
    """An integer of at most 18 digits, checked before it is converted (a 4,000-digit string or
    ``1E+999999999`` from JSON is refused in time linear in its length)."""
    if isinstance(value, bool):
        raise fail(ReasonCode.INVALID_INTEGER, "expected an integer, got a boolean")
    if isinstance(value, int):
        return _bounded_int(value)
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        if value and value.adjusted() >= MAX_INTEGER_DIGITS:
            raise _too_many_digits()
        return int(value)
    if isinstance(value, str):
        return _integer_text(value)
    raise fail(ReasonCode.INVALID_INTEGER, "'{value}' is not an integer", value=value)


def _integer_of_text(value: str) -> int:
    if _XS_INTEGER.fullmatch(value.strip()):
        digits = value.strip().lstrip("+-").lstrip("0")
        if len(digits) > MAX_INTEGER_DIGITS:
            raise _too_many_digits()
        return int(value.strip())
    raise fail(ReasonCode.INVALID_INTEGER, "'{value}' is not an integer", value=value)


_integer_text = _memo(_integer_of_text)


def _non_negative_integer(value: Any) -> int:
    if type(value) is str and len(value) <= MEMO_LONGEST:  # _memo, one call less
        return _non_negative_integer_text(value)
    return _non_negative_integer_of(value)


def _non_negative_integer_of(value: Any) -> int:
    result = _integer(value)
    if result < 0:
        raise fail(ReasonCode.INVALID_INTEGER, "{value} is negative", value=result)
    return result


_non_negative_integer_text = lru_cache(maxsize=MEMO_SIZE)(_non_negative_integer_of)


Dec = Annotated[Decimal, BeforeValidator(_decimal)]
"""xs:decimal, exact. Binary floats are refused; ``1E+3`` from JSON becomes 1000."""
NonNegDec = Annotated[Decimal, BeforeValidator(_non_negative_decimal)]
"""types:nonNegativeDecimal / Common ``mouvement``: refused with NEGATIVE_AMOUNT below zero."""
Integer = Annotated[int, BeforeValidator(_integer)]
NonNegInt = Annotated[int, BeforeValidator(_non_negative_integer)]


def _id_number(value: Any) -> int:
    result = _non_negative_integer(value)
    if result > MAX_ID:
        raise fail(ReasonCode.LIMIT_EXCEEDED, "{value} is over {limit}", value=result, limit=MAX_ID)
    return result


IdNumber = Annotated[int, BeforeValidator(_id_number)]
"""``IDCoffre`` and ``IDEvt``: 0 .. :data:`~coffre.domain.limits.MAX_ID`, the range every store,
archive path and the regulator API hold (the schema's ``xs:nonNegativeInteger`` is unbounded)."""


def bounded_integer(
    minimum: int | None = None, maximum: int | None = None, code: ReasonCode = ReasonCode.INVALID_INTEGER
) -> Any:
    def check(value: Any) -> int:
        result = _integer(value)
        if (minimum is not None and result < minimum) or (maximum is not None and result > maximum):
            raise fail(code, "{value} is outside {low}..{high}", value=result, low=minimum, high=maximum)
        return result

    return Annotated[int, BeforeValidator(check)]


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
    raise fail(ReasonCode.INVALID_BOOLEAN, "'{value}' is not an xs:boolean (true, false, 1, 0)", value=value)


Boolean = Annotated[bool, BeforeValidator(_boolean)]


# --------------------------------------------------------------------------- dates

_XS_DATETIME = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})T(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})"
    r"(?P<frac>\.[0-9]+)?(?P<tz>Z|[+-][0-9]{2}:[0-9]{2})?"
)
_XS_DATE = re.compile(r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})(Z|[+-][0-9]{2}:[0-9]{2})?")


def _parse_xs_datetime(text: str) -> datetime | None:
    """xs:dateTime to an aware UTC datetime; no zone means UTC (annex: dates are UTC)."""
    m = _XS_DATETIME.fullmatch(text)
    if not m:
        return None
    year, month, day, hour_text, minute_text, second_text, _, zone = m.groups()
    hour, minute, second = int(hour_text), int(minute_text), int(second_text)
    extra = None
    if hour == 24 and minute == 0 and second == 0:
        hour, extra = 0, timedelta(days=1)  # xs:dateTime allows 24:00:00, the next day's midnight
    offset = _zone_offset(zone) if zone and zone != "Z" else None
    try:
        moment = datetime(int(year), int(month), int(day), hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    if extra is not None:
        moment += extra
    return moment if offset is None else moment - offset  # the local time's instant, in UTC


@lru_cache(maxsize=256)
def _zone_offset(zone: str) -> timedelta:
    """The offset a ``±hh:mm`` zone names, as :class:`datetime.timezone` takes it (which refuses, with
    ValueError, one of 24 hours or more)."""
    sign = 1 if zone[0] == "+" else -1
    return timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))).utcoffset(None)


def _compact_writer(fmt: str) -> Callable[[datetime], str]:
    """``moment.strftime(fmt)`` for coffre's compact formats, written from the fields (strftime
    costs several microseconds an event; %-formatting half an f-string's format specs); any other
    format keeps strftime."""
    writers: dict[str, Callable[[datetime], str]] = {
        "%y%m%d%H%M%S": lambda m: (
            "%02d%02d%02d%02d%02d%02d" % (m.year % 100, m.month, m.day, m.hour, m.minute, m.second)  # noqa: UP031
        ),
        "%y%m%d%H%M": lambda m: "%02d%02d%02d%02d%02d" % (m.year % 100, m.month, m.day, m.hour, m.minute),  # noqa: UP031
    }
    return writers.get(fmt) or (lambda m: m.strftime(fmt))


@lru_cache(maxsize=4096)
def _checked_compact(text: str, fmt: str, what: str) -> str:
    """A date already in its compact form, kept as is once checked to be a real date."""
    if not _real_compact(("20" if fmt.startswith("%y") else "") + text, fmt.replace("%y", "%Y")):
        raise fail(ReasonCode.INVALID_DATE, "'{value}' is not a real {what}", value=text, what=what)
    return text


_COMPACT_FORMATS = {"%Y%m%d%H%M%S": 14, "%Y%m%d%H%M": 12, "%Y%m%d": 8}
"""The compact formats :func:`_real_compact` reads itself, and their length."""


def _real_compact(text: str, fmt: str) -> bool:
    """Whether ``datetime.strptime(text, fmt)`` succeeds, for digits of the format's length, in a
    quarter of its time (a hand's timestamps are all different, so the memo seldom answers).

    For ASCII digits the answer is strptime's: its two-digit alternatives for month, day, hour,
    minute and second (``1[0-2]|0[1-9]``, ``3[01]|[12]\\d|0[1-9]``…) cover exactly the fields'
    ranges (seconds up to 61); a field outside them leaves strptime a shorter match, hence
    "unconverted data remains"; within them, strptime's result is ``datetime(*fields)``, which
    refuses what it refuses (day 31 of a 30-day month, second 60, year 0). Other digits
    (``isdigit`` holds for Arabic-Indic ones) are left to strptime itself."""
    if _COMPACT_FORMATS.get(fmt) != len(text) or not (text.isascii() and text.isdigit()):
        try:
            datetime.strptime(text, fmt)
        except ValueError:
            return False
        return True
    try:
        datetime(int(text[:4]), *(int(text[i : i + 2]) for i in range(4, len(text), 2)))  # type: ignore[misc]
    except ValueError:
        return False
    return True


def _datetime_type(digits: int, fmt: str, what: str) -> Any:
    """A schema date in the compact UTC ``aammjj…`` form of ``digits`` digits."""

    write = _compact_writer(fmt)

    def check(value: Any) -> str:
        if isinstance(value, datetime):
            moment = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        else:
            text = _text(value).strip()
            if len(text) == digits and text.isdigit():
                return _checked_compact(text, fmt, what)
            moment = _parse_xs_datetime(text)
            if moment is None:
                raise fail(
                    ReasonCode.INVALID_DATE,
                    "'{value}' is neither {what} nor xs:dateTime",
                    value=text,
                    what=what,
                )
        if fmt.startswith("%y") and not 2000 <= moment.year <= 2099:
            raise fail(
                ReasonCode.INVALID_DATE,
                "year {year} cannot be written as {what}",
                year=moment.year,
                what=what,
            )
        if fmt.endswith("%M") and moment.second:
            raise fail(
                ReasonCode.INVALID_DATE, "{what} has no seconds, '{value}' has", what=what, value=str(value)
            )
        return write(moment)

    return Annotated[str, BeforeValidator(check)]


def _date_type(digits: int, fmt: str, what: str) -> Any:
    """A schema calendar date (``aammjj`` or ``aaaammjj``); also accepts xs:date."""

    def check(value: Any) -> str:
        if isinstance(value, date) and not isinstance(value, datetime):
            day = value
        else:
            text = _text(value).strip()
            if len(text) == digits and text.isdigit():
                return _checked_compact(text, fmt, what)
            m = _XS_DATE.fullmatch(text)
            if not m:
                raise fail(
                    ReasonCode.INVALID_DATE, "'{value}' is neither {what} nor xs:date", value=text, what=what
                )
            try:
                day = date(int(m["y"]), int(m["mo"]), int(m["d"]))
            except ValueError as exc:
                raise fail(ReasonCode.INVALID_DATE, "'{value}' is not a real date", value=text) from exc
        if fmt.startswith("%y") and not 2000 <= day.year <= 2099:
            raise fail(
                ReasonCode.INVALID_DATE, "year {year} cannot be written as {what}", year=day.year, what=what
            )
        return day.strftime(fmt)

    return Annotated[str, BeforeValidator(check)]


DateTime12 = _datetime_type(12, "%y%m%d%H%M%S", "aammjjhhmmss")
"""types:date-aammjjhhmmss: UTC. Accepts the compact form or xs:dateTime (zone converted to
UTC, no zone read as UTC, fractions of a second dropped)."""
DateTime10 = _datetime_type(10, "%y%m%d%H%M", "aammjjhhmm")
Date8 = _date_type(8, "%Y%m%d", "aaaammjj")
Date6 = _date_type(6, "%y%m%d", "aammjj")


# --------------------------------------------------------------------------- addresses

_ZONE = re.compile(r"[0-9a-z]+")


def _ip_address(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    text = _text(value).strip()
    try:
        return ipaddress.ip_address(text)
    except ValueError as exc:
        raise fail(ReasonCode.INVALID_IP, "'{value}' is not an IPv4 or IPv6 address", value=text) from exc


def _ip_compressed(value: Any) -> str:
    """types:IP: IPv4 dotted, or IPv6 in RFC 5952 form (compressed, lower case)."""
    if type(value) is str and len(value) <= MEMO_LONGEST:  # _memo, one call less
        return _ip_compressed_text(value)
    return _ip_compressed_of(value)


def _ip_compressed_of(value: Any) -> str:
    addr = _ip_address(value)
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.scope_id is not None and not _ZONE.fullmatch(addr.scope_id.lower()):
            raise fail(ReasonCode.INVALID_IP, "IPv6 zone '{zone}' is not [0-9a-z]+", zone=addr.scope_id)
        text = addr.compressed
        if addr.scope_id is not None:
            text = text.split("%")[0] + "%" + addr.scope_id.lower()
        return text
    return str(addr)


_ip_compressed_text = lru_cache(maxsize=MEMO_SIZE)(_ip_compressed_of)


def _ip_full(value: Any) -> str:
    """Common.xsd IP: IPv4 dotted, or IPv6 as all eight groups (the pattern has no ``::``)."""
    addr = _ip_address(value)
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.scope_id is not None:
            raise fail(ReasonCode.INVALID_IP, "this schema's IP type has no IPv6 zone")
        return ":".join(f"{int(group, 16):x}" for group in addr.exploded.split(":"))
    return str(addr)


IP = Annotated[str, BeforeValidator(_ip_compressed)]
IPFull = Annotated[str, BeforeValidator(_ip_full)]
