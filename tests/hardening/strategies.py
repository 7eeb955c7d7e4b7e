"""Hypothesis strategies and settings shared by the hardening property tests.

The profiles ("ci", the default, and "thorough") are registered in conftest.py;
``given_settings(weight)`` scales the active profile's example count for one
test, so a test that is expensive per example can ask for fewer.
"""

from __future__ import annotations

import os
import unicodedata
from datetime import UTC, datetime

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from memchat.engine import Metadata

#: Profile names this suite registers; HYPOTHESIS_PROFILE picks one (default "ci").
PROFILES = {
    # Few examples: the whole hardening suite on nine backends stays within a few minutes.
    "ci": {"max_examples": 12, "stateful_step_count": 12},
    # For a manual hunt: HYPOTHESIS_PROFILE=thorough pytest tests/hardening
    "thorough": {"max_examples": 400, "stateful_step_count": 40},
}

SUPPRESSED = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]


def profile_name() -> str:
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    return name if name in PROFILES else "ci"


def register_profiles() -> None:
    for name, values in PROFILES.items():
        settings.register_profile(
            name, deadline=None, suppress_health_check=SUPPRESSED, print_blob=True, **values
        )


def given_settings(weight: float = 1.0, *, stateful: bool = False) -> settings:
    """Settings for one test: the active profile, its example count scaled by ``weight``."""
    register_profiles()
    values = PROFILES[profile_name()]
    extra = {"stateful_step_count": values["stateful_step_count"]} if stateful else {}
    return settings(
        deadline=None,
        suppress_health_check=SUPPRESSED,
        print_blob=True,
        max_examples=max(1, round(values["max_examples"] * weight)),
        **extra,
    )


# -- characters and text -------------------------------------------------------

#: Characters that have broken storage layers, key schemes, terminals or parsers.
SPECIAL_CHARS = (
    "\x00\x01\x07\x08\t\n\x0b\x0c\r\x1b\x1f\x7f\x80\x85\x9b\x9f\xa0\xad"
    "\u200b\u200d\u2028\u2029\u202e\ufeff\ufffd\uffff"
    "|,:;*?%_\\'\"`$&#@!{}[]()<>/ ~^"
    "张ユ한ع\U0001f642\U0001f389\U00010348\U000e0001"
)
#: st.characters() draws lone surrogates too; SURROGATES makes them more frequent.
SURROGATES = st.characters(categories=["Cs"])
ANY_CHAR = st.one_of(st.characters(), st.sampled_from(SPECIAL_CHARS), SURROGATES)
#: Fragments that look like the separators of canonical IDs, key schemes and SQL.
FRAGMENTS = (
    "|location:",
    "|participants:",
    "|app:",
    "|user:",
    "|kind:",
    "memory:",
    "mem:{",
    "}:",
    "user:*",
    "'; DROP TABLE memories; --",
    "%_",
    "\x1b[31m",
    "\x1b]0;title\x07",
    "\x9b2J",
    "e\u0301",
    "\U0001f469\u200d\U0001f469\u200d\U0001f467",
    "  ",
)


def _joined(chars: st.SearchStrategy[str], max_size: int) -> st.SearchStrategy[str]:
    piece = st.one_of(chars, st.sampled_from(FRAGMENTS))
    return st.lists(piece, max_size=max_size).map("".join)


def long_text(char: st.SearchStrategy[str] = ANY_CHAR) -> st.SearchStrategy[str]:
    """Long strings, up to past the 10 000-character memory limit."""
    return st.one_of(
        st.builds(lambda s, n: s * n, st.text(char, min_size=1, max_size=4), st.integers(200, 3000)),
        st.sampled_from(["x" * 9_999, "x" * 10_000, "x" * 10_001, "\U0001f642" * 10_000]),
    )


#: Any string at all: blank, controls, NUL, lone surrogates, CJK, emoji, very long.
any_text = st.one_of(
    st.text(ANY_CHAR, max_size=40),
    _joined(ANY_CHAR, 12),
    st.sampled_from(["", " ", "\t\n", "\x00", "\ud800", "a\udfffb", "\x1b[2J", "\u3000"]),
    long_text(),
)


def has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def has_control(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


def valid_text(text: object, limit: int = 10_000) -> bool:
    """What the engine accepts as memory text (see the validation rules)."""
    return (
        isinstance(text, str)
        and bool(text.strip())
        and "\x00" not in text
        and not has_surrogate(text)
        and len(text) <= limit
    )


#: Characters a valid memory may hold: everything but NUL and lone surrogates.
TEXT_CHAR = st.one_of(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    st.sampled_from(SPECIAL_CHARS.replace("\x00", "")),
)

#: Memory text the engine must accept and give back exactly.
good_text = st.one_of(
    st.text(TEXT_CHAR, min_size=1, max_size=40),
    _joined(TEXT_CHAR, 10),
    st.sampled_from(["x" * 10_000, "\U0001f642" * 10_000, "  kept  ", "a\x1b[31mred\x1b[0m\x07\x9b"]),
).filter(valid_text)


def valid_key_part(text: object) -> bool:
    """What the engine accepts as an app name, user id or memory ID."""
    return (
        isinstance(text, str)
        and bool(text.strip())
        and not has_control(text)
        and not has_surrogate(text)
        and len(text) <= 255
    )


#: App names and user ids: blank, controls, surrogates, 255+ characters, key-scheme syntax.
any_key_part = st.one_of(
    st.text(ANY_CHAR, max_size=30),
    _joined(ANY_CHAR, 6),
    st.sampled_from(["", " ", "\t", "\n", "a\x00b", "\x7f", "\ud83d", "a" * 255, "a" * 256, "*", "%"]),
    st.text(TEXT_CHAR, min_size=250, max_size=300),
)

#: A valid key part that is still hostile (for A's user id; a unique suffix is added).
good_key_part = st.one_of(
    st.text(st.characters(exclude_categories=["Cc", "Cs"]), min_size=1, max_size=30),
    st.sampled_from(["*", "user:*", "a:b", "{x}", "%", "_", "\\", "'", "ユーザー", "🙂", " lead"]),
).filter(valid_key_part)

#: Topics: blank, long, too many, separators; sometimes not even strings.
any_topics = st.one_of(
    st.none(),
    st.lists(st.text(ANY_CHAR, max_size=12), max_size=5),
    st.lists(st.sampled_from(["a", "b", "", " "]), min_size=49, max_size=52),
    st.lists(st.text(TEXT_CHAR, min_size=99, max_size=102), min_size=1, max_size=1),
)

good_topics = st.one_of(
    st.none(),
    st.lists(st.text(TEXT_CHAR, min_size=1, max_size=12).filter(valid_text), max_size=4),
)

#: Event times: the whole datetime range, aware or naive, second precision.
event_times = st.one_of(
    st.none(),
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.replace(microsecond=0)),
    st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    ),
)

_separator_names = st.lists(
    st.one_of(
        st.sampled_from(["a", "b", "a,b", "a|location:b", " a ", "A", "b|participants:c", ""]),
        st.text(ANY_CHAR, max_size=10),
    ),
    max_size=4,
)


def metadata_strategy(names: st.SearchStrategy, text: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.none(),
        st.builds(
            Metadata,
            kind=st.one_of(st.sampled_from(["", "fact", "episode", "Episode", "x" * 33]), text),
            event_time=event_times,
            participants=st.one_of(st.none(), names),
            location=st.one_of(st.sampled_from(["", "b", "x|location:y", "b|participants:c"]), text),
        ),
    )


any_metadata = metadata_strategy(_separator_names, st.text(ANY_CHAR, max_size=12))
good_metadata = metadata_strategy(
    st.lists(
        st.one_of(
            st.sampled_from(["a", "b", "a,b", "a|location:b", "A", "b|participants:c"]),
            st.text(TEXT_CHAR, min_size=1, max_size=10).filter(valid_text),
        ),
        max_size=3,
    ),
    st.text(TEXT_CHAR, max_size=10).filter(lambda t: valid_text(t) or t == ""),
)


def id_strategy(known: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[str]:
    """Memory IDs: real ones (``known``), their prefixes and neighbours, and junk."""
    hex64 = st.text("0123456789abcdef", min_size=64, max_size=64)
    junk = st.one_of(
        st.sampled_from(["", " ", "*", "%", "_", "..", "id\x00", "\ud800", "a" * 256, "\x1b[2J"]),
        st.text(ANY_CHAR, max_size=70),
        hex64,
        hex64.map(str.upper),
    )
    if known is None:
        return junk
    variants = st.one_of(
        known,
        known.map(str.upper),
        known.map(lambda i: i + " "),
        known.map(lambda i: " " + i),
        known.map(lambda i: i[:12]),
        known.map(lambda i: i[:-1] + "%"),
        known.map(lambda i: i + "\x00"),
    )
    return st.one_of(variants, junk)
