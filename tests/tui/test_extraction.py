"""Pilot tests of auto mode in the TUI: the header shows a running background
extraction, the chat log what it changed (or why it failed), the memory panel
reloads by itself, and quitting waits for what is pending."""

from __future__ import annotations

import asyncio

import pytest

from memchat.agent.factory import offline_facts
from memchat.engine import Entry, Memory, UserKey
from memchat.engine.extraction import ExtractionFinished, ModelExtractor, RuleBasedExtractor
from memchat.settings import Settings
from memchat.tui.app import MemchatApp
from memchat.tui.widgets.message import ExtractionNote, Note, extraction_content
from tests.agent.scripted_model import ScriptedModel, Step

from .support import FIXED_NOW, make_app, make_settings, ready, runner_factory, say, wait_until

SIZE = (120, 40)
BERLIN = "I live in Berlin and I like jazz"


class GatedExtractor(RuleBasedExtractor):
    """The offline rule-based extractor, held at the start of each job until
    the test opens the gate."""

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(offline_facts)
        self.gate = asyncio.Event()
        self.started = 0

    async def extract(self, messages, existing, *, enabled=None, reference_date=None):
        self.started += 1
        await self.gate.wait()
        return await super().extract(messages, existing, enabled=enabled, reference_date=reference_date)


def auto_app(
    *, extractor=None, opened=None, store_options=None, memory: str = "inmemory", **settings
) -> MemchatApp:
    return make_app(
        make_settings(memory=memory, extract=True, **settings),
        extractor=extractor,
        opened=opened,
        store_options=store_options,
    )


def extraction_notes(app: MemchatApp) -> list[ExtractionNote]:
    return list(app.chat.chat_log.query(ExtractionNote))


def panel_texts(app: MemchatApp) -> list[str]:
    return sorted(e.memory.text for e in app.chat.memory_panel.memory_list.entries)


def header_text(app: MemchatApp) -> str:
    return app.chat.header.render().plain


def finished_events(runner) -> list[ExtractionFinished]:
    events: list[ExtractionFinished] = []
    runner.add_extraction_listener(lambda e: events.append(e) if isinstance(e, ExtractionFinished) else None)
    return events


@pytest.mark.parametrize("backend", ["inmemory", "sqlite"])
async def test_new_memories_show_in_the_log_and_the_open_panel_by_themselves(backend, tmp_path) -> None:
    store_options = {"dsn": f"sqlite:///{tmp_path / 'memories.db'}"} if backend == "sqlite" else None
    app = auto_app(memory=backend, store_options=store_options)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        banner = next(n.text for n in app.chat.chat_log.query(Note) if n.kind == "banner")
        assert "🧩 Auto extraction: rule-based (offline) in the background, after every turn" in banner
        assert "memory_add, memory_update, memory_delete used by the background extractor" in banner
        assert app.chat.header.auto and "🧩 auto" in header_text(app)
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: "No memories yet." in app.chat.memory_panel.memory_list.empty_text)
        assert panel_texts(app) == []

        await say(pilot, BERLIN)
        await wait_until(pilot, lambda: bool(extraction_notes(app)), what="the extraction line")
        [note] = extraction_notes(app)
        assert note.kind == "extraction"
        assert note.text.splitlines() == [
            "🧩 Background extraction: +2 added",
            "   + User lives in Berlin",
            "   + User likes jazz",
        ]
        # The panel was open: it lists them without the user doing anything.
        await wait_until(pilot, lambda: panel_texts(app) == ["User likes jazz", "User lives in Berlin"],
                         what="the panel to list the new memories")  # fmt: skip
        assert app.chat.memory_panel.border_title == "Memories (2)"
        assert app.extracting == 0 and "extracting" not in header_text(app)

        # Saying it again changes nothing: no new line in the log.
        await say(pilot, "I like jazz")
        await wait_until(pilot, lambda: app.runner.extraction_pending == 0 and app.extracting == 0)
        await pilot.pause()
        assert len(extraction_notes(app)) == 1


async def test_the_header_shows_a_running_extraction_and_the_chat_does_not_wait() -> None:
    extractor = GatedExtractor()
    app = auto_app(extractor=lambda settings: extractor)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, BERLIN)  # returns once the answer is complete
        await wait_until(pilot, lambda: app.chat.header.extracting == 1, what="the extraction to start")
        assert "🧩 extracting…" in header_text(app)
        assert not app.busy and app.chat.header.status == "ready" and not extraction_notes(app)
        # The chat goes on while it runs.
        await say(pilot, "hello")
        assert not app.busy
        extractor.gate.set()
        await wait_until(pilot, lambda: app.extracting == 0 and bool(extraction_notes(app)))
        assert "🧩 extracting…" not in header_text(app) and "🧩 auto" in header_text(app)
        assert "+2 added" in extraction_notes(app)[0].text
        # The panel was closed: it reads the new memories when opened.
        await pilot.press("ctrl+b")
        await wait_until(pilot, lambda: panel_texts(app) == ["User likes jazz", "User lives in Berlin"])


async def test_a_failed_extraction_shows_an_error_and_the_app_stays_usable() -> None:
    model = ScriptedModel(
        [
            Step(error="extractor model unavailable"),
            Step(calls=[("c1", "memory_add", '{"memory": "User likes tea", "topics": ["food"]}')]),
        ]
    )
    app = auto_app(extractor=lambda settings: ModelExtractor(model))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+b")
        await say(pilot, "I like tea")
        await wait_until(pilot, lambda: bool(extraction_notes(app)), what="the failure line")
        [failed] = extraction_notes(app)
        assert failed.kind == "error" and failed.has_class("-error")
        assert failed.text == (
            "🧩 Background extraction failed: model error: extractor model unavailable "
            "(the messages are kept for the next try)"
        )
        assert app.extracting == 0 and "extracting" not in header_text(app)
        assert panel_texts(app) == []
        # The chat goes on; the next extraction retries the kept messages and succeeds.
        await say(pilot, "What do I like?")
        assert app.chat.chat_log.last_assistant().copy_text()
        await wait_until(pilot, lambda: len(extraction_notes(app)) == 2, what="the retry")
        assert extraction_notes(app)[-1].text.splitlines() == [
            "🧩 Background extraction: +1 added",
            "   + User likes tea",
        ]
        retried = [m["content"] for m in model.requests[-1] if m["role"] == "user"]
        assert retried[:2] == ["I like tea", "What do I like?"]
        await wait_until(pilot, lambda: panel_texts(app) == ["User likes tea"])


async def test_quitting_waits_for_the_pending_extraction_without_freezing() -> None:
    extractor = GatedExtractor()
    opened = []
    app = auto_app(extractor=lambda settings: extractor, opened=opened)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        events = finished_events(opened[0])
        await say(pilot, BERLIN)
        await wait_until(pilot, lambda: app.extracting == 1, what="the extraction to start")
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert app.is_running and app.quitting == 0
        assert app.chat.header.status == "saving" and "saving memories" in header_text(app)
        saving = [n.text for n in app.chat.chat_log.query(Note) if n.kind == "warn"]
        assert saving and saving[-1].startswith("💾 Saving memories from this conversation before quitting…")
        # The screen stays live: the panel opens, and a message is refused (not queued).
        await pilot.press("ctrl+b")
        assert app.chat.memory_panel.display
        turns = app.turn
        await say(pilot, "one more thing", wait=False)
        await pilot.pause()
        assert app.turn == turns and app.is_running
        extractor.gate.set()
        await wait_until(pilot, lambda: not app.is_running, what="the exit")
    assert app.return_code == 0
    assert [e.status for e in events] == ["ok"]
    assert sorted(e.memory.text for e in events[0].added) == ["User likes jazz", "User lives in Berlin"]


async def test_exit_extracts_what_the_checkers_held_back() -> None:
    opened = []
    app = auto_app(opened=opened, extract_every=10)  # a turn is 2 messages: never reached here
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        events = finished_events(opened[0])
        await say(pilot, BERLIN)
        await pilot.pause(0.05)
        assert events == [] and app.extracting == 0
        await say(pilot, "/exit", wait=False)
        await wait_until(pilot, lambda: not app.is_running, what="the exit")
    assert [e.status for e in events] == ["ok"]
    assert sorted(e.memory.text for e in events[0].added) == ["User likes jazz", "User lives in Berlin"]


async def test_quitting_again_does_not_wait() -> None:
    extractor = GatedExtractor()  # never opened: the job would run until its 30 s timeout
    opened = []
    app = auto_app(extractor=lambda settings: extractor, opened=opened)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        events = finished_events(opened[0])
        await say(pilot, BERLIN)
        await wait_until(pilot, lambda: app.extracting == 1, what="the extraction to start")
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: app.quitting == 0)
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: not app.is_running, timeout=5, what="the exit without waiting")
    assert [e.status for e in events] == ["cancelled"]


async def test_agentic_mode_quits_at_once_and_shows_no_auto_indicator() -> None:
    app = MemchatApp(make_settings(), runner_factory=runner_factory(), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert not app.chat.header.auto and "🧩" not in header_text(app)
        banner = next(n.text for n in app.chat.chat_log.query(Note) if n.kind == "banner")
        assert "Auto extraction" not in banner
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: not app.is_running, what="the exit")
        assert app.quitting is None


def entry(text: str) -> Entry:
    return Entry(f"id-{text}", "memory-chat", "user", Memory(text), FIXED_NOW, FIXED_NOW)


def test_extraction_line_lists_every_kind_of_change_and_the_failures() -> None:
    key = UserKey("memory-chat", "user")
    moved = (entry("User lives in Berlin"), entry("User lives in Munich"))
    event = ExtractionFinished(
        key, "s", "ok", messages=2, added=(entry("User likes tea"),),
        updated=(moved, (None, entry("User likes Go"))), deleted=(entry("User has a cat"),),
        skipped=("memory_update with memory_id 9 was skipped",), errors=("memory_add: disk full",),
    )  # fmt: skip
    assert extraction_content(event).plain.splitlines() == [
        "🧩 Background extraction: +1 added, 2 updated, 1 deleted  (1 invalid operation skipped, 1 failed)",
        "   + User likes tea",
        "   ~ User lives in Munich  (was: User lives in Berlin)",
        "   ~ User likes Go",
        "   - User has a cat",
        "   ! memory_add: disk full",
        "   ? memory_update with memory_id 9 was skipped",
    ]
    many = ExtractionFinished(key, "s", "ok", added=tuple(entry(f"fact {i}") for i in range(11)))
    lines = extraction_content(many).plain.splitlines()
    assert len(lines) == 1 + ExtractionNote.MAX_LISTED + 1 and lines[-1] == "   … and 3 more"
    timeout = ExtractionFinished(key, "s", "timeout", errors=("memory extraction timed out after 30 s",))
    assert extraction_content(timeout).plain == (
        "🧩 Background extraction timed out: memory extraction timed out after 30 s "
        "(the messages are kept for the next try)"
    )
    cleared = ExtractionFinished(key, "s", "ok", cleared=3)
    assert extraction_content(cleared).plain.splitlines() == [
        "🧩 Background extraction: 3 cleared",
        "   - 3 memories cleared",
    ]
