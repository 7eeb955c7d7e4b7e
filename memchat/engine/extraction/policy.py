"""Update policies applied to the extractor's operations before they run (reference §6.5).

``merge_similar`` (default): reconcile every add against the store. The add is
probed with a search (3 results, threshold 0.30) and the best candidate gets a
tier from its score and the token Jaccard J of the two texts: *skip*
(score ≥ 0.90 or J ≥ 0.70), *update* (score ≥ 0.60 or J ≥ 0.40) or *none*.

One deliberate difference from the reference, which would lose memories on
short texts ("Likes Go" + add "Likes Python" has J = 0.5 and would overwrite
"Go"; "Likes Go and Rust" has J ≥ 0.7 and would be dropped): a rewrite must
not lose words. *skip* drops the add only when its words are all in the
candidate already (it becomes an update when it brings new topics); *update*
rewrites the add into an update of the candidate only when the new text keeps
every word of the old one (an enrichment). Otherwise the add stays an add.

``preserve_history``: checked only against the listed existing memories. An
exact duplicate add is dropped; an add that safely enriches a listed memory
becomes an update of it; an update that is not a safe enrichment becomes an
add; deletes and clears pass.

``append_only``: updates become adds, deletes and clears are dropped, exact
duplicates are dropped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from ..model import KIND_FACT, Entry, SearchOptions, UserKey, utc
from ..search import build_search_tokens, jaccard_tokens
from .types import (
    APPEND_ONLY,
    MERGE_SIMILAR,
    PRESERVE_HISTORY,
    Operation,
    OperationType,
)

log = logging.getLogger(__name__)

__all__ = ["apply_policy", "exact_duplicate", "reconcile", "safe_enrichment"]

PROBE_MAX_RESULTS = 3
PROBE_THRESHOLD = 0.30
SKIP_SCORE, SKIP_JACCARD = 0.90, 0.70
UPDATE_SCORE, UPDATE_JACCARD = 0.60, 0.40

_NONE, _UPDATE, _SKIP = 0, 1, 2


def _jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def _merge_topics(existing: Sequence[str], new: Sequence[str]) -> tuple[str, ...]:
    """Case-insensitive union, existing first, trimmed."""
    merged: list[str] = []
    seen: set[str] = set()
    for topic in (*existing, *new):
        topic = topic.strip()
        if topic and topic.lower() not in seen:
            seen.add(topic.lower())
            merged.append(topic)
    return tuple(merged)


def _new_topics(candidate: Entry, op: Operation) -> bool:
    have = {t.strip().lower() for t in candidate.memory.topics}
    return any(t.strip() and t.strip().lower() not in have for t in op.topics)


def _to_update(op: Operation, candidate: Entry) -> Operation:
    return replace(
        op,
        type=OperationType.UPDATE,
        memory_id=candidate.id,
        topics=_merge_topics(candidate.memory.topics, op.topics),
        kind=op.kind or candidate.memory.kind,
        target=candidate,
    )


def _allows(enabled: frozenset[str] | None, tool: str) -> bool:
    return enabled is None or tool in enabled


async def reconcile(
    operations: Sequence[Operation], service: object, key: UserKey, enabled: frozenset[str] | None
) -> list[Operation]:
    """merge_similar: see the module docstring."""
    if not _allows(enabled, "memory_add"):
        return list(operations)
    can_update = _allows(enabled, "memory_update")
    result: list[Operation] = []
    for op in operations:
        if op.type != OperationType.ADD:
            result.append(op)
            continue
        try:
            candidates = await service.search(  # type: ignore[attr-defined]
                key,
                op.memory,
                SearchOptions(max_results=PROBE_MAX_RESULTS, similarity_threshold=PROBE_THRESHOLD),
            )
        except Exception:
            log.warning("memory extraction: the reconcile search failed; keeping the add", exc_info=True)
            result.append(op)
            continue
        new_tokens = jaccard_tokens(op.memory)
        best: tuple[int, float, float, Entry] | None = None
        for candidate in candidates[:PROBE_MAX_RESULTS]:
            old_tokens = jaccard_tokens(candidate.memory.text)
            j = _jaccard(new_tokens, old_tokens)
            score = float(candidate.score or 0.0)
            if score >= SKIP_SCORE or j >= SKIP_JACCARD:
                tier = _SKIP
            elif score >= UPDATE_SCORE or j >= UPDATE_JACCARD:
                tier = _UPDATE
            else:
                tier = _NONE
            rank = (tier, score, j, candidate)
            if best is None or rank[:3] > best[:3]:
                best = rank
        if best is None or best[0] == _NONE:
            result.append(op)
            continue
        tier, candidate = best[0], best[3]
        old_tokens = jaccard_tokens(candidate.memory.text)
        if tier == _SKIP and new_tokens <= old_tokens:
            if not _new_topics(candidate, op):
                log.info("memory extraction: dropped an add already stored as %s", candidate.id[:12])
                continue
            result.append(_to_update(op, candidate) if can_update else op)
            continue
        # An update tier, or a skip tier whose text says more than the candidate.
        if old_tokens <= new_tokens and can_update:
            result.append(_to_update(op, candidate))
        else:
            result.append(op)
    return result


# -- preserve_history and append_only ------------------------------------------


def _normal_text(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip().rstrip(".!?。！？").strip()


def _same_time(a: datetime | None, b: datetime | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return utc(a) == utc(b)


def _folded(names: Sequence[str]) -> set[str]:
    return {n.strip().lower() for n in names if n.strip()}


def _op_kind(op: Operation, fallback: str = KIND_FACT) -> str:
    return op.kind or fallback


def exact_duplicate(op: Operation, entry: Entry) -> bool:
    """Same normalised text, kind, event_time, participants (case-insensitive) and location."""
    memory = entry.memory
    return (
        _normal_text(op.memory) == _normal_text(memory.text)
        and _op_kind(op, memory.kind or KIND_FACT) == (memory.kind or KIND_FACT)
        and _same_time(op.event_time, memory.event_time)
        and _folded(op.participants) == _folded(memory.participants)
        and op.location.strip().lower() == (memory.location or "").strip().lower()
    )


_NEGATIONS = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|neither|nor|cannot|can't|don't|doesn't|didn't|isn't|aren't|"
    r"wasn't|weren't|won't|wouldn't|shouldn't|haven't|hasn't|hadn't)\b|不|没|别|非|未",
    re.I,
)
_CHANGE_MARKERS = re.compile(
    r"\b(?:now|no longer|instead|anymore|any more|currently|changed|switched|moved|used to|formerly)\b"
    r"|现在|改为|改成|不再|如今|换成|搬到",
    re.I,
)
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)?")
_CAPITALISED = re.compile(r"\b[A-Z][\w'-]*")


def _subsequence(needle: Sequence[str], haystack: Sequence[str]) -> bool:
    it = iter(haystack)
    return all(token in it for token in needle)


def safe_enrichment(old: Entry, op: Operation) -> bool:
    """The new text adds to ``old`` without contradicting or dropping anything (§6.5)."""
    memory = old.memory
    # 1. Compatible metadata.
    if _op_kind(op, memory.kind or KIND_FACT) != (memory.kind or KIND_FACT):
        return False
    if not _same_time(memory.event_time, op.event_time):
        stored, new = memory.event_time, op.event_time
        if stored is None or new is None:
            return False
        stored, new = utc(stored), utc(new)
        midnight = (stored.hour, stored.minute, stored.second, stored.microsecond) == (0, 0, 0, 0)
        if stored.date() != new.date() or not midnight or new == stored:
            return False
    if not _folded(memory.participants) <= _folded(op.participants):
        return False
    if memory.location and op.location and memory.location.strip().lower() != op.location.strip().lower():
        return False
    old_text, new_text = memory.text, op.memory
    # 2. Directional token coverage.
    old_tokens, new_tokens = jaccard_tokens(old_text), jaccard_tokens(new_text)
    if not old_tokens or not new_tokens:
        return False
    shared = len(old_tokens & new_tokens)
    if shared / len(old_tokens) < 0.95 or shared / len(new_tokens) < 0.70:
        return False
    # 3. Every old token and capitalised word survives.
    if not old_tokens <= new_tokens:
        return False
    if any(word not in new_text for word in _CAPITALISED.findall(old_text)):
        return False
    # 4-5. Numbers and negations preserved, same negation signature.
    if any(number not in new_text for number in _NUMBERS.findall(old_text)):
        return False
    old_neg = sorted(n.lower() for n in _NEGATIONS.findall(old_text))
    if old_neg != sorted(n.lower() for n in _NEGATIONS.findall(new_text)):
        return False
    # 6. No change marker unless the old text had one.
    if _CHANGE_MARKERS.search(new_text) and not _CHANGE_MARKERS.search(old_text):
        return False
    # 7. The old words keep their order.
    return _subsequence(build_search_tokens(old_text), build_search_tokens(new_text))


def _as_add(op: Operation) -> Operation:
    kind = op.kind or (op.target.memory.kind if op.target is not None else "") or KIND_FACT
    return replace(op, type=OperationType.ADD, memory_id="", kind=kind, target=None)


def preserve_history(
    operations: Sequence[Operation], existing: Sequence[Entry], enabled: frozenset[str] | None
) -> list[Operation]:
    can_update = _allows(enabled, "memory_update")
    by_id = {e.id: e for e in existing}
    result: list[Operation] = []
    added: list[Operation] = []

    def duplicate(op: Operation) -> bool:
        return any(exact_duplicate(op, e) for e in existing) or any(
            exact_duplicate(op, _pseudo(a)) for a in added
        )

    for op in operations:
        if op.type == OperationType.UPDATE:
            target = op.target or by_id.get(op.memory_id)
            if target is not None and safe_enrichment(target, op):
                result.append(op)
                continue
            op = _as_add(op)
        if op.type != OperationType.ADD:
            result.append(op)
            continue
        if duplicate(op):
            log.info("memory extraction: dropped a duplicate add under preserve_history")
            continue
        enriched = next((e for e in existing if safe_enrichment(e, op)), None) if can_update else None
        if enriched is not None:
            result.append(_to_update(op, enriched))
            continue
        added.append(op)
        result.append(op)
    return result


def append_only(operations: Sequence[Operation], existing: Sequence[Entry]) -> list[Operation]:
    result: list[Operation] = []
    for op in operations:
        if op.type in (OperationType.DELETE, OperationType.CLEAR):
            log.info("memory extraction: %s dropped under append_only", op.tool)
            continue
        if op.type == OperationType.UPDATE:
            op = _as_add(op)
        if any(exact_duplicate(op, e) for e in existing) or any(
            exact_duplicate(op, _pseudo(a)) for a in result
        ):
            continue
        result.append(op)
    return result


def _pseudo(op: Operation) -> Entry:
    """An operation as an entry, to compare two adds of one batch."""
    from ..ids import build_memory

    memory = build_memory(op.memory, op.topics, op.metadata())
    epoch = datetime.fromtimestamp(0).astimezone()
    return Entry("", "", "", memory, epoch, epoch)


async def apply_policy(
    policy: str,
    operations: Sequence[Operation],
    *,
    service: object,
    key: UserKey,
    existing: Sequence[Entry],
    enabled: frozenset[str] | None,
) -> list[Operation]:
    if policy == PRESERVE_HISTORY:
        return preserve_history(operations, existing, enabled)
    if policy == APPEND_ONLY:
        return append_only(operations, existing)
    if policy != MERGE_SIMILAR:
        log.warning("memory extraction: unknown update policy %r, using merge_similar", policy)
    return await reconcile(operations, service, key, enabled)
