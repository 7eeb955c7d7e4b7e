"""A long answer: shown in blocks (only the last one is laid out again while
it streams), copied whole, and scrolled with PgUp/PgDn and ctrl+Home/ctrl+End."""

from __future__ import annotations

from memchat.tui.app import MemchatApp
from memchat.tui.widgets.message import BLOCK_CHARS, SealedMarkdown, block_cut
from tests.agent.scripted_model import ScriptedModel, Step

from .support import make_settings, ready, runner_factory, say, wait_until

SIZE = (100, 30)


def long_answer() -> str:
    paragraphs = []
    for i in range(40):
        if i % 10 == 5:
            paragraphs.append("```python\n" + "\n\n".join(f"x{i}_{j} = {j}" for j in range(6)) + "\n```")
        else:
            paragraphs.append(f"Paragraph {i}: " + "memory engine stores facts and finds them again " * 3)
    return "\n\n".join(paragraphs)


def test_block_cut_only_at_blank_lines_outside_code() -> None:
    assert block_cut("some text", "more\n\nnext", size=5) == len("more\n\n")
    assert block_cut("some text", "more\n\nnext", size=100) == 0  # not big enough yet
    assert block_cut("some text", "no blank line", size=5) == 0
    # Inside a fenced block a blank line is not a cut; after the fence closes it is.
    assert block_cut("```\ncode", "\n\nstill code", size=5) == 0
    assert block_cut("```\ncode", "\n\nstill\n```\n\nprose", size=5) == len("\n\nstill\n```\n\n")


async def test_a_long_answer_streams_in_blocks_and_copies_whole() -> None:
    text = long_answer()
    model = ScriptedModel([Step(text)])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "tell me everything")
        view = app.chat.chat_log.last_assistant()
        sealed = list(view.query(SealedMarkdown))
        assert len(sealed) >= len(text) // (BLOCK_CHARS * 2)  # many blocks, each one widget
        assert all(block.text.endswith("\n\n") for block in sealed)
        assert all(block.text.count("```") % 2 == 0 for block in sealed)  # code blocks never cut
        assert view.copy_text() == text  # the blocks are a display detail
        shown = "".join(block.text for block in sealed)
        assert text.startswith(shown) and len(view.query("Markdown")) == 1  # the tail, still Markdown


async def test_page_keys_scroll_the_conversation_from_the_message_box() -> None:
    model = ScriptedModel([Step(long_answer())])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "tell me everything")
        chat_log = app.chat.chat_log
        await pilot.pause()
        assert app.focused is app.chat.chat_input
        bottom = chat_log.scroll_y
        assert bottom == chat_log.max_scroll_y > 0
        await pilot.press("pageup")
        await pilot.pause(0.3)
        assert chat_log.scroll_y < bottom
        await pilot.press("ctrl+home")
        await pilot.pause(0.3)
        assert chat_log.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause(0.3)
        assert chat_log.scroll_y > 0
        await pilot.press("ctrl+end")
        await pilot.pause(0.3)
        assert chat_log.scroll_y == chat_log.max_scroll_y
        assert app.focused is app.chat.chat_input  # still typing where you were
        keys = [b.key for b in app.chat.chat_input.BINDINGS]  # shown in the footer
        assert "pageup" in keys and "ctrl+home" in keys


async def test_full_garbage_collections_wait_while_an_answer_streams() -> None:
    """A full collection walks every object the app holds (0.1-0.5 s): none
    starts while an answer streams, and they resume soon after it ends,
    finished or stopped (the young generations run throughout)."""
    import gc

    from memchat.tui import gc_pause

    before = gc.get_threshold()

    # 15 s of stream, stopped below: 0.6 s ran out before the check on a loaded
    # machine (CI, 2026-12-01), and the check then saw the pause already over.
    model = ScriptedModel([Step("one two three " * 500, delay=0.01), Step("a short answer")])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert gc_pause.holders() == 0 and gc.get_threshold() == before
        await say(pilot, "talk slowly", wait=False)
        await wait_until(pilot, lambda: "two" in app.chat.chat_log.last_assistant().copy_text())
        assert gc_pause.holders() == 1
        assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] == gc_pause.PAUSED_THRESHOLD
        await pilot.press("escape")  # stopped mid-stream
        await wait_until(pilot, lambda: not app.busy, what="the stop")
        assert app.chat.chat_log.last_assistant().stopped
        assert gc_pause.holders() == 0
        await wait_until(pilot, lambda: gc.get_threshold() == before, what="full collections to resume")
        await say(pilot, "and now?")
        assert gc_pause.holders() == 0
        await wait_until(pilot, lambda: not gc_pause.paused(), what="full collections to resume")
        assert gc.get_threshold() == before


async def test_full_garbage_collections_resume_when_the_app_closes_right_after_an_answer() -> None:
    """Quitting within a second of an answer's end (the idle before collections
    resume) leaves the process collecting as before: the resume waiting on the
    app's event loop would never run once the loop is gone."""
    import gc

    from memchat.tui import gc_pause

    before = gc.get_threshold()
    model = ScriptedModel([Step("a short answer")])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "hello")
        assert gc_pause.paused()  # the answer ended under a second ago
    assert not gc_pause.paused() and gc_pause.holders() == 0
    assert gc.get_threshold() == before
