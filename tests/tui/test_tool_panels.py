"""Pilot tests of the live tool-call panels."""

from __future__ import annotations

import asyncio
import json

from textual.app import App
from textual.widgets import Button, Collapsible

from memchat.agent.llm import ToolCall
from memchat.tui.app import MemchatApp
from memchat.tui.format import SPINNER
from memchat.tui.widgets.message import AssistantMessage
from memchat.tui.widgets.tool_panel import ToolCallPanel
from tests.agent.scripted_model import ScriptedModel, Step

from .support import make_settings, ready, runner_factory, say, wait_until

SIZE = (120, 40)


class GatedTool:
    """Wraps a memory tool so that it waits for ``gate`` before running."""

    def __init__(self, tool) -> None:
        self.tool = tool
        self.name = tool.name
        self.schema = tool.schema
        self.gate = asyncio.Event()

    async def run(self, arguments, key):
        await self.gate.wait()
        return await self.tool.run(arguments, key)


def panels(app: MemchatApp) -> list[ToolCallPanel]:
    return list(app.chat.chat_log.query(ToolCallPanel))


def title_of(panel: ToolCallPanel) -> str:
    return panel.title.plain


async def test_a_panel_goes_initiated_executing_done() -> None:
    args = '{"memory": "User likes jazz", "topics": ["music"]}'
    model = ScriptedModel([Step("Saving.", [("call-1", "memory_add", args)]), Step("Saved.")])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        gated = app.runner.tools["memory_add"] = GatedTool(app.runner.tools["memory_add"])
        await say(pilot, "I like jazz", wait=False)
        await wait_until(pilot, lambda: bool(panels(app)) and panels(app)[0].state == "executing")
        panel = panels(app)[0]
        assert panel.collapsed  # one line per call by default
        assert 'memory_add memory="User likes jazz", topics=["music"]' in title_of(panel)
        assert "executing" in title_of(panel) and title_of(panel)[0] in SPINNER
        first = title_of(panel)
        await pilot.pause(0.25)
        assert title_of(panel) != first  # the spinner turns, the elapsed time grows
        assert not panel.query(".tool-args")  # details are built when first opened
        panel.collapsed = False
        await wait_until(pilot, lambda: bool(panel.query(".tool-args")))
        assert "call call-1" in str(panel.query_one(".tool-label").render())
        # Arguments are highlighted JSON.
        shown_args = panel.query_one(".tool-args").render()
        assert json.loads(shown_args.plain) == json.loads(args)
        assert shown_args.spans  # coloured
        gated.gate.set()
        await wait_until(pilot, lambda: not app.busy)
        assert panel.state == "done" and title_of(panel).startswith("✅") and "done" in title_of(panel)
        assert "→ Memory added successfully" in title_of(panel)  # the short result, on the same line
        assert panel.elapsed is not None and panel.elapsed >= 0.2
        result = json.loads(panel.query_one(".tool-result").render().plain)
        assert result["message"] == "Memory added successfully"
        assert panel.has_class("-done") and not panel.query(Button)


async def test_an_unknown_tool_shows_an_error_panel() -> None:
    model = ScriptedModel([Step("", [("call-x", "memory_teleport", "{}")]), Step("Sorry.")])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "teleport")
        panel = panels(app)[0]
        assert panel.state == "error" and title_of(panel).startswith("❌") and panel.has_class("-error")
        assert "→ unknown tool memory_teleport" in title_of(panel)
        panel.collapsed = False
        await wait_until(pilot, lambda: bool(panel.query(".tool-result")))
        assert "unknown tool memory_teleport" in panel.query_one(".tool-result").render().plain


async def test_parallel_calls_get_one_panel_each_and_stop_cancels_them() -> None:
    calls = [("a", "memory_search", '{"query": "go"}'), ("b", "memory_load", "{}")]
    model = ScriptedModel([Step("", calls), Step("done")])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.runner.tools["memory_search"] = GatedTool(app.runner.tools["memory_search"])
        await say(pilot, "what do I like?", wait=False)
        await wait_until(pilot, lambda: len(panels(app)) == 2 and panels(app)[0].state == "executing")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.busy)
        states = [p.state for p in panels(app)]
        assert states[0] == "cancelled" and states[1] in ("done", "cancelled")
        message = app.chat.chat_log.query_one(AssistantMessage)
        assert message.stopped
        history = app.runner.history
        answered = {m["tool_call_id"] for m in history if m["role"] == "tool"}
        assert answered == {"a", "b"}  # the session stays consistent for the next request


async def test_panels_collapse_and_long_results_expand() -> None:
    model = ScriptedModel([Step("", [("load-1", "memory_load", '{"limit": 50}')]), Step("Here they are.")])
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        for i in range(30):
            await app.runner.service.add(app.runner.key, f"User fact number {i}", topics=["facts"])
        await say(pilot, "load everything")
        panel = panels(app)[0]
        assert "→ 30 results: User fact number" in title_of(panel)
        # Enter on the one-line title opens the panel.
        panel.query_one("CollapsibleTitle").focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(panel.query(".tool-result")))
        result = panel.query_one(".tool-result")
        button = panel.query_one(".show-all", Button)
        assert "more lines" in str(button.label)
        assert result.render().plain.count("\n") < 20
        button.press()
        await wait_until(pilot, lambda: not panel.query(".show-all"))
        assert json.loads(result.render().plain)["count"] == 30
        # Enter on the title folds the panel again, and opens it.
        assert not panel.collapsed
        panel.query_one("CollapsibleTitle").focus()
        await pilot.press("enter")
        assert panel.collapsed
        await pilot.press("enter")
        assert not panel.collapsed


async def test_a_new_panel_starts_initiated() -> None:
    class Host(App):
        def compose(self):
            yield Collapsible(ToolCallPanel(ToolCall("c9", "memory_search", "{not json"), expanded=True),
                              title="host", collapsed=False)  # fmt: skip

    async with Host().run_test() as pilot:
        panel = pilot.app.query_one(ToolCallPanel)
        assert panel.state == "initiated" and "initiated" in title_of(panel)
        await pilot.pause()
        assert panel.query_one(".tool-args").render().plain == "{not json"  # shown as sent


async def test_ctrl_o_opens_every_panel_and_new_ones_follow() -> None:
    calls = [("a", "memory_search", '{"query": "go"}'), ("b", "memory_load", "{}")]
    steps = [Step("", calls), Step("Found."), Step("", [("c", "memory_load", "{}")]), Step("Again.")]
    model = ScriptedModel(steps)
    app = MemchatApp(make_settings(), runner_factory=runner_factory(lambda: model), cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "what do I like?")
        assert [p.collapsed for p in panels(app)] == [True, True]
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: all(p.query(".tool-result") for p in panels(app)), what="open panels")
        assert not any(p.collapsed for p in panels(app))
        await say(pilot, "load again")
        assert not panels(app)[-1].collapsed  # the setting holds for the next calls
        await pilot.press("ctrl+o")
        assert all(p.collapsed for p in panels(app))


async def test_memory_ids_are_shortened_in_panels() -> None:
    app = MemchatApp(make_settings(enable_tools=("memory_delete",)), runner_factory=runner_factory(),
                     cursor_blink=False)  # fmt: skip
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        entry = await app.runner.service.add(app.runner.key, "User likes Go", topics=["tech"])
        call = ToolCall("d1", "memory_delete", json.dumps({"memory_id": entry.id}))
        view = await app.chat.chat_log.add_assistant()
        await view.add_tool_calls((call,), expanded=True)
        result = json.dumps({"message": "Memory deleted successfully", "memory_id": entry.id})
        view.tool_finished(call, result, False, 0.001)
        await pilot.pause()
        panel = panels(app)[0]
        shown = title_of(panel) + "".join(str(p.render()) for p in panel.query(".tool-json"))
        assert entry.id not in shown  # 64 characters nowhere
        assert f"{entry.id[:12]}…" in title_of(panel)  # the prefix `memchat memory delete` accepts
        assert json.loads(str(panel.query_one(".tool-result").render()))["memory_id"] == f"{entry.id[:12]}…"
