"""Keyword search through each store: same ranking and filters everywhere.

The reference's keyword ranking is asked for explicitly (``mode="keyword"``):
the default is hybrid wherever there are vectors (test_semantic_search.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memchat.engine import Metadata, SearchOptions, UserKey

KEY = UserKey("test-app", "user-1")
KW = SearchOptions(mode="keyword")


async def test_ranking_matches_the_reference_vector(make_service) -> None:
    svc = make_service()
    await svc.add(KEY, "User likes coffee")
    await svc.add(KEY, "User likes coffee and tea")
    await svc.add(KEY, "User likes hiking", topics=["tea"])
    await svc.add(KEY, "User likes running")
    hits = await svc.search(KEY, "coffee tea", KW)
    assert [h.memory.text for h in hits] == [
        "User likes coffee and tea",
        "User likes coffee",
        "User likes hiking",
    ]
    assert [round(h.score, 4) for h in hits] == [0.8538, 0.4423, 0.3989]


async def test_search_ignores_tombstones_and_other_users(make_service) -> None:
    svc = make_service(soft_delete=True)
    gone = await svc.add(KEY, "User likes green tea")
    await svc.add(KEY, "User likes black tea")
    await svc.add(UserKey("test-app", "user-2"), "User likes white tea")
    await svc.delete(KEY, gone.id)
    assert [h.memory.text for h in await svc.search(KEY, "tea", KW)] == ["User likes black tea"]


async def test_empty_and_unmatched_queries_return_nothing(make_service) -> None:
    svc = make_service()
    await svc.add(KEY, "User likes coffee")
    assert await svc.search(KEY, "", KW) == []
    assert await svc.search(KEY, "   ", KW) == []
    assert await svc.search(KEY, "?!…", KW) == []
    assert await svc.search(KEY, "zebra", KW) == []
    assert await svc.search(KEY, "'; DROP TABLE memories; --", KW) == []


async def test_max_results_and_the_default_of_ten(make_service) -> None:
    svc = make_service()
    for i in range(15):
        await svc.add(KEY, f"User plays chess game {i}")
    assert len(await svc.search(KEY, "chess", KW)) == 10
    assert len(await svc.search(KEY, "chess", SearchOptions(max_results=3, mode="keyword"))) == 3


async def test_equal_scores_break_ties_newest_first(make_service) -> None:
    svc = make_service()
    for name in ("alpha", "beta", "gamma"):
        await svc.add(KEY, f"Visited {name} museum")
    hits = await svc.search(KEY, "museum", KW)
    assert [h.memory.text for h in hits] == [
        "Visited gamma museum",
        "Visited beta museum",
        "Visited alpha museum",
    ]


async def test_kind_and_time_filters_with_kind_fallback(make_service) -> None:
    svc = make_service()
    may = datetime(2024, 5, 10, tzinfo=UTC)
    june = datetime(2024, 6, 10, tzinfo=UTC)
    await svc.add(KEY, "Went to a concert in May", metadata=Metadata(kind="episode", event_time=may))
    await svc.add(KEY, "Went to a concert in June", metadata=Metadata(kind="episode", event_time=june))
    await svc.add(KEY, "Likes concert music")
    episodes = await svc.search(KEY, "concert", SearchOptions(kind="episode", mode="keyword"))
    assert {h.memory.kind for h in episodes} == {"episode"}
    assert len(episodes) == 2
    fallback = await svc.search(
        KEY, "concert", SearchOptions(kind="episode", kind_fallback=True, mode="keyword")
    )
    assert [h.memory.kind for h in fallback] == ["episode", "episode", "fact"]
    before_june = await svc.search(
        KEY, "concert", SearchOptions(time_before=datetime(2024, 5, 31, tzinfo=UTC), mode="keyword")
    )
    # The undated fact always passes a time filter.
    assert {h.memory.text for h in before_june} == {"Went to a concert in May", "Likes concert music"}


@pytest.mark.parametrize("query", ["喜欢", "喜欢 爱好", "张三 喜欢什么", "Go 语言", "喜欢 爱好 兴趣 偏好"])
async def test_the_seed_demo_memory_is_found_by_chinese_queries(make_service, query) -> None:
    svc = make_service()
    added = await svc.add(
        KEY, "张三喜欢 Go 语言编程", topics=["programming", "go", "interests", "technology"]
    )
    hits = await svc.search(KEY, query, KW)
    assert [h.id for h in hits] == [added.id]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Go 编程", "张三喜欢 Go 语言编程"),
        ("咖啡", "李四每天早上喝咖啡"),
        ("饮料", "李四每天早上喝咖啡"),
    ],
)
async def test_chinese_memories_are_found(make_service, query, expected) -> None:
    svc = make_service()
    await svc.add(KEY, "张三喜欢 Go 语言编程", topics=["programming", "go"])
    await svc.add(KEY, "李四每天早上喝咖啡", topics=["饮料"])
    hits = await svc.search(KEY, query, KW)
    assert hits and hits[0].memory.text == expected


@pytest.mark.parametrize(
    ("query", "named"), [("小刘", "小刘"), ("小刘做什么工作？", "小刘"), ("老陈的爱好", "老陈")]
)
async def test_a_familiar_chinese_name_finds_the_memories_naming_it(make_service, query, named) -> None:
    """jieba splits 小刘是… into 小 + 刘是: a keyword search for 小刘 matched nothing."""
    svc = make_service()
    texts = ["小刘是我的同事，在银行上班", "老陈有三个孙子", "老陈喜欢钓鱼", "小张在学校教书"]
    for text in texts:
        await svc.add(KEY, text)
    hits = await svc.search(KEY, query, KW)
    assert hits and {h.memory.text for h in hits} == {t for t in texts if t.startswith(named)}
