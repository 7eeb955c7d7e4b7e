"""When to extract (reference §6.4, ``memory/extractor/checker.go``).

A checker is any ``callable(ExtractionContext) -> bool``. With no checker an
extractor runs after every turn. Several checkers given to an extractor are
ANDed; ``any_of`` builds an OR.
"""

from __future__ import annotations

from datetime import timedelta

from .types import Checker, ExtractionContext

__all__ = ["all_of", "any_of", "message_threshold", "time_interval"]


def message_threshold(n: int) -> Checker:
    """True when strictly more than ``n`` messages are pending (messages, not turns:
    a turn is usually two, the user's and the answer)."""

    def check(context: ExtractionContext) -> bool:
        return len(context.messages) > n

    check.__qualname__ = f"message_threshold({n})"
    return check


def time_interval(interval: float | timedelta) -> Checker:
    """True on the first extraction, then once strictly more than ``interval``
    (seconds or a timedelta) has passed since the newest message of the last
    successful extraction."""
    span = interval if isinstance(interval, timedelta) else timedelta(seconds=interval)

    def check(context: ExtractionContext) -> bool:
        if context.last_extract_at is None:
            return True
        return context.now - context.last_extract_at > span

    check.__qualname__ = f"time_interval({span})"
    return check


def all_of(*checkers: Checker) -> Checker:
    """AND; true for no checkers."""

    def check(context: ExtractionContext) -> bool:
        return all(c(context) for c in checkers)

    return check


def any_of(*checkers: Checker) -> Checker:
    """OR; false for no checkers."""

    def check(context: ExtractionContext) -> bool:
        return any(c(context) for c in checkers)

    return check


class CheckerMixin:
    """``should_extract`` over a list of ANDed checkers (reference ``WithChecker``,
    ``WithCheckersAny``)."""

    checkers: list[Checker]

    def add_checker(self, checker: Checker | None) -> None:
        """Append a checker (ANDed with the others); None is ignored."""
        if checker is not None:
            self.checkers.append(checker)

    def set_checkers_any(self, *checkers: Checker) -> None:
        """Replace every checker with one OR of ``checkers``; no checkers: no change."""
        if checkers:
            self.checkers = [any_of(*checkers)]

    def should_extract(self, context: ExtractionContext) -> bool:
        return all(c(context) for c in self.checkers)
