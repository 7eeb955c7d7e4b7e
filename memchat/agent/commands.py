"""Slash commands, parsed the same way by the console and the TUI."""

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


#: name → what it does, in the order /help lists them.
COMMANDS = {
    "/memory": "Show user memories",
    "/new": "Start a new session (memories are kept)",
    "/stream": "Toggle streaming output",
    "/sessions": "List saved sessions",
    "/export": "Save this conversation as Markdown (/export json, or /export FILE)",
    "/help": "Show the commands",
    "/exit": "End the conversation",
}


#: Commands beyond the reference's, listed by the TUI's /help (the console's
#: /help prints the reference's list as it is).
EXTRA_COMMANDS = {
    "/forget": "Forget a memory: /forget TEXT finds it, asks, then deletes it",
}


@dataclass(frozen=True)
class Parsed:
    kind: Command
    #: The message to send (for MESSAGE and MEMORY), what to forget (FORGET), or the unknown command.
    text: str = ""


def parse_command(line: str) -> Parsed:
    """Commands are case-insensitive and trimmed; anything else is a message."""
    text = line.strip()
    if not text:
        return Parsed(Command.EMPTY)
    if not text.startswith("/"):
        return Parsed(Command.MESSAGE, text)
    word = text.split()[0].lower()
    if word == "/memory":
        return Parsed(Command.MEMORY, MEMORY_PROMPT)
    if word in (Command.EXPORT.value, Command.FORGET.value):
        # The commands with an argument: a format (md, json) or a file name; what to forget.
        return Parsed(Command(word), text[len(word) :].strip())
    for kind in (Command.EXIT, Command.NEW, Command.HELP, Command.STREAM, Command.SESSIONS):
        if word == kind.value:
            return Parsed(kind)
    if word in ("/quit", "/bye"):
        return Parsed(Command.EXIT)
    # "/usr/bin is slow" is a message, not a command: only single-word /names are commands.
    if "/" in word[1:] or len(text.split()) > 1:
        return Parsed(Command.MESSAGE, text)
    return Parsed(Command.UNKNOWN, word)
