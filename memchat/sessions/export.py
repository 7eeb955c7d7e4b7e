"""A saved conversation as Markdown (to read or share) or JSON (complete, to
process or archive): ``/export`` in the chat and ``memchat sessions export``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .model import SessionInfo, SessionRecord

#: Identifies the JSON export's layout.
JSON_FORMAT = "memchat-session/1"
FORMATS = ("markdown", "json")


def to_json(info: SessionInfo, records: Sequence[SessionRecord]) -> str:
    document = {"format": JSON_FORMAT, "session": info.to_dict(), "records": [r.to_dict() for r in records]}
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def _fence(text: str, language: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text}\n{ticks}"


def _pretty(text: str) -> tuple[str, str]:
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, indent=2), "json"
    except (TypeError, ValueError):
        return text, ""


def _titled_block(heading: str, text: str) -> list[str]:
    """A tool call's or result's lines: ``heading``, then ``text`` in a code
    block (laid out as JSON when it is JSON), each followed by a blank line."""
    body, language = _pretty(text)
    return [heading, "", _fence(body, language), ""]


def _stats_line(data: dict[str, Any]) -> str:
    parts = []
    if data.get("model"):
        parts.append(f"model {data['model']}")
    if data.get("elapsed") is not None:
        parts.append(f"{float(data['elapsed']):.2f} s")
    if data.get("tokens_per_second"):
        parts.append(f"{float(data['tokens_per_second']):.0f} tok/s")
    if data.get("tool_calls"):
        parts.append(f"{data['tool_calls']} tool call{'s' if data['tool_calls'] != 1 else ''}")
    return " · ".join(parts)


def to_markdown(info: SessionInfo, records: Sequence[SessionRecord]) -> str:
    lines = [
        f"# {info.title or info.id}",
        "",
        f"- Session: `{info.id}`",
        f"- Started: {info.created_at.astimezone().strftime('%Y-%m-%d %H:%M')}, "
        f"last message: {info.updated_at.astimezone().strftime('%Y-%m-%d %H:%M')}",
        f"- Model: {info.model or '?'} · Memory backend: {info.backend or '?'} · "
        f"{info.message_count} messages",
        "",
    ]
    calls: dict[str, dict[str, Any]] = {}
    answering = False  # the "## Assistant" heading of this turn is written
    for record in records:
        data = record.data
        if record.kind == "stats":
            line = _stats_line(data)
            if line:
                lines += [f"*{line}*", ""]
            continue
        if record.kind == "error":
            lines += [f"> ❌ {data.get('message', '')}", ""]
            continue
        role = data.get("role")
        if role == "user":
            lines += ["## You", "", str(data.get("content") or ""), ""]
            answering = False
        elif role == "assistant":
            if not answering and (data.get("content") or data.get("tool_calls")):
                lines += ["## Assistant", ""]
                answering = True
            for call in data.get("tool_calls") or ():
                function = call.get("function") or {}
                calls[str(call.get("id"))] = function
                heading = f"🔧 **{function.get('name', '?')}** (`{call.get('id')}`)"
                lines += _titled_block(heading, str(function.get("arguments") or "{}"))
            if data.get("content"):
                lines += [str(data["content"]), ""]
        elif role == "tool":
            mark = "❌" if record.meta.get("is_error") else "✅"
            name = record.meta.get("name") or calls.get(str(data.get("tool_call_id")), {}).get("name", "tool")
            heading = f"{mark} {name} result (`{data.get('tool_call_id')}`)"
            lines += _titled_block(heading, str(data.get("content") or ""))
    return "\n".join(lines).rstrip() + "\n"


def export(info: SessionInfo, records: Sequence[SessionRecord], fmt: str) -> str:
    return to_json(info, records) if fmt == "json" else to_markdown(info, records)


def format_for(path: str, given: str | None = None) -> str:
    """The export format named by ``given`` or by the file's extension (Markdown by default)."""
    if given:
        name = given.strip().lower()
        aliases = {"md": "markdown", "markdown": "markdown", "json": "json"}
        if name not in aliases:
            from memchat.engine.model import ConfigError

            raise ConfigError(f"unknown export format {given!r}: choose markdown (md) or json")
        return aliases[name]
    return "json" if path.lower().endswith(".json") else "markdown"
