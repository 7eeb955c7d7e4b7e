"""Pilot tests of the memory side panel: refresh after memory tools, filter,
details, delete and restore with confirmation, tombstones, 10k memories."""

from __future__ import annotations

from memchat.engine import Entry, Metadata, SearchOptions
from memchat.tui.app import MemchatApp
from memchat.tui.memory_actions import FILTER_RESULTS
from memchat.tui.screens.confirm import ConfirmScreen
from memchat.tui.widgets.memory_list import MemoryList
from memchat.tui.widgets.memory_panel import MemoryPanel
from tests.agent.scripted_model import ScriptedModel, Step

from .support import make_app, make_settings, ready, runner_factory, say, wait_until

SIZE = (120, 40)


def panel(app: MemchatApp) -> MemoryPanel:
    return app.chat.memory_panel


def listed(app: MemchatApp) -> list[Entry]:
    return panel(app).memory_list.entries


def texts(app: MemchatApp) -> list[str]:
    return [e.memory.text for e in listed(app)]


async def add(app: MemchatApp, *items: str, **kwargs) -> None:
    runner = app.runner
    for text in items:
        await runner.service.add(runner.key, text, topics=kwargs.get("topics", ["test"]),
                                 metadata=kwargs.get("metadata"))  # fmt: skip


async def open_panel(pilot, count: int | None = None, *, to_list: bool = True) -> None:
    """ctrl+b (the filter has the focus), then ↓ into the list unless ``to_list`` is False."""
    app = pilot.app
    await pilot.press("ctrl+b")
    if count is not None:
        await wait_until(pilot, lambda: len(listed(app)) == count, what=f"{count} memories listed")
    if to_list:
        await pilot.press("down")
        assert app.focused is panel(app).memory_list


async def test_panel_lists_newest_first_with_topics_and_details() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await add(app, "User likes coffee", topics=["food"])
        await add(
            app, "User went to Paris", topics=["travel"],
            metadata=Metadata(kind="episode", participants=["Li"], location="Paris"),
        )  # fmt: skip
        await open_panel(pilot, 2)
        assert texts(app) == ["User went to Paris", "User likes coffee"]
        assert panel(app).border_title == "Memories (2)"
        details = str(app.chat.query_one("#memory-details").render())
        for expected in ("User went to Paris", "episode", "travel", "Paris", "Li", listed(app)[0].id[:12]):
            assert expected in details
        await pilot.press("down")
        details = str(app.chat.query_one("#memory-details").render())
        assert "User likes coffee" in details and "food" in details
        # The rows on screen show text and topics.
        memory_list = panel(app).memory_list
        line = "".join(seg.text for seg in memory_list.render_line(0))
        meta = "".join(seg.text for seg in memory_list.render_line(1))
        assert "User went to Paris" in line and "travel" in meta


async def test_panel_refreshes_after_memory_add() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await open_panel(pilot, 0)
        assert "No memories yet." in "".join(s.text for s in panel(app).memory_list.render_line(0))
        await say(pilot, "I'm Zhang San and I like Go")
        await wait_until(pilot, lambda: len(listed(app)) >= 1, what="the refresh")
        assert any("Go" in t for t in texts(app))


async def test_closed_panel_refreshes_when_opened() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await open_panel(pilot, 0)
        await pilot.press("ctrl+b")
        await say(pilot, "I like tea")
        await open_panel(pilot, 1)


async def test_filter_searches_through_the_engine() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await add(app, "User likes coffee", "User likes Go programming", "User lives in Paris")
        await open_panel(pilot, 3)
        searched: list[str] = []
        service = app.runner.service
        original = service.search

        async def spy(key, query, options=None):
            searched.append(query)
            return await original(key, query, options)

        service.search = spy
        app.chat.query_one("#memory-filter").focus()
        for key in "coffee":
            await pilot.press(key)
        await wait_until(pilot, lambda: texts(app) == ["User likes coffee"], what="the filter as typed")
        assert searched == []  # typing narrows what is listed; Enter asks the engine
        await pilot.press("enter")
        await wait_until(pilot, lambda: searched == ["coffee"], what="the ranked search")
        await wait_until(pilot, lambda: "ranked" in str(app.chat.query_one("#memory-status").render()))
        # Exactly what the engine ranks (hybrid: the best first, weaker ones after).
        expected = await original(app.runner.key, "coffee", SearchOptions(max_results=FILTER_RESULTS))
        assert [e.id for e in listed(app)] == [e.id for e in expected]
        assert app.focused is panel(app).memory_list  # d and r work on the results at once
        panel(app).focus_filter()
        for _ in "coffee":
            await pilot.press("backspace")
        await wait_until(pilot, lambda: len(listed(app)) == 3, what="the unfiltered list")


async def test_keyword_search_filters_to_nothing_when_no_word_is_shared() -> None:
    app = make_app(make_settings(search="keyword"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await add(app, "User likes coffee", "User lives in Paris")
        await open_panel(pilot, 2)
        app.chat.query_one("#memory-filter").focus()
        for key in "zzz":
            await pilot.press(key)
        await pilot.press("enter")
        await wait_until(pilot, lambda: listed(app) == [], what="no match")
        assert "Nothing matches" in "".join(s.text for s in panel(app).memory_list.render_line(0))


async def test_delete_and_restore_with_confirmation_soft_delete() -> None:
    app = make_app(make_settings(soft_delete=True))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await add(app, "User likes coffee", "User likes tea")
        await open_panel(pilot, 2)
        first = listed(app)[0]
        memory_list = panel(app).memory_list
        assert memory_list.check_action("restore", ()) is False
        # Cancelling keeps the memory.
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert not listed(app)[0].is_deleted
        # Confirming deletes; the tombstone stays listed, dimmed.
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "restore" in str(app.screen.query_one("#confirm-detail").render())
        await pilot.press("y")
        await wait_until(pilot, lambda: any(e.is_deleted for e in listed(app)), what="the tombstone")
        tomb = next(e for e in listed(app) if e.id == first.id)
        assert tomb.is_deleted
        assert memory_list.current.id == first.id
        assert "deleted" in "".join(s.text for s in memory_list.render_line(1))
        assert memory_list.check_action("delete", ()) is False and memory_list.check_action("restore", ())
        assert await app.runner.service.count(app.runner.key) == 1
        # Restore.
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: not any(e.is_deleted for e in listed(app)), what="the restore")
        assert await app.runner.service.count(app.runner.key) == 2


async def test_hard_delete_removes_and_offers_no_restore() -> None:
    app = make_app(make_settings(soft_delete=False))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await add(app, "User likes coffee", "User likes tea")
        await open_panel(pilot, 2)
        assert panel(app).memory_list.check_action("restore", ()) is False
        await pilot.press("delete")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "cannot be undone" in str(app.screen.query_one("#confirm-detail").render())
        await pilot.click("#confirm-yes")
        await wait_until(pilot, lambda: len(listed(app)) == 1, what="the delete")
        assert texts(app) == ["User likes coffee"]


async def test_panel_after_a_model_deletes_through_its_tool() -> None:
    model = ScriptedModel([
        Step("", [("c1", "memory_add", '{"memory": "User likes jazz", "topics": ["music"]}')]),
        Step("Saved."),
    ])  # fmt: skip
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await open_panel(pilot, 0)
        await say(pilot, "I like jazz")
        await wait_until(pilot, lambda: texts(app) == ["User likes jazz"])


async def test_panel_error_is_shown() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)

        async def broken(*args, **kwargs):
            from memchat.engine import BackendError

            raise BackendError("sqlite backend at /x.db: read failed: disk I/O error")

        app.runner.service.read = broken
        await open_panel(pilot)
        await wait_until(
            pilot, lambda: "disk I/O error" in str(app.chat.query_one("#memory-status").render())
        )
        assert any("disk I/O error" in str(n.message) for n in app._notifications)


async def test_ten_thousand_memories_one_widget() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        entries = many_entries(10_000)
        service = app.runner.service

        async def read(key, limit=0, *, include_deleted=False):
            return entries

        async def count(key, *, include_deleted=False):
            return len(entries)

        service.read, service.count = read, count
        await open_panel(pilot, 10_000)
        memory_list = panel(app).memory_list
        assert isinstance(memory_list, MemoryList) and not memory_list.children
        assert memory_list.virtual_size.height == 20_000
        await pilot.press("end")
        assert memory_list.cursor == 9_999
        assert memory_list.scroll_offset.y > 19_000
        await pilot.press("pageup", "home")
        assert memory_list.cursor == 0 and memory_list.scroll_offset.y == 0


def many_entries(n: int) -> list[Entry]:
    from datetime import UTC, datetime, timedelta

    from memchat.engine import Memory, memory_id

    start = datetime(2025, 1, 1, tzinfo=UTC)
    return [
        Entry(memory_id(f"Memory number {i}", "memory-chat", "user"), "memory-chat", "user",
              Memory(f"Memory number {i}", (f"t{i % 7}",)), start + timedelta(minutes=i),
              start + timedelta(minutes=i))
        for i in reversed(range(n))
    ]  # fmt: skip


async def test_the_filter_ranks_as_the_memory_search_tool() -> None:
    """The issue: the filter box behaved like the keyword-only CLI. It is svc.search now:
    "kitten" finds "has a cat", first, in the order the tool gives."""
    import json

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await add(app, "Alice has a cat named Tom", "Alice works as a nurse in Berlin")
        await open_panel(pilot, 2)
        app.chat.query_one("#memory-filter").focus()
        for key in "kitten":
            await pilot.press(key)
        await pilot.press("enter")
        await wait_until(pilot, lambda: texts(app)[:1] == ["Alice has a cat named Tom"], what="the filter")
        [tool] = [t for t in app.runner.service.tools() if t.name == "memory_search"]
        found = json.loads(await tool.call({"query": "kitten"}, app.runner.key))
        assert [r["memory"] for r in found["results"]][:1] == texts(app)[:1]


async def test_without_an_embedder_the_app_says_so_once() -> None:
    app = make_app(make_settings(embedder="none"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert (
            said.count("semantic search is off (MEMCHAT_EMBEDDER=none): memories are found by keywords only")
            == 1
        ), said


async def test_filter_matches_parts_of_words_as_typed_and_is_focused_on_open() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await add(app, "User has a pet cat named Tom", "User lives in Berlin", "User likes coffee")
        await open_panel(pilot, 3, to_list=False)
        assert app.focused is panel(app).filter_input  # no shift+tab needed
        for key in "pet":
            await pilot.press(key)
        assert texts(app) == ["User has a pet cat named Tom"]  # at once, no engine call
        assert "containing “pet”" in str(app.chat.query_one("#memory-status").render())
        for _ in "pet":
            await pilot.press("backspace")
        for key in "Ber":
            await pilot.press(key)
        assert texts(app) == ["User lives in Berlin"]
        await pilot.press("backspace", "backspace", "backspace", "x", "y", "z")
        assert texts(app) == []
        assert "Enter to search by meaning" in "".join(s.text for s in panel(app).memory_list.render_line(0))
