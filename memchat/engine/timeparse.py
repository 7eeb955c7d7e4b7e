"""Lenient date parsing for tool arguments (reference §3.3, §3.4).

``parse_flexible_time`` accepts the twelve layouts of the reference's
``ParseFlexibleTime``, tried in the same order, and returns an aware UTC
``datetime`` (or ``None`` when nothing matches). ``end_of_period`` pushes an
upper bound to the last second of the period the raw text names, so that
``time_before="May 2024"`` includes the whole of May.

Parsing is done with explicit regular expressions instead of ``strptime`` so
that month names do not depend on the process locale. Month names are matched
case-insensitively, like Go's ``time.Parse``.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo

__all__ = ["end_of_period", "format_rfc3339", "parse_flexible_time"]

_LONG_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_LONG = {name: i + 1 for i, name in enumerate(_LONG_MONTHS)}
_SHORT = {name[:3]: i + 1 for i, name in enumerate(_LONG_MONTHS)}

_DATE = r"(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})"
_FRACTION = r"(?:\.(?P<f>\d{1,9}))?"
_CLOCK = r"(?P<H>\d{1,2}):(?P<M>\d{2}):(?P<S>\d{2})" + _FRACTION
#: RFC3339 wants a two-digit hour; the zone-less layouts accept one or two, like Go's "15".
_RFC_CLOCK = r"(?P<H>\d{2}):(?P<M>\d{2}):(?P<S>\d{2})" + _FRACTION
_SP = r"\s+"
_LONG_RE = r"(?P<mon>[A-Za-z]+)"
_SHORT_RE = r"(?P<mon>[A-Za-z]{3})"
_DAY = r"(?P<d>\d{1,2})"
_YEAR = r"(?P<y>\d{4})"

_Builder = Callable[["re.Match[str]"], datetime]


def _micros(fraction: str | None) -> int:
    if not fraction:
        return 0
    return int((fraction + "000000")[:6])


def _offset(zone: str) -> tzinfo:
    if zone in ("Z", "z"):
        return UTC
    sign = -1 if zone[0] == "-" else 1
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError("offset out of range")
    if hours == 0 and minutes == 0:
        return UTC
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _clock(m: re.Match[str], tz: tzinfo) -> datetime:
    return datetime(
        int(m["y"]),
        int(m["m"]),
        int(m["d"]),
        int(m["H"]),
        int(m["M"]),
        int(m["S"]),
        _micros(m["f"]),
        tzinfo=tz,
    )


def _month(m: re.Match[str], table: dict[str, int]) -> int:
    month = table.get(m["mon"].lower())
    if month is None:
        raise ValueError("unknown month name")
    return month


def _named_day(table: dict[str, int]) -> _Builder:
    return lambda m: datetime(int(m["y"]), _month(m, table), int(m["d"]), tzinfo=UTC)


def _named_month(table: dict[str, int]) -> _Builder:
    return lambda m: datetime(int(m["y"]), _month(m, table), 1, tzinfo=UTC)


def _compile(pattern: str) -> re.Pattern[str]:
    # ASCII: \d must not match digits of other scripts, \s only ASCII blanks.
    return re.compile(pattern, re.ASCII)


#: (layout name, pattern, builder) in the reference's order. Each builder may
#: raise ValueError (day 31 in April, hour 25...), meaning "no match".
_LAYOUTS: tuple[tuple[str, re.Pattern[str], _Builder], ...] = (
    (
        "RFC3339",
        _compile(_DATE + "T" + _RFC_CLOCK + r"(?P<z>[Zz]|[+-]\d{2}:\d{2})"),
        lambda m: _clock(m, _offset(m["z"])),
    ),
    ("2006-01-02T15:04:05", _compile(_DATE + "T" + _CLOCK), lambda m: _clock(m, UTC)),
    ("2006-01-02 15:04:05", _compile(_DATE + _SP + _CLOCK), lambda m: _clock(m, UTC)),
    ("2006-01-02", _compile(_DATE), lambda m: datetime(int(m["y"]), int(m["m"]), int(m["d"]), tzinfo=UTC)),
    ("2 January 2006", _compile(_DAY + _SP + _LONG_RE + _SP + _YEAR), _named_day(_LONG)),
    ("January 2, 2006", _compile(_LONG_RE + _SP + _DAY + r",\s*" + _YEAR), _named_day(_LONG)),
    ("Jan 2, 2006", _compile(_SHORT_RE + _SP + _DAY + r",\s*" + _YEAR), _named_day(_SHORT)),
    ("2 Jan 2006", _compile(_DAY + _SP + _SHORT_RE + _SP + _YEAR), _named_day(_SHORT)),
    ("January 2006", _compile(_LONG_RE + _SP + _YEAR), _named_month(_LONG)),
    ("Jan 2006", _compile(_SHORT_RE + _SP + _YEAR), _named_month(_SHORT)),
    (
        "2006-01",
        _compile(r"(?P<y>\d{4})-(?P<m>\d{2})"),
        lambda m: datetime(int(m["y"]), int(m["m"]), 1, tzinfo=UTC),
    ),
    ("2006", _compile(_YEAR), lambda m: datetime(int(m["y"]), 1, 1, tzinfo=UTC)),
)

_MONTH_LAYOUTS = frozenset({"January 2006", "Jan 2006", "2006-01"})


def _parse(s: str) -> tuple[str, datetime] | None:
    """(layout name, datetime in the zone the text names) or None."""
    for name, pattern, build in _LAYOUTS:
        match = pattern.fullmatch(s)
        if match is None:
            continue
        try:
            return name, build(match)
        except (ValueError, OverflowError):
            continue
    return None


def parse_flexible_time(s: str | None) -> datetime | None:
    """Parse a date/time the way LLMs tend to write it; ``None`` if unparsable.

    Layouts, in order: RFC3339 (``Z`` or ``±hh:mm``, optional fractional
    seconds), ``YYYY-MM-DDTHH:MM:SS``, ``YYYY-MM-DD HH:MM:SS``, ``YYYY-MM-DD``,
    ``2 January 2006``, ``January 2, 2006``, ``Jan 2, 2006``, ``2 Jan 2006``,
    ``January 2006``, ``Jan 2006``, ``YYYY-MM``, ``YYYY``. Layouts without a
    zone are taken as UTC. Surrounding whitespace is ignored. Relative words
    ("yesterday", "last Tuesday") are not understood and give ``None``.
    The result is always timezone-aware UTC.
    """
    if not isinstance(s, str):
        return None
    s = s.strip()
    if not s:
        return None
    parsed = _parse(s)
    if parsed is None:
        return None
    try:
        return parsed[1].astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00
        return None


def end_of_period(raw: str, parsed: datetime) -> datetime:
    """The last second of the period that ``raw`` names (reference ``EndOfPeriod``).

    - a year (raw of length 4, e.g. ``"2024"``) → Dec 31 23:59:59 of that year;
    - a month (``YYYY-MM``, ``January 2006``, ``Jan 2006``) → the month's last
      second, leap years included (``"2024-02"`` → Feb 29 23:59:59);
    - anything else → 23:59:59 of the parsed day.

    The computation happens in the zone ``raw`` was written in (UTC unless it
    carried an offset), as the reference does; the result is aware UTC.
    """
    raw = (raw or "").strip()
    found = _parse(raw) if raw else None
    zone: tzinfo = UTC
    if found is not None and found[1].tzinfo is not None:
        zone = found[1].tzinfo
    elif parsed.tzinfo is not None:
        zone = parsed.tzinfo
    local = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(zone)

    if len(raw) == 4:
        end = datetime(local.year, 12, 31, 23, 59, 59, tzinfo=local.tzinfo)
    elif found is not None and found[0] in _MONTH_LAYOUTS:
        last_day = calendar.monthrange(local.year, local.month)[1]
        end = datetime(local.year, local.month, last_day, 23, 59, 59, tzinfo=local.tzinfo)
    else:
        end = datetime(local.year, local.month, local.day, 23, 59, 59, tzinfo=local.tzinfo)
    try:
        return end.astimezone(UTC)
    except OverflowError:  # year 9999 with a negative offset: clamp
        return datetime.max.replace(microsecond=0, tzinfo=UTC)


def format_rfc3339(value: datetime, fractional: bool = False) -> str:
    """Format like Go: ``time.RFC3339`` (or ``RFC3339Nano`` when ``fractional``).

    UTC is written as ``Z``; other offsets as ``±hh:mm``; naive values are
    taken as UTC. With ``fractional`` the sub-second part is kept without
    trailing zeros (and omitted when zero), as Go's JSON encoding of times does.
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if fractional and value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    offset = value.utcoffset() or timedelta(0)
    if not offset:
        return text + "Z"
    total = int(offset.total_seconds())
    sign = "-" if total < 0 else "+"
    total = abs(total)
    return f"{text}{sign}{total // 3600:02d}:{(total % 3600) // 60:02d}"
