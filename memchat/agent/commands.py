"""The commands and actions a person can ask for, declared once.

:data:`ACTIONS` is the one registry (as mistral-vibe's command registry and
Harlequin's actions are): each :class:`Action` names its slash command and
aliases, its key, its help texts and the action that runs it. The console's
``/help`` and parser, the TUI's key bindings, command palette, ``/help``,
typing hint and Tab completion are all derived from it, so adding a command
is one entry here (plus its handler: ``action_<action>`` in the TUI).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: The reference example rewrites /memory into this user message.
MEMORY_PROMPT = "show what you remember about me"


class Command(enum.Enum):
    EMPTY = "empty"
    MESSAGE = "message"
    EXIT = "/exit"
    NEW = "/new"
    MEMORY = "/memory"
    HELP = "/help"
    STREAM = "/stream"
    SESSIONS = "/sessions"
    EXPORT = "/export"
    FORGET = "/forget"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Action:
    """One thing a person can ask for: by slash command, key, command palette, or all three."""

    #: What runs it in the TUI: the app's ``action_<action>`` method.
    action: str
    #: The command palette's title.
    title: str
    #: What it does, at length: the command palette's help and the key's tooltip.
    description: str
    #: The slash command ("" when there is none), and what else it may be typed as.
    command: Command | None = None
    aliases: tuple[str, ...] = ()
    #: The command takes the rest of the line (an export format, what to forget).
    takes_argument: bool = False
    #: The TUI's ``/help`` line and typing hint.
    summary: str = ""
    #: The console's ``/help`` line ("": the console does not list it; its list is the reference's).
    console: str = ""
    #: The app-wide key, and its footer label ("": not in the footer).
    key: str = ""
    footer: str = ""
    #: The key wins over the focused widget's (ctrl+q, ctrl+y in the message box).
    priority: bool = False
    #: Where else it is reached when it has no app-wide key ("d in the panel"), and what the
    #: command takes ("md or json"): /help shows the first there is of key, elsewhere, argument.
    elsewhere: str = ""
    argument: str = ""
    #: Allowed while a dialog is open / while the app saves memories before quitting.
    in_dialogs: bool = False
    while_saving: bool = True
    #: Textual's own palette already offers it (Quit).
    builtin_palette: bool = False

    @property
    def name(self) -> str:
        """``/new``, or "" for an action without a slash command."""
        return self.command.value if self.command is not None else ""

    @property
    def help_key(self) -> str:
        """How /help says to use it besides the command: its key, where else, or what it takes."""
        return self.key or self.elsewhere or self.argument


#: Every command and action, in the order /help, the console and completion list them.
ACTIONS: tuple[Action, ...] = (
    Action("toggle_memories", "Memory panel", "Show or hide your memories", Command.MEMORY,
           summary="Show or hide the memory panel", console="Show user memories",
           key="ctrl+b", footer="Memories"),
    Action("new_session", "New session", "Start a new conversation; memories are kept", Command.NEW,
           summary="New session (memories are kept)", console="Start a new session (memories are kept)",
           key="ctrl+n", footer="New", while_saving=False),
    Action("toggle_streaming", "Toggle streaming", "Stream answers token by token, or show them whole",
           Command.STREAM, summary="Toggle streaming", console="Toggle streaming output",
           key="ctrl+t", footer="Stream", while_saving=False),
    Action("sessions", "Sessions", "Saved conversations: open, rename, delete, search", Command.SESSIONS,
           summary="Saved sessions", console="List saved sessions", key="f2"),
    Action("export", "Export conversation", "Save this session as Markdown in the current folder",
           Command.EXPORT, takes_argument=True, summary="Save this conversation (md, json or a file)",
           console="Save this conversation as Markdown (/export json, or /export FILE)",
           argument="md or json"),
    Action("forget", "Forget a memory", "Find a memory by its text, confirm, delete it", Command.FORGET,
           takes_argument=True, summary="Forget a memory: /forget TEXT (asks first)",
           elsewhere="d in the panel"),
    Action("help", "Help", "Show commands and keys", Command.HELP, summary="Show commands and keys",
           console="Show the commands", key="f1", footer="Help"),
    Action("quit", "Quit", "Quit the application", Command.EXIT, aliases=("/quit", "/bye"), summary="Quit",
           console="End the conversation", key="ctrl+q", footer="Quit", priority=True, in_dialogs=True,
           builtin_palette=True),
    Action("stop", "Stop the answer", "Stop the answer being written", key="escape", footer="Stop",
           while_saving=False),
    Action("toggle_tool_panels", "Tool panels", "Open or fold every tool-call panel", key="ctrl+o",
           footer="Tools"),
    Action("copy_message", "Copy message", "Copy the selected or the last answer", key="ctrl+y",
           footer="Copy", priority=True),
    Action("refresh_memories", "Refresh memories", "Read the memories again", elsewhere="f5 in the panel",
           in_dialogs=True),
    Action("reconnect", "Reconnect", "Open the memory backend again", in_dialogs=True),
)  # fmt: skip

#: Slash commands and aliases → their action.
_BY_NAME = {name: a for a in ACTIONS if a.command for name in (a.name, *a.aliases)}
_BY_COMMAND = {a.command: a for a in ACTIONS if a.command}


def slash_commands() -> list[Action]:
    """The actions with a slash command, in /help order."""
    return [a for a in ACTIONS if a.command is not None]


def action_for(command: Command) -> Action | None:
    return _BY_COMMAND.get(command)


@dataclass(frozen=True)
class Parsed:
    kind: Command
    #: The message to send (for MESSAGE and MEMORY), the command's argument (EXPORT, FORGET),
    #: or the unknown command.
    text: str = ""

    @property
    def action(self) -> Action | None:
        """The registry's entry for a slash command (None for a message, nothing, or an unknown command)."""
        return action_for(self.kind)


def parse_command(line: str) -> Parsed:
    """Commands are case-insensitive and trimmed; anything else is a message."""
    text = line.strip()
    if not text:
        return Parsed(Command.EMPTY)
    if not text.startswith("/"):
        return Parsed(Command.MESSAGE, text)
    word = text.split()[0].lower()
    action = _BY_NAME.get(word)
    if action is not None and action.command is not None:
        if action.command is Command.MEMORY:
            return Parsed(Command.MEMORY, MEMORY_PROMPT)
        if action.takes_argument:
            return Parsed(action.command, text[len(word) :].strip())
        return Parsed(action.command)
    # "/usr/bin is slow" is a message, not a command: only single-word /names are commands.
    if "/" in word[1:] or len(text.split()) > 1:
        return Parsed(Command.MESSAGE, text)
    return Parsed(Command.UNKNOWN, word)


def complete_command(text: str) -> str:
    """The rest of the slash command ``text`` starts (``/ne`` → ``w``), or ""."""
    if not text.startswith("/") or any(c.isspace() for c in text):
        return ""
    typed = text.lower()
    for action in slash_commands():
        if action.name.startswith(typed) and action.name != typed:
            return action.name[len(typed) :]
    return ""


def matching_commands(text: str) -> list[tuple[str, str]]:
    """Commands (name, summary) matching what is typed, for the hint line."""
    if not text.startswith("/") or any(c.isspace() for c in text.strip()):
        return []
    typed = text.strip().lower()
    return [(a.name, a.summary) for a in slash_commands() if a.name.startswith(typed)]


def console_help() -> list[str]:
    """The console's /help (and banner) lines: the reference's list."""
    listed = [a for a in slash_commands() if a.console]
    return ["💡 Special commands:", *(f"   {a.name:<9} - {a.console}" for a in listed)]
