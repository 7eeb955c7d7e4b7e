"""A rule-based extractor: auto mode with no model and no key.

It reads the user's messages with a fact finder (the offline model's
``extract_facts`` in the app: "I'm Zhang San and I like Go", "我喜欢…",
"remember that…") and proposes an add for every statement about the user;
"forget …" deletes the best-matching listed memory, and "forget everything"
clears (only if memory_clear is enabled). Duplicates and near-duplicates are
then absorbed by the update policy like any extractor's output.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from ..model import KIND_FACT, Entry
from ..search import jaccard_tokens
from .checkers import CheckerMixin
from .extractor import filter_messages
from .prompt import allowed_operations
from .types import (
    MERGE_SIMILAR,
    Checker,
    Extraction,
    Message,
    Operation,
    OperationType,
)

__all__ = ["FactFinder", "RuleBasedExtractor"]

#: text → (memory, topics) pairs: the statements about the user in one message.
FactFinder = Callable[[str], Iterable[tuple[str, Sequence[str]]]]

_FORGET_ALL = re.compile(
    r"^(?:please\s+)?forget\s+everything|^(?:请)?(?:忘记|忘掉|清空)(?:所有|全部|一切)", re.I
)
_FORGET = re.compile(
    r"^(?:please\s+)?(?:forget|delete|remove)\s+(?:that\s+|about\s+|the\s+memory\s+)?(.+)$"
    r"|^(?:请)?(?:忘记|忘掉|删除|删掉)(?:关于)?(.+)$",
    re.I | re.S,
)


def _normal(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".!?。！？")


class RuleBasedExtractor(CheckerMixin):
    """See the module docstring. ``facts`` finds the statements in one message."""

    name = "offline"

    def __init__(self, facts: FactFinder, *, checkers: Sequence[Checker] = (), policy: str = MERGE_SIMILAR):
        self.facts = facts
        self.checkers = [c for c in checkers if c is not None]
        self.policy = policy

    async def close(self) -> None:
        return None

    def _forget_target(self, what: str, existing: Sequence[Entry]) -> Entry | None:
        """The listed memory that shares the largest part of ``what``'s words."""
        probes = [what, *(memory for memory, _ in self.facts(what))]
        best, best_score = None, 0.0
        for entry in existing:
            stored = jaccard_tokens(entry.memory.text)
            for probe in probes:
                tokens = jaccard_tokens(probe)
                if not tokens:
                    continue
                score = len(tokens & stored) / len(tokens)
                if score > best_score:
                    best, best_score = entry, score
        return best if best_score >= 0.5 else None

    async def extract(
        self,
        messages: Sequence[Message],
        existing: Sequence[Entry],
        *,
        enabled: frozenset[str] | None = None,
        reference_date: datetime | None = None,
    ) -> Extraction:
        allowed = set(allowed_operations(enabled, self.policy))
        operations: list[Operation] = []
        seen: set[str] = set()
        deleted: set[str] = set()
        for message in filter_messages(messages):
            if message["role"] != "user":
                continue
            text = message["content"].strip()
            if _FORGET_ALL.search(text):
                operations.append(Operation(OperationType.CLEAR))
                continue
            forget = _FORGET.match(text)
            if forget:
                what = (forget.group(1) or forget.group(2) or "").strip(" .!?。！？")
                target = self._forget_target(what, [e for e in existing if e.id not in deleted])
                if target is not None:
                    deleted.add(target.id)
                    operations.append(Operation(OperationType.DELETE, memory_id=target.id, target=target))
                continue
            for memory, topics in self.facts(text):
                if memory.strip() and _normal(memory) not in seen:
                    seen.add(_normal(memory))
                    operations.append(
                        Operation(
                            OperationType.ADD, memory=memory.strip(), topics=tuple(topics), kind=KIND_FACT
                        )
                    )
        return Extraction(tuple(op for op in operations if op.type in allowed))
