"""The arguments of the six memory tools, each declared once.

Every field names its spec (``specs.py``): the JSON schema the model sees and
the checking of what it sends both come from these classes. Field order is
the order of the schema's properties and of the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import Metadata
from ..timeparse import parse_flexible_time
from .specs import Count, Flag, Kind, MemoryId, MemoryText, Note, Text, Texts, ToolArguments

DEFAULT_LOAD_LIMIT = 10
MAX_LOAD_LIMIT = 100

_FOUND_BY = "as returned by memory_search or memory_load."

TOPICS = Texts(
    "Optional short topic tags for categorizing the memory, e.g. ['food', 'travel'].",
    example='["food", "travel"]',
)
MEMORY_KIND = Kind(
    "'fact' for stable personal attributes, 'episode' for a specific event. Defaults to 'fact'."
)
EVENT_TIME = Text(
    "When the event happened, as an absolute ISO 8601 date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS). "
    "Required for episodes. Never use relative words like 'yesterday'; convert them to a date first.",
    hint=' such as "2024-05-07"',
)
PARTICIPANTS = Texts(
    "People involved in the event, e.g. ['Alice', 'Bob']. Used for episodes.", example='["Alice", "Bob"]'
)
LOCATION = Text("Where the event took place. Used for episodes.")


@dataclass(repr=False, eq=False)
class AddArguments(ToolArguments):
    memory: str = field(
        metadata=MemoryText(
            "The memory to store: a concise third-person fact or episode about the user, "
            "e.g. 'Alice moved to Berlin in March 2024'."
        ).metadata
    )
    topics: list[str] | None = field(metadata=TOPICS.metadata)
    memory_kind: str = field(metadata=MEMORY_KIND.metadata)
    event_time: str = field(metadata=EVENT_TIME.metadata)
    participants: list[str] | None = field(metadata=PARTICIPANTS.metadata)
    location: str = field(metadata=LOCATION.metadata)

    def metadata(self) -> Metadata | None:
        """Episodic metadata, or None when none is given. An unparsable event_time is dropped."""
        participants = self.participants
        if not (self.memory_kind or self.event_time.strip() or participants or self.location.strip()):
            return None
        metadata = Metadata(
            kind=self.memory_kind,
            event_time=parse_flexible_time(self.event_time),
            participants=tuple(participants) if participants else None,
            location=self.location,
        )
        return None if metadata.is_empty() else metadata


@dataclass(repr=False, eq=False)
class UpdateArguments(AddArguments):
    """memory_add's arguments with the id of the memory to replace (named first:
    a ``MemoryId`` leads the schema and the checks)."""

    memory_id: str = field(metadata=MemoryId(f"The id of the memory to update, {_FOUND_BY}").metadata)
    memory: str = field(
        metadata=MemoryText("The rewritten memory text that replaces the stored one.").metadata
    )


@dataclass(repr=False, eq=False)
class DeleteArguments(ToolArguments):
    memory_id: str = field(metadata=MemoryId(f"The id of the memory to delete, {_FOUND_BY}").metadata)


@dataclass(repr=False, eq=False)
class ClearArguments(ToolArguments):
    reason: Any = field(metadata=Note("Optional reason for clearing all memories.").metadata)


_ALWAYS_MATCH = "Memories without an event_time always match."


@dataclass(repr=False, eq=False)
class SearchArguments(ToolArguments):
    # Required in the schema, yet a missing or blank query just finds nothing.
    query: str = field(
        metadata=Text(
            "Short keyword query, e.g. 'Alice hiking trip'.",
            required=True,
            limit=None,
            hint=" with a few keywords",
        ).metadata
    )
    kind: str = field(
        metadata=Kind("Preferred memory kind; a soft filter with fallback. Omit when unsure.").metadata
    )
    time_after: str = field(
        metadata=Text(
            "Only episodes with event_time on or after this date (YYYY-MM-DD, YYYY-MM or YYYY). "
            + _ALWAYS_MATCH,
            hint=' such as "2024-05-01"',
        ).metadata
    )
    time_before: str = field(
        metadata=Text(
            "Only episodes with event_time on or before the end of this date, month or year "
            f"(YYYY-MM-DD, YYYY-MM or YYYY). {_ALWAYS_MATCH}",
            hint=' such as "2024-05-31"',
        ).metadata
    )
    order_by_event_time: bool = field(
        metadata=Flag(
            "Break relevance ties by event_time, oldest first. Useful for 'what happened "
            "first/next' questions."
        ).metadata
    )


@dataclass(repr=False, eq=False)
class LoadArguments(ToolArguments):
    limit: int = field(
        metadata=Count(
            "How many memories to load", default=DEFAULT_LOAD_LIMIT, maximum=MAX_LOAD_LIMIT
        ).metadata
    )
