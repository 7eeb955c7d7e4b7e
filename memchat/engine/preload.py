"""Memories merged into the system prompt before a turn (reference §7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .model import Entry, SearchOptions, UserKey

if TYPE_CHECKING:
    from .service import MemoryService

BEGIN_MARKER = "========= PRELOADED_USER_MEMORIES BEGINS ========="
END_MARKER = "========= PRELOADED_USER_MEMORIES ENDS ========="

DEFAULT_PLAYBOOK = """## Memory

Decision boundary: use memory unless the request is clearly self-contained. If unsure, do a quick
memory pass rather than asking the user again.

Quick memory pass:
1. Start from the preloaded memories below.
2. Use memory_search (if available) with a focused query for more detail.
3. Use memory_load only when you need more than the preloaded set.
4. For the exact wording of a past conversation, rely on the session history, not memory.
5. Stop once you have found the memory you need.

Verification:
- Memories are helpful but may be stale; verify cheaply when it matters.
- Say when an answer comes from stored memory."""

ENTRIES_INTRO = (
    "The following are stored memories about the user. Use these to answer questions. "
    "Episodic memories include event details (time, participants, location)."
)


def format_entry_line(entry: Entry) -> str:
    """``- [id] text (kind=…; date=…; with=…; at=…)``; topics are deliberately left out."""
    m = entry.memory
    parts = [f"kind={m.kind or 'fact'}"]
    if m.event_time is not None:
        parts.append(f"date={m.event_time.strftime('%Y-%m-%d')}")
    if m.participants:
        parts.append("with=" + ", ".join(m.participants))
    if m.location:
        parts.append(f"at={m.location}")
    return f"- [{entry.id}] {m.text} ({'; '.join(parts)})"


def build_preload_block(entries: Sequence[Entry | None], playbook: str = "") -> str:
    """The block merged into the system message; empty when there is nothing to show."""
    lines = [format_entry_line(e) for e in entries if e is not None and e.memory is not None]
    if not lines:
        return ""
    body = f"## User Memories\n\n{ENTRIES_INTRO}\n\n" + "\n".join(lines)
    sections = [(playbook.strip() or DEFAULT_PLAYBOOK), BEGIN_MARKER, body.strip(), END_MARKER]
    return "\n\n".join(s.strip() for s in sections)


async def select_preload(service: MemoryService, key: UserKey, budget: int, query: str) -> list[Entry]:
    """Which memories to preload: ``0`` none, ``< 0`` all, ``N`` an adaptive
    budget (all if they fit, else the N most relevant to ``query``, ranked by
    ``service.search`` in the service's default mode, like every other caller)."""
    if budget == 0:
        return []
    if budget < 0:
        return await service.read(key)
    probe = await service.read(key, budget + 1)
    if len(probe) <= budget:
        return probe
    query = query.strip()
    if query:
        try:
            hits = await service.search(key, query, SearchOptions(max_results=budget, deduplicate=True))
        except Exception:  # a failed search falls back to the newest memories (reference §7.1)
            hits = []
        if hits:
            return hits
    return probe[:budget]


def merge_into_system(messages: list[dict], block: str) -> list[dict]:
    """Merge ``block`` into the first system message (or prepend one), so the
    request keeps a single system message."""
    if not block:
        return messages
    merged = [dict(m) for m in messages]
    for message in merged:
        if message.get("role") == "system":
            content = (message.get("content") or "").strip()
            message["content"] = f"{content}\n\n{block}" if content else block
            return merged
    return [{"role": "system", "content": block}, *merged]
