"""/forget TEXT: the engine's search finds the memory, a dialog asks, then it
is deleted — whether or not the model's memory_delete tool is enabled."""

from __future__ import annotations

from memchat.tui.screens.confirm import ConfirmScreen

from .support import make_app, make_settings, memory_texts, ready, say, wait_until

SIZE = (120, 40)


def notes(app) -> str:
    return "\n".join(str(n.render()) for n in app.chat.chat_log.query(".note"))


async def test_forget_finds_asks_and_deletes_without_the_delete_tool() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert "memory_delete" not in app.runner.tools  # off by default
        await say(pilot, "I like Go")
        await say(pilot, "I live in Berlin")
        assert len(await memory_texts(app)) == 2
        # Asked the offline model, the refusal points to /forget and the panel's d.
        await say(pilot, "forget that I like Go")
        answer = app.chat.chat_log.last_assistant().copy_text()
        assert "/forget" in answer and "press d" in answer
        # Cancel keeps it.
        await say(pilot, "/forget I like Go", wait=False)
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        assert "likes Go" in str(app.screen.query_one("#confirm-detail").render())
        await pilot.press("n")
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert len(await memory_texts(app)) == 2
        # Yes deletes it, and the chat says so.
        await say(pilot, "/forget Go", wait=False)
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("y")
        await wait_until(pilot, lambda: "Deleted: User likes Go" in notes(app), what="the note")
        remaining = await memory_texts(app)
        assert len(remaining) == 1 and "Berlin" in remaining[0]


async def test_forget_without_a_match_or_without_text_deletes_nothing() -> None:
    app = make_app(make_settings(search="keyword"))  # no shared word, no match (meaning always finds one)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "I like Go")
        await say(pilot, "/forget")
        assert "/forget TEXT" in notes(app)
        await say(pilot, "/forget zzzqqq", wait=False)
        await wait_until(pilot, lambda: "No memory matches “zzzqqq”" in notes(app), what="the note")
        assert not isinstance(app.screen, ConfirmScreen)
        assert len(await memory_texts(app)) == 1
