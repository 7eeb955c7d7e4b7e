"""Update policies (reference §6.5): merge_similar's reconcile tiers (with the guard
that a rewrite never loses words), preserve_history and append_only."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memchat.engine import Entry, Memory
from memchat.engine.extraction import Operation, apply_policy
from memchat.engine.extraction.policy import exact_duplicate, safe_enrichment
from memchat.engine.extraction.types import OperationType
from tests.extraction.helpers import KEY

NOW = datetime(2024, 5, 7, tzinfo=UTC)


def entry(mid: str, text: str, score: float = 0.0, **memory) -> Entry:
    return Entry(
        mid * 64 if len(mid) == 1 else mid, "app", "user", Memory(text, **memory), NOW, NOW, score=score
    )


class ProbeService:
    """Answers the reconcile probe with fixed candidates; records the options."""

    def __init__(self, *candidates: Entry, fail: bool = False) -> None:
        self.candidates = list(candidates)
        self.fail = fail
        self.probes = []

    async def search(self, key, query, options):
        self.probes.append((query, options))
        if self.fail:
            raise RuntimeError("search is down")
        return self.candidates


def add(text: str, *topics: str) -> Operation:
    return Operation(OperationType.ADD, memory=text, topics=topics, kind="fact")


async def merge(service, *ops, enabled=None):
    return await apply_policy("merge_similar", ops, service=service, key=KEY, existing=[], enabled=enabled)


async def test_probe_uses_three_results_and_threshold_030() -> None:
    service = ProbeService()
    [kept] = await merge(service, add("Likes tea"))
    assert kept.type == OperationType.ADD
    query, options = service.probes[0]
    assert (query, options.max_results, options.similarity_threshold) == ("Likes tea", 3, 0.30)


async def test_high_score_with_same_topics_is_dropped() -> None:
    assert (
        await merge(
            ProbeService(entry("a", "Likes green tea", 0.95, topics=("food",))),
            add("Likes green tea", "food"),
        )
        == []
    )


async def test_high_score_with_new_topics_becomes_an_update_with_merged_topics() -> None:
    candidate = entry("a", "Likes green tea", 0.95, topics=("food", "Drinks"))
    [op] = await merge(ProbeService(candidate), add("Likes green tea", "drinks", "tea "))
    assert (op.type, op.memory_id, op.topics, op.target) == (
        OperationType.UPDATE,
        candidate.id,
        ("food", "Drinks", "tea"),
        candidate,
    )


async def test_mid_score_enrichment_becomes_an_update_carrying_the_new_wording() -> None:
    candidate = entry("a", "Likes Go", 0.65)
    [op] = await merge(ProbeService(candidate), add("Likes Go and Rust"))
    assert (op.type, op.memory_id, op.memory) == (OperationType.UPDATE, candidate.id, "Likes Go and Rust")


async def test_unrelated_low_score_stays_an_add() -> None:
    [op] = await merge(ProbeService(entry("a", "Lives in Berlin", 0.1)), add("Plays the cello"))
    assert op.type == OperationType.ADD


async def test_a_rewrite_never_loses_words() -> None:
    # J("User likes Go", "User likes Python") = 0.5: the reference would overwrite Go with Python.
    [op] = await merge(ProbeService(entry("a", "User likes Go", 0.49)), add("User likes Python"))
    assert op.type == OperationType.ADD
    # A skip-tier candidate that the new text extends is updated, not dropped.
    candidate = entry("b", "User likes Go", 0.55)
    [op] = await merge(ProbeService(candidate), add("User likes Go and Rust"))
    assert (op.type, op.memory_id) == (OperationType.UPDATE, candidate.id)


async def test_best_candidate_is_highest_tier_then_score() -> None:
    low, high = entry("a", "Likes Go", 0.61), entry("b", "Likes Go", 0.7)
    [op] = await merge(ProbeService(low, high), add("Likes Go a lot"))
    assert op.memory_id == high.id


async def test_update_disabled_keeps_the_add_and_add_disabled_leaves_everything() -> None:
    candidate = entry("a", "Likes Go", 0.65)
    [op] = await merge(ProbeService(candidate), add("Likes Go and Rust"), enabled=frozenset({"memory_add"}))
    assert op.type == OperationType.ADD
    service = ProbeService(candidate)
    [op] = await merge(service, add("Likes Go and Rust"), enabled=frozenset({"memory_update"}))
    assert op.type == OperationType.ADD and service.probes == []


async def test_probe_failure_keeps_the_add_and_other_operations_pass() -> None:
    ops = [
        add("Likes tea"),
        Operation(OperationType.DELETE, memory_id="x"),
        Operation(OperationType.CLEAR),
        Operation(OperationType.UPDATE, "y", "z"),
    ]
    assert await merge(ProbeService(fail=True), *ops) == ops


# -- preserve_history -----------------------------------------------------------


async def preserve(existing, *ops, enabled=None):
    return await apply_policy(
        "preserve_history", ops, service=None, key=KEY, existing=existing, enabled=enabled
    )


async def test_preserve_history_drops_exact_duplicates() -> None:
    existing = [entry("a", "Has a dog.")]
    assert await preserve(existing, add("has  a DOG")) == []
    [op] = await preserve([], add("Likes tea"), add("likes tea."))
    assert op.memory == "Likes tea"


async def test_preserve_history_turns_a_safe_enrichment_into_an_update() -> None:
    job = entry("a", "Works as a senior backend engineer at Acme Corp in Berlin", topics=("work",))
    new = "Works as a senior backend engineer at Acme Corp in Berlin, remotely"
    [op] = await preserve([job], add(new, "work"))
    assert (op.type, op.memory_id, op.memory) == (OperationType.UPDATE, job.id, new)
    # Too much new text (under 70 % of the new words known) is not an enrichment: a new memory.
    [op] = await preserve([entry("b", "Has a dog")], add("Has a dog named Rex"))
    assert op.type == OperationType.ADD


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Lives in Berlin", "Now lives in Paris"),  # not a coverage of the old words
        ("Lives in Berlin", "Now lives in Berlin city"),  # change marker
        ("Likes coffee", "Never likes coffee"),  # negation changed
        ("Has 2 cats", "Has 3 cats"),  # number changed
        ("Works at Acme", "Works at acme in sales"),  # capitalised word lost
        ("Drinks tea then coffee", "Drinks coffee then tea"),  # order changed
    ],
)
async def test_preserve_history_turns_an_unsafe_update_into_an_add(old, new) -> None:
    stored = entry("a", old)
    [op] = await preserve(
        [stored], Operation(OperationType.UPDATE, memory=new, memory_id=stored.id, target=stored)
    )
    assert (op.type, op.memory_id, op.memory, op.kind) == (OperationType.ADD, "", new, "fact")
    assert not safe_enrichment(stored, Operation(OperationType.UPDATE, memory=new))


async def test_preserve_history_keeps_a_safe_update_and_passes_deletes() -> None:
    stored = entry("a", "Plays tennis with Ana on Sundays")
    ops = [
        Operation(
            OperationType.UPDATE,
            memory="Plays tennis with Ana on Sundays mornings",
            memory_id=stored.id,
            target=stored,
        ),
        Operation(OperationType.DELETE, memory_id=stored.id),
        Operation(OperationType.CLEAR),
    ]
    assert await preserve([stored], *ops) == ops


def test_safe_enrichment_checks_metadata() -> None:
    trip = entry(
        "a",
        "Went to Tokyo for the cherry blossom festival",
        kind="episode",
        event_time=NOW,
        participants=("Ana",),
        location="Japan",
    )
    same = Operation(
        OperationType.ADD,
        memory="Went to Tokyo for the cherry blossom festival with friends",
        kind="episode",
        event_time=NOW,
        participants=("ana", "Bo"),
        location="japan",
    )
    assert safe_enrichment(trip, same)
    assert safe_enrichment(trip, replace(same, event_time=NOW.replace(hour=9)))  # midnight → a time that day
    assert not safe_enrichment(trip, replace(same, kind="fact"))
    assert not safe_enrichment(trip, replace(same, participants=("Bo",)))
    assert not safe_enrichment(trip, replace(same, location="Kyoto"))
    assert not safe_enrichment(trip, replace(same, event_time=NOW.replace(day=8)))
    assert exact_duplicate(
        replace(same, memory="went to tokyo for the cherry  blossom festival!", participants=("ANA",)), trip
    )


# -- append_only ---------------------------------------------------------------


async def test_append_only() -> None:
    stored = entry("a", "Likes tea")
    ops = [
        Operation(OperationType.UPDATE, memory="Likes green tea", memory_id=stored.id, target=stored),
        Operation(OperationType.DELETE, memory_id=stored.id),
        Operation(OperationType.CLEAR),
        add("Likes tea"),
        add("Plays chess"),
        add("plays chess."),
    ]
    result = await apply_policy("append_only", ops, service=None, key=KEY, existing=[stored], enabled=None)
    assert [(op.type, op.memory, op.memory_id) for op in result] == [
        (OperationType.ADD, "Likes green tea", ""),
        (OperationType.ADD, "Plays chess", ""),
    ]


async def test_append_only_restricts_the_extractor_to_memory_add() -> None:
    from memchat.engine.extraction import ModelExtractor

    extractor = ModelExtractor(object(), policy="append_only")
    request = extractor.build_request([{"role": "user", "content": "hi"}], [entry("a", "Likes tea")])
    assert [t["function"]["name"] for t in request.tools] == ["memory_add"]
    assert "Append only" in request.messages[0]["content"]
    preserve_request = ModelExtractor(object(), policy="preserve_history").build_request(
        [{"role": "user", "content": "hi"}], []
    )
    assert "Preserve history" in preserve_request.messages[0]["content"]
    assert "only when the user explicitly asks" in preserve_request.messages[0]["content"]
