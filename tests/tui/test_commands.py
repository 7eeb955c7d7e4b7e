"""One registry of commands and actions (memchat.agent.commands.ACTIONS):
every entry reaches every place a person looks for it — the key bindings, the
command palette, Tab completion and the typing hint, the TUI's and the
console's /help — and each runs through its ``action_<name>``."""

from __future__ import annotations

import io

from memchat.agent.commands import ACTIONS, Command, console_help, parse_command, slash_commands
from memchat.tui.actions import KEY_NAMES
from memchat.tui.app import MemchatApp
from memchat.tui.widgets.message import Note

from .support import make_app, make_settings, ready, runner_factory, say

SIZE = (120, 40)


def test_every_binding_is_a_registry_entry_and_every_key_is_bound() -> None:
    bound = {(b.key, b.action) for b in MemchatApp.BINDINGS}  # type: ignore[union-attr]
    assert bound == {(a.key, a.action) for a in ACTIONS if a.key}
    for action in ACTIONS:  # the palette and the slash commands run these
        assert callable(getattr(MemchatApp, f"action_{action.action}", None)), action.action


def test_every_command_and_alias_parses_to_its_entry() -> None:
    for action in slash_commands():
        for typed in (action.name, *action.aliases):
            parsed = parse_command(f"  {typed.upper()}  ")
            assert parsed.action is action, typed
    assert parse_command("/export json").text == "json"
    assert parse_command("/memory").kind is Command.MEMORY and parse_command("/memory").text
    assert parse_command("/usr/bin is slow").kind is Command.MESSAGE
    assert parse_command("/frobnicate").kind is Command.UNKNOWN


async def test_every_entry_is_in_the_palette_completion_and_help() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await say(pilot, "/help")
        help_text = [n.text for n in app.chat.chat_log.query(Note) if n.kind == "help"][-1]

        # The palette: Stop while an answer is written, Reconnect while not connected.
        app.busy = True
        titles = {c.title for c in app.get_system_commands(app.screen)}
        app.busy = False
        runner, app.runner = app.runner, None
        titles |= {c.title for c in app.get_system_commands(app.screen)}
        app.runner = runner
        missing = [a.title for a in ACTIONS if a.title not in titles]
        assert not missing, f"not in the command palette: {missing}"

        hint = app.chat.query_one("#command-hint")
        chat_input = app.chat.chat_input
        for action in ACTIONS:
            if action.command is None:
                if action.key:  # a key of its own: /help's keys line names it
                    assert KEY_NAMES.get(action.key, action.key) in help_text, action.key
                continue
            assert f"{action.name}" in help_text and action.summary in help_text, action.name
            assert f"({action.help_key})" in help_text, action.name
            # Typing all but the last letter shows it in the hint line, and Tab completes it.
            chat_input.focus()
            chat_input.clear()
            await pilot.press("slash", *action.name[1:-1])
            assert action.name in str(hint.render()), action.name
            await pilot.press("tab")
            assert chat_input.text == action.name
        chat_input.clear()


def test_console_help_lists_the_reference_commands() -> None:
    """(tests/agent/test_console.py checks the whole transcript, this list included.)"""
    text = "\n".join(console_help())
    for action in slash_commands():
        if action.console:
            assert f"{action.name:<9} - {action.console}" in text
    # The console's list is the reference's: /forget (TUI-first, it asks before deleting) is not in it.
    assert "/forget" not in text


async def test_every_command_has_a_console_handler_and_none_reaches_the_model(tmp_path, monkeypatch) -> None:
    """The console runs each slash command itself (only /memory asks the model, as the reference does)."""
    from memchat.console import Console

    monkeypatch.chdir(tmp_path)  # /export writes here
    runner = await runner_factory()(make_settings())
    try:
        out = io.StringIO()
        console = Console(runner, out, echo_input=True)
        for action in slash_commands():
            before = out.tell()
            keep_going = await console.handle(action.name)
            said = out.getvalue()[before:]
            assert said.strip(), action.name
            assert keep_going is (action.command is not Command.EXIT), action.name
            assert ("🤖 Assistant" in said) is (action.command is Command.MEMORY), action.name
    finally:
        await runner.service.close()
