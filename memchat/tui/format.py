"""Pure formatting helpers shared by the widgets (no Textual imports)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memchat.agent.events import TurnStats

#: Braille spinner frames, as used by many terminal tools.
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def duration(seconds: float) -> str:
    """``<1 ms``, ``4 ms``, ``0.25 s``, ``12.3 s``."""
    if seconds < 0.0005:
        return "<1 ms"
    if seconds < 0.1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    return f"{seconds:.1f} s"


def stats_line(stats: TurnStats) -> str:
    """The line under each answer: time to first token, rate, tool time, total."""
    parts: list[str] = []
    if not stats.streamed:  # the answer came whole: how long the model took, no rate
        parts.append(f"answer {duration(stats.model_time)} (not streamed)")
    if stats.time_to_first_token is not None:
        parts.append(f"first token {duration(stats.time_to_first_token)}")
    if stats.tokens_per_second:
        parts.append(f"{stats.tokens_per_second:.0f} tok/s")
    if stats.completion_tokens:
        parts.append(f"{stats.completion_tokens} tokens")
    if stats.tool_calls:
        parts.append(f"tools {duration(stats.tool_time)}")
    parts.append(f"total {duration(stats.elapsed)}")
    return " · ".join(parts)


def pretty_json(text: str, width: int = 72) -> tuple[str, bool]:
    """Readable JSON, and whether ``text`` was valid JSON (else it is returned
    as is): one line when it fits in ``width``, else one member per line with
    short values kept on their line."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return text, False
    return _layout(value, width, 0), True


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _layout(value: object, width: int, indent: int) -> str:
    flat = _compact(value)
    if len(flat) + indent <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [
            f"{pad}{json.dumps(k, ensure_ascii=False)}: {_layout(v, width, indent + 2)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + _layout(v, width, indent + 2) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def when(moment: datetime | None, now: datetime) -> str:
    """A compact local time: ``14:05`` today, ``2025-03-01 14:05`` otherwise."""
    if moment is None:
        return "—"
    local = moment.astimezone()
    if local.date() == now.astimezone().date():
        return local.strftime("%H:%M")
    return local.strftime("%Y-%m-%d %H:%M")


def full_time(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def truncate_lines(text: str, max_lines: int, max_chars: int) -> tuple[str, int]:
    """The first ``max_lines`` lines (and at most ``max_chars`` characters) of
    ``text``, and how many lines were left out."""
    lines = text.splitlines()
    kept: list[str] = []
    size = 0
    for line in lines:
        if len(kept) >= max_lines or size + len(line) > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    if not kept and lines:  # one enormous line
        kept = [lines[0][:max_chars] + "…"]
    return "\n".join(kept), len(lines) - len(kept)


#: A memory ID (sha256 hex) or any other long hex run: shortened when shown.
_LONG_HEX = re.compile(r"\b[0-9a-f]{16,}\b")
#: Characters of an ID kept when it is shortened (as ``memchat memory list`` prints
#: them, and a prefix ``memchat memory delete`` accepts).
SHORT_ID = 12


def shorten_ids(text: str) -> str:
    """``3f2a…`` for each 64-character memory ID (the panel's details show the
    memory; the full ID stays in the model's history and the memory panel)."""
    return _LONG_HEX.sub(lambda m: m.group()[:SHORT_ID] + "…", text)


def clip(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters (an ellipsis marks the cut)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def short_arguments(arguments: str, width: int = 48) -> str:
    """A tool call's arguments in one short line: ``memory="User likes Go", topics=[…]``."""
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return clip(shorten_ids(arguments), width)
    if not isinstance(value, dict):
        return clip(shorten_ids(_compact(value)), width)
    parts = []
    for name, item in value.items():
        shown = _compact(item)
        if isinstance(item, list) and len(shown) > 24:
            shown = f"[{len(item)} items]"
        parts.append(f"{name}={shown}")
    return clip(shorten_ids(", ".join(parts)), width)


def short_result(content: str, is_error: bool, width: int = 48) -> str:
    """What a tool returned, in one short line: its message, a count, or the text."""
    try:
        value = json.loads(content)
    except (TypeError, ValueError):
        value = None
    if isinstance(value, dict):
        if "error" in value and isinstance(value["error"], str):
            return clip(value["error"], width)
        if isinstance(value.get("message"), str):
            text = value["message"]
            if isinstance(value.get("memory_id"), str):
                text += f" ({shorten_ids(value['memory_id'])})"
            return clip(text, width)
        if isinstance(value.get("results"), list):
            results = value["results"]
            count = len(results)
            first = results[0].get("memory") if results and isinstance(results[0], dict) else None
            text = f"{count} result{'s' if count != 1 else ''}"
            if isinstance(first, str):
                text += f": {first}" + (" …" if count > 1 else "")
            return clip(text, width)
    return clip(shorten_ids(content if value is None else _compact(value)), width)
