"""The memories of the periods a query names (``memories_in_periods``), and the
hybrid search that uses them: a question naming a date ranks as reading every
keyword holder does, but reads only a bounded number of them (issue 12).

A store declaring no event-time lookup (none today) reads every holder for a
dated question instead, and ranks the same.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memchat.engine import Metadata, SearchOptions, UserKey

KEY = UserKey("test-app", "periods-user")
OTHER = UserKey("test-app", "someone-else")
START = datetime(2023, 3, 1, 9, 30, tzinfo=UTC)


async def test_the_memories_in_a_period_are_listed_exactly(make_service) -> None:
    """Start included, end excluded; undated, deleted and other users' memories never."""
    svc = make_service()
    may = datetime(2023, 5, 1, tzinfo=UTC)
    june = datetime(2023, 6, 1, tzinfo=UTC)
    dated = {
        "On the first of May": may,
        "A minute before June": june - timedelta(minutes=1),
        "On the first of June": june,
        "In April": may - timedelta(days=3),
        "In July": datetime(2023, 7, 4, tzinfo=UTC),
    }
    ids = {}
    for text, when in dated.items():
        ids[text] = (await svc.add(KEY, text, metadata=Metadata(kind="episode", event_time=when))).id
    await svc.add(KEY, "Undated, in May in words")
    gone = await svc.add(KEY, "Deleted, in May", metadata=Metadata(kind="episode", event_time=may))
    await svc.delete(KEY, gone.id)
    await svc.add(OTHER, "Someone else's May", metadata=Metadata(kind="episode", event_time=may))
    store = svc.store
    if not store.capabilities.event_time_lookup:
        assert not hasattr(store, "memories_in_periods")  # declared as it is
        return
    found = await store.memories_in_periods(KEY, [(may, june)], 10)
    assert found is not None
    assert {e.id for e in found} == {ids["On the first of May"], ids["A minute before June"]}
    assert {e.memory.text for e in found} == {"On the first of May", "A minute before June"}
    both = await store.memories_in_periods(KEY, [(may, june), (june, june + timedelta(days=40))], 10)
    assert both is not None
    assert {e.memory.text for e in both} == {
        "On the first of May",
        "A minute before June",
        "On the first of June",
        "In July",
    }
    assert await store.memories_in_periods(KEY, [(may, june)], 1) is None  # more than the limit
    autumn = (june + timedelta(days=60), june + timedelta(days=90))
    assert await store.memories_in_periods(KEY, [autumn], 10) == []


async def test_a_question_naming_a_date_reads_a_bounded_number_of_holders(make_service, monkeypatch) -> None:
    """110 short walks, one a day from March 2024, and three long ones around 15
    April 2023, the day the question names. The long ones hold the question's
    words among many others: the store's best 100 keyword holders leave them out,
    yet the time lift puts two of them first. The store's first keyword answer leaves
    holders out, as for a question without a date, and the results are those of
    reading every holder."""
    import memchat.engine.retrieval as service_module
    from tests.conformance.test_keyword_candidates import keyword_cutoffs
    from tests.conformance.test_vectors import HashEmbedder

    svc = make_service(embedder=HashEmbedder(), limit=0)
    for i in range(110):
        when = START + timedelta(days=366 + i)
        await svc.add(KEY, f"Went hiking in April #{i}", metadata=Metadata(kind="episode", event_time=when))
    long_walks = {
        14: "Went hiking in April up the long ridge trail past the old mill with friends and dogs",
        15: "Went hiking in April along the river gorge to the waterfall and back before the rain came",
        16: "Went hiking in April through the pine forest to the lake with my cousin and a picnic basket",
    }
    for day, text in long_walks.items():
        when = datetime(2023, 4, day, 10, tzinfo=UTC)
        await svc.add(KEY, text, metadata=Metadata(kind="episode", event_time=when))
    for i, subject in enumerate(["coffee", "the piano", "chess", "Berlin"]):
        await svc.add(KEY, f"Talks about {subject} with the team #{i}")
    question = "Where did I go hiking on 15 April 2023?"
    options = SearchOptions(max_results=10)
    monkeypatch.setattr(service_module, "KEYWORD_CANDIDATES", 10**9)
    # Scores to 6 places: the token re-rank sums float32 similarities, whose last
    # digits follow the order the candidates were scored in.
    full = [(e.id, round(e.score or 0.0, 6)) for e in await svc.search(KEY, question, options)]
    texts = {e.id: e.memory.text for e in await svc.store.list(KEY)}
    assert {texts[i] for i, _ in full[:2]} < set(long_walks.values())

    store = svc.store
    indexed = store.capabilities.native_keyword_search
    asked = keyword_cutoffs(store, monkeypatch) if indexed else []
    monkeypatch.setattr(service_module, "KEYWORD_CANDIDATES", 2)  # the limit is then the 100 hybrid needs
    bounded = [(e.id, round(e.score or 0.0, 6)) for e in await svc.search(KEY, question, options)]
    assert bounded == full
    if store.capabilities.event_time_lookup and indexed:
        assert asked and asked[0] is not None  # the first answer left holders out
    elif asked:
        assert asked[0] is None  # every holder of the question's words
