"""The command registry (memchat.agent.commands) as the TUI shows it: the
app's key bindings, the command palette's entries and the /help note. Nothing
here names a command: add one to the registry and it appears in all three."""

from __future__ import annotations

from textual.binding import Binding, BindingType
from textual.content import Content

from memchat.agent.commands import ACTIONS, Action, slash_commands

#: The footer's order, left to right (the registry's order is the reference's /help order).
FOOTER_ORDER = (
    "stop", "new_session", "toggle_memories", "toggle_streaming", "toggle_tool_panels", "sessions",
    "copy_message", "help", "quit",
)  # fmt: skip

#: How a key is written for people where Textual's name is not it.
KEY_NAMES = {"escape": "Esc"}

#: The /help note's last line: the keys of the message box and the conversation.
KEYS_LINE = (
    "[$text-muted]Keys: Enter send · ctrl+j new line · ↑/↓ history · Tab completes a command · "
    "Esc stops an answer · PgUp/PgDn scroll the conversation (ctrl+Home/ctrl+End: top, end) · "
    "ctrl+o opens or folds all tool calls (Enter or a click: one) · "
    "ctrl+y copies the selected (click it) or last answer · ctrl+p command palette[/]"
)

#: Actions that make no sense while a dialog is open, or while the app saves memories before quitting.
CHAT_ACTIONS = frozenset(a.action for a in ACTIONS if not a.in_dialogs)
QUITTING_ACTIONS = frozenset(a.action for a in ACTIONS if not a.while_saving)


def _footer_position(action: Action) -> int:
    return FOOTER_ORDER.index(action.action) if action.action in FOOTER_ORDER else len(FOOTER_ORDER)


def key_bindings() -> list[BindingType]:
    """The app's bindings: one per action with a key, footer labels in the footer's order."""
    keyed = sorted((a for a in ACTIONS if a.key), key=_footer_position)
    return [
        Binding(a.key, a.action, a.footer or a.title, show=bool(a.footer), priority=a.priority,
                tooltip=a.description)
        for a in keyed
    ]  # fmt: skip


def palette_help(action: Action) -> str:
    """The palette's line under the title: what it does, then how else to reach it."""
    ways = [way for way in (action.name, KEY_NAMES.get(action.key, action.key) or action.elsewhere) if way]
    return f"{action.description} ({', '.join(ways)})" if ways else action.description


def help_note() -> Content:
    """/help: every slash command with what it does and its key, then the keys."""
    commands = slash_commands()
    width = max(len(a.name) for a in commands)
    lines = [Content.from_markup("💡 [b]Special commands[/b]")]
    for action in commands:
        lines.append(
            Content.from_markup(
                "   [b $accent]$name[/]$what  [$text-muted]($key)[/]",
                name=action.name.ljust(width + 2),
                what=action.summary,
                key=action.help_key,
            )
        )
    lines.append(Content.from_markup(KEYS_LINE))
    return Content("\n").join(lines)
