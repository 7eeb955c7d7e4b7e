"""Checkers (reference §6.4): strict threshold, strict interval (true the first time),
AND / OR with their empty-list identities, and an extractor's ANDed list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memchat.engine.extraction import ExtractionContext, all_of, any_of, message_threshold, time_interval
from memchat.engine.extraction.rules import RuleBasedExtractor
from tests.extraction.helpers import KEY

NOW = datetime(2024, 5, 7, 12, 0, tzinfo=UTC)


def ctx(messages: int = 0, last: datetime | None = None) -> ExtractionContext:
    return ExtractionContext(KEY, tuple({"role": "user", "content": "x"} for _ in range(messages)), last, NOW)


def test_message_threshold_is_strictly_more_than_n() -> None:
    check = message_threshold(2)
    assert [check(ctx(n)) for n in (0, 1, 2, 3, 4)] == [False, False, False, True, True]


def test_time_interval_is_strict_and_true_on_the_first_extraction() -> None:
    check = time_interval(180)
    assert check(ctx(1, None))
    assert not check(ctx(1, NOW - timedelta(seconds=180)))
    assert check(ctx(1, NOW - timedelta(seconds=181)))
    assert time_interval(timedelta(minutes=3))(ctx(1, NOW - timedelta(minutes=4)))


def test_composition_and_empty_identities() -> None:
    yes, no = (lambda c: True), (lambda c: False)
    assert all_of()(ctx()) is True and any_of()(ctx()) is False
    assert all_of(yes, yes)(ctx()) and not all_of(yes, no)(ctx())
    assert any_of(no, yes)(ctx()) and not any_of(no, no)(ctx())
    either = any_of(message_threshold(5), time_interval(60))
    assert either(ctx(1, None))  # first run
    assert not either(ctx(1, NOW - timedelta(seconds=10)))
    assert either(ctx(6, NOW - timedelta(seconds=10)))


def test_an_extractor_ands_its_checkers_and_runs_every_turn_without_any() -> None:
    extractor = RuleBasedExtractor(lambda text: [])
    assert extractor.should_extract(ctx(1))
    extractor.add_checker(message_threshold(1))
    extractor.add_checker(None)
    extractor.add_checker(time_interval(60))
    assert not extractor.should_extract(ctx(1, None))
    assert extractor.should_extract(ctx(2, None))
    assert not extractor.should_extract(ctx(2, NOW))
    extractor.set_checkers_any()  # no-op
    assert len(extractor.checkers) == 2
    extractor.set_checkers_any(message_threshold(1), time_interval(60))
    assert len(extractor.checkers) == 1 and extractor.should_extract(ctx(1, None))
