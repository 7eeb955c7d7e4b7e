"""Saved sessions as lines of text, for the console (``/sessions``,
``/export``, ``--resume``) and ``memchat sessions …``. Everything a model or a
person wrote goes through ``one_line`` / ``printable``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .safe_text import one_line, printable
from .sessions.model import SessionInfo, SessionRecord

if TYPE_CHECKING:
    from .agent.runner import Runner
    from .agent.sessions import Resumed

#: Messages of a resumed session the console prints again.
RESUMED_SHOWN = 10


def when(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def session_row(info: SessionInfo, current: str = "") -> str:
    mark = "▶" if info.id == current else " "
    count = f"{info.message_count} message{'s' if info.message_count != 1 else ''}"
    return f"{mark} {info.id}  {when(info.updated_at)}  {count:>12}  {one_line(info.title)}"


async def session_lines(runner: Runner, query: str = "") -> list[str]:
    """``/sessions`` in the console: every saved session, the current one marked."""
    from .agent.sessions import recorder_of

    recorder = recorder_of(runner)
    if recorder is None:
        return ["📂 This chat does not save sessions."]
    await recorder.flush()
    sessions = await recorder.store.list(recorder.key, query=query)
    if not sessions:
        return ["📂 No saved sessions yet."]
    return [
        f"📂 Saved sessions ({len(sessions)}), most recent first — continue one with memchat --session ID:",
        *(session_row(info, runner.session_id) for info in sessions),
    ]


def conversation_lines(records: Sequence[SessionRecord], limit: int = 0) -> list[str]:
    """The user's messages, tool calls and answers, one block each."""
    lines: list[str] = []
    for record in records:
        data = record.data
        if record.kind == "error":
            lines.append(f"❌ Error: {printable(str(data.get('message', '')))}")
        elif record.role == "user":
            lines.append(f"👤 You: {printable(str(data.get('content') or ''))}")
        elif record.role == "assistant":
            if data.get("content"):
                lines.append(f"🤖 Assistant: {printable(str(data['content']))}")
            for call in data.get("tool_calls") or ():
                function = call.get("function") or {}
                name, arguments = str(function.get("name", "?")), str(function.get("arguments", ""))
                lines.append(f"🔧 {one_line(name)} {one_line(arguments)}")
        elif record.role == "tool":
            mark = "❌" if record.meta.get("is_error") else "✅"
            lines.append(f"{mark} {one_line(str(data.get('content') or ''))[:200]}")
    return lines[-limit:] if limit > 0 else lines


def resumed_lines(resumed: Resumed) -> list[str]:
    info = resumed.info
    lines = [
        f"↩️  Continuing session {info.id}: {one_line(info.title)} "
        f"({info.message_count} messages, last {when(info.updated_at)})"
    ]
    if resumed.trimmed:
        lines.append(
            f"   (the model is given the newest {resumed.sent} of {resumed.total} messages: "
            "the rest do not fit its context)"
        )
    shown = conversation_lines(resumed.records, RESUMED_SHOWN)
    if shown:
        lines += ["", *shown]
    return lines


async def export_current(runner: Runner, argument: str, folder: Path | None = None) -> str:
    """``/export [md|json|FILE]``: write the current session; the line saying where."""
    from .agent.sessions import current_session
    from .sessions.export import export, format_for

    saved = await current_session(runner)
    if saved is None:
        return "📭 Nothing to export yet: this session has no messages."
    info, records = saved
    argument = argument.strip()
    if argument.lower() in ("md", "markdown", "json"):
        fmt = format_for("", argument)
        path = (folder or Path.cwd()) / f"{info.id}.{'json' if fmt == 'json' else 'md'}"
    elif argument:
        path = (folder or Path.cwd()) / Path(argument).expanduser()
        fmt = format_for(str(path))
    else:
        fmt, path = "markdown", (folder or Path.cwd()) / f"{info.id}.md"
    try:
        path.write_text(export(info, records, fmt), encoding="utf-8")
    except OSError as exc:
        return f"❌ Cannot write {printable(str(path))}: {exc.strerror or exc}; give another file name"
    return f"💾 Exported {info.id} ({info.message_count} messages) to {printable(str(path))}"
