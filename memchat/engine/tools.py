"""The six agent-facing memory tools and the rules that pick which to expose.

Port of the reference's ``memory/tool`` package and of ``Tools()`` (reference
§3). Every tool is an OpenAI-style function tool with a hand-written JSON
schema. A tool never raises: ``Tool.run`` turns malformed arguments, service
errors and unexpected backend exceptions alike into a JSON
``{"error": "..."}`` result with ``is_error=True``, so the model can read what
went wrong and try again.

The (app, user) scope comes only from the ``key`` the caller passes (the
session of the conversation); ``app_name``/``user_id`` fields inside the
model's arguments are ignored.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .jsonsafe import DEFAULT_MAX_DEPTH, JSONInputError, load_json
from .model import (
    KIND_EPISODE,
    KIND_FACT,
    ConfigError,
    Entry,
    InvalidKeyError,
    MemchatError,
    Metadata,
    SearchOptions,
    UserKey,
)
from .timeparse import end_of_period, format_rfc3339, parse_flexible_time

__all__ = [
    "ADD",
    "ALL_TOOLS",
    "CLEAR",
    "DELETE",
    "LOAD",
    "SEARCH",
    "UPDATE",
    "Tool",
    "ToolError",
    "ToolResult",
    "ToolSettings",
    "build_tools",
    "enabled_tool_names",
    "new_add_tool",
    "new_clear_tool",
    "new_delete_tool",
    "new_load_tool",
    "new_search_tool",
    "new_update_tool",
    "select_tool_names",
    "unknown_tool_result",
]

log = logging.getLogger(__name__)

ADD = "memory_add"
UPDATE = "memory_update"
DELETE = "memory_delete"
CLEAR = "memory_clear"
SEARCH = "memory_search"
LOAD = "memory_load"

#: All tool names, sorted (the order ``Tools()`` returns them in).
ALL_TOOLS: tuple[str, ...] = tuple(sorted((ADD, UPDATE, DELETE, CLEAR, SEARCH, LOAD)))

#: Enabled by default without an extractor (agentic mode), reference §3.5.
AGENTIC_DEFAULT_ENABLED = frozenset({ADD, UPDATE, SEARCH, LOAD})
#: Enabled by default with an extractor (auto mode): what the extractor may use.
AUTO_DEFAULT_ENABLED = frozenset({ADD, UPDATE, DELETE, SEARCH})
#: In auto mode only these are shown to the agent unless explicitly exposed.
AUTO_DEFAULT_EXPOSED = frozenset({SEARCH, LOAD})

KINDS = (KIND_FACT, KIND_EPISODE)
DEFAULT_LOAD_LIMIT = 10
MAX_LOAD_LIMIT = 100
#: Used when the service does not say how long a memory may be.
DEFAULT_MAX_TEXT_LENGTH = 10_000
MAX_ID_LENGTH = 255
MAX_LIST_ITEMS = 50
MAX_ITEM_LENGTH = 100
MAX_FIELD_LENGTH = 1_000

# -- descriptions ------------------------------------------------------------

_SCOPE = "It only sees and changes the memories of the current user in this app."
_READ = (
    "When the user's request may depend on something remembered about them, "
    "call it directly; do not ask for permission first."
)
_WRITE = (
    "When the user clearly asks you to remember, correct or forget something, "
    "do it right away without asking for confirmation."
)
_CAPTURE = (
    "Store concise, self-contained facts that will save asking the user again: preferences, "
    "background, relationships, plans and important events. Do not store guesses, duplicates of "
    "existing memories, small talk or trivia, or sensitive data (passwords, financial, health "
    "details) unless the user explicitly asks."
)
_DESTRUCTIVE = "Destructive: use it only when the user explicitly asks to remove or reset memory."

_ADD_DESCRIPTION = " ".join(
    [
        "Add a durable memory about the user, written as a brief third-person statement "
        "(e.g. 'Alice is allergic to peanuts').",
        "Use memory_kind 'fact' for stable attributes and 'episode' for something that happened "
        "at a specific time, with an absolute event_time and, when known, participants and location.",
        "If a stored memory already covers this, use memory_update instead of adding a near-duplicate.",
        _SCOPE,
        _WRITE,
        _CAPTURE,
    ]
)
_UPDATE_DESCRIPTION = " ".join(
    [
        "Update an existing memory: replace its text (and topics) with a corrected or refined version.",
        "Find the memory_id first with memory_search or memory_load.",
        "Prefer this over adding a new memory when new information corrects or refines a stored one.",
        "Topics are replaced, not merged: send the full list you want to keep.",
        "The memory's id may change after an update; use the memory_id returned in the response.",
        _SCOPE,
        _WRITE,
    ]
)
_DELETE_DESCRIPTION = " ".join(
    [
        "Delete one memory by its memory_id (find it with memory_search or memory_load).",
        "Use it for memories that are wrong, obsolete or that the user withdraws; "
        "prefer memory_update when the memory should stay but needs correcting.",
        _SCOPE,
        _WRITE,
        _DESTRUCTIVE,
    ]
)
_CLEAR_DESCRIPTION = " ".join(
    [
        "Delete all memories of the user.",
        "Use it only when the user asks to forget everything or to reset their memory.",
        _SCOPE,
        _DESTRUCTIVE,
    ]
)
_SEARCH_DESCRIPTION = " ".join(
    [
        "Search the memories about the user.",
        "Returns memories ranked by relevance, each with id, memory text, topics, kind (fact/episode), "
        "event_time, participants, location and a relevance score (higher is more relevant).",
        "Use short keyword queries (e.g. 'Alice hiking trip' rather than 'When did Alice go hiking?').",
        "For a multi-part question, search for each part separately and combine the results.",
        "Check participants to make sure a memory is about the right person.",
        "For time questions ('when did X happen', 'what did the user do in May 2023'), use "
        "time_after/time_before and consider order_by_event_time=true.",
        "kind is only a soft preference with automatic fallback to the other kind; omit it when unsure.",
        _SCOPE,
        _READ,
    ]
)
_LOAD_DESCRIPTION = " ".join(
    [
        "Load the most recently updated memories about the user, newest first, for a broad overview.",
        "Each includes id, text, topics, kind (fact/episode), event_time, participants and location.",
        "Use memory_search instead when looking for something specific.",
        _SCOPE,
        _READ,
    ]
)

# -- schemas -----------------------------------------------------------------


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _strings(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _kind(description: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(KINDS), "description": description}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _metadata_properties(episode_hint: str) -> dict[str, Any]:
    return {
        "topics": _strings("Optional short topic tags for categorizing the memory, e.g. ['food', 'travel']."),
        "memory_kind": _kind(
            "'fact' for stable personal attributes, 'episode' for a specific event. Defaults to 'fact'."
        ),
        "event_time": _string(
            "When the event happened, as an absolute ISO 8601 date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS). "
            + episode_hint
            + " Never use relative words like 'yesterday'; convert them to a date first."
        ),
        "participants": _strings("People involved in the event, e.g. ['Alice', 'Bob']. Used for episodes."),
        "location": _string("Where the event took place. Used for episodes."),
    }


_ADD_PARAMETERS = _object(
    {
        "memory": _string(
            "The memory to store: a concise third-person fact or episode about the user, "
            "e.g. 'Alice moved to Berlin in March 2024'."
        ),
        **_metadata_properties("Required for episodes."),
    },
    ["memory"],
)
_UPDATE_PARAMETERS = _object(
    {
        "memory_id": _string("The id of the memory to update, as returned by memory_search or memory_load."),
        "memory": _string("The rewritten memory text that replaces the stored one."),
        **_metadata_properties("Required for episodes."),
    },
    ["memory_id", "memory"],
)
_DELETE_PARAMETERS = _object(
    {"memory_id": _string("The id of the memory to delete, as returned by memory_search or memory_load.")},
    ["memory_id"],
)
_CLEAR_PARAMETERS = _object({"reason": _string("Optional reason for clearing all memories.")}, [])
_SEARCH_PARAMETERS = _object(
    {
        "query": _string("Short keyword query, e.g. 'Alice hiking trip'."),
        "kind": _kind("Preferred memory kind; a soft filter with fallback. Omit when unsure."),
        "time_after": _string(
            "Only episodes with event_time on or after this date (YYYY-MM-DD, YYYY-MM or YYYY). "
            "Memories without an event_time always match."
        ),
        "time_before": _string(
            "Only episodes with event_time on or before the end of this date, month or year "
            "(YYYY-MM-DD, YYYY-MM or YYYY). Memories without an event_time always match."
        ),
        "order_by_event_time": {
            "type": "boolean",
            "description": "Break relevance ties by event_time, oldest first. Useful for 'what happened "
            "first/next' questions.",
        },
    },
    ["query"],
)
_LOAD_PARAMETERS = _object(
    {
        "limit": {
            "type": "integer",
            "description": f"How many memories to load (default {DEFAULT_LOAD_LIMIT}, "
            f"at most {MAX_LOAD_LIMIT}).",
        }
    },
    [],
)

# -- results -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returns to the model: JSON text, and whether it is an error."""

    content: str
    is_error: bool = False


class ToolError(Exception):
    """Raised by a tool handler; its message is the sentence shown to the model."""


def _dumps(value: Any) -> str:
    """Compact JSON like Go's encoding/json (but without HTML escaping).

    The result is always encodable as UTF-8: should a value hold a lone
    surrogate (a custom service echoing what the model sent), it is written as
    a JSON escape instead of breaking whoever sends the result on."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text


def _error_result(message: str) -> ToolResult:
    return ToolResult(_dumps({"error": message}), is_error=True)


def unknown_tool_result(name: str, available: Iterable[str]) -> ToolResult:
    """What a call of a tool that is not offered gets, in the chat and over MCP alike."""
    names = ", ".join(available) or "none"
    return _error_result(f"unknown tool {name}; available tools: {names}")


Handler = Callable[[dict[str, Any], UserKey], Awaitable[Any]]


class Tool:
    """One function tool: name, description, JSON-schema parameters and a handler.

    ``handler(args, key)`` receives the arguments already parsed into a dict
    and the caller's scope. It returns a JSON-serialisable value (or a
    string, used as is) and may raise ``ToolError`` with a message for the
    model; any other exception is reported as an unexpected failure.
    """

    def __init__(self, name: str, description: str, parameters: Mapping[str, Any], handler: Handler) -> None:
        self.name = name
        self.description = description
        self.parameters = dict(parameters)
        self._handler = handler

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI chat-completions function-tool declaration."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    async def run(self, arguments: str | bytes | Mapping[str, Any] | None, key: UserKey) -> ToolResult:
        """Execute the tool for ``key``. Never raises (except on task cancellation)."""
        try:
            args = parse_arguments(self.name, arguments)
            value = await self._handler(args, key)
            return ToolResult(value if isinstance(value, str) else _dumps(value), is_error=False)
        except ToolError as exc:
            log.info("%s rejected a call: %s", self.name, exc)
            return _error_result(str(exc))
        except Exception as exc:
            log.warning("%s failed unexpectedly", self.name, exc_info=True)
            return _error_result(f"{self.name} failed unexpectedly: {_describe(exc)}")

    async def call(self, arguments: str | bytes | Mapping[str, Any] | None, key: UserKey) -> str:
        """``run`` returning only the content string."""
        return (await self.run(arguments, key)).content


# -- argument parsing --------------------------------------------------------


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


#: Tool arguments larger than this are refused before parsing: a memory is at
#: most 10 000 characters (at most 40 000 bytes of UTF-8, 60 000 as JSON
#: escapes), so 1 MiB leaves ample room for any legitimate call while keeping
#: parsing cheap.
MAX_ARGUMENTS_BYTES = 1 << 20
#: Valid arguments nest 2 levels deep (an object holding arrays).
MAX_ARGUMENTS_DEPTH = DEFAULT_MAX_DEPTH


def parse_arguments(tool: str, arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    """The model's arguments as a dict. ``None`` and ``""`` mean no arguments.

    Text is parsed by the bounded loader (size, nesting depth, number length);
    any problem is a ``ToolError`` saying what is wrong, never another exception."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not isinstance(arguments, (str, bytes, bytearray)):
        raise ToolError(f"invalid arguments for {tool}: expected a JSON object, got {_json_type(arguments)}")
    if isinstance(arguments, str) and not arguments.strip():
        return {}
    try:
        value = load_json(arguments, max_bytes=MAX_ARGUMENTS_BYTES, max_depth=MAX_ARGUMENTS_DEPTH)
    except JSONInputError as exc:
        raise ToolError(
            f"invalid arguments for {tool}: arguments are not valid JSON ({exc.reason}); "
            "send a single JSON object with the documented parameters"
        ) from exc
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolError(
            f"invalid arguments for {tool}: expected a JSON object with the documented parameters, "
            f"got {_json_type(value)}"
        )
    return value


def _invalid(tool: str, message: str) -> ToolError:
    return ToolError(f"invalid arguments for {tool}: {message}")


def _too_long(tool: str, name: str, length: int, limit: int) -> ToolError:
    return _invalid(tool, f'"{name}" is too long ({length} characters, limit {limit})')


def _opt_str(
    args: Mapping[str, Any], name: str, tool: str, limit: int = MAX_FIELD_LENGTH, hint: str = ""
) -> str:
    """An optional string argument; missing or null gives ""."""
    value = args.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _invalid(tool, f'"{name}" must be a string{hint}, got {_json_type(value)}')
    if len(value) > limit:
        raise _too_long(tool, name, len(value), limit)
    return value


def _opt_strings(args: Mapping[str, Any], name: str, tool: str, example: str) -> list[str] | None:
    """An optional array of strings; a single string is taken as a one-item list."""
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        got = _json_type(value) if not isinstance(value, (list, tuple)) else "an array with non-string items"
        raise _invalid(tool, f'"{name}" must be an array of strings such as {example}, got {got}')
    if len(value) > MAX_LIST_ITEMS:
        raise _invalid(tool, f'"{name}" has {len(value)} items, at most {MAX_LIST_ITEMS} are allowed')
    for item in value:
        if len(item) > MAX_ITEM_LENGTH:
            raise _invalid(
                tool, f'an item of "{name}" is too long ({len(item)} characters, limit {MAX_ITEM_LENGTH})'
            )
    return list(value)


def _opt_kind(args: Mapping[str, Any], name: str, tool: str) -> str:
    value = _opt_str(args, name, tool, hint=' ("fact" or "episode")').strip().lower()
    if value and value not in KINDS:
        raise _invalid(tool, f'"{name}" must be "fact" or "episode"; omit it when unsure')
    return value


def _opt_bool(args: Mapping[str, Any], name: str, tool: str) -> bool:
    value = args.get(name)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _invalid(tool, f'"{name}" must be true or false, got {_json_type(value)}')


def _opt_int(args: Mapping[str, Any], name: str, tool: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        try:
            return int(value.strip())
        except ValueError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        return value
    elif isinstance(value, float) and value.is_integer():
        return int(value)
    raise _invalid(tool, f'"{name}" must be an integer such as {DEFAULT_LOAD_LIMIT}, got {value!r:.40}')


def _required_id(args: Mapping[str, Any], tool: str, label: str, key: UserKey) -> str:
    memory_id = _opt_str(
        args,
        "memory_id",
        tool,
        limit=MAX_ID_LENGTH,
        hint=" (the id returned by memory_search or memory_load)",
    ).strip()
    if not memory_id:
        raise ToolError(f"memory {label} tool: memory ID is required for app {key.app} and user {key.user}")
    return memory_id


def _required_text(args: Mapping[str, Any], tool: str, label: str, key: UserKey, limit: int) -> str:
    value = args.get("memory")
    if value is not None and not isinstance(value, str):
        raise _invalid(tool, f'"memory" must be a string with the text to remember, got {_json_type(value)}')
    text = value or ""
    if not text.strip():
        raise ToolError(
            f"memory {label} tool: memory content is required for app {key.app} and user {key.user}"
        )
    if len(text) > limit:
        raise ToolError(
            f"memory {label} tool: memory is too long ({len(text)} characters, limit {limit}); "
            "store a shorter, concise summary instead"
        )
    return text


def _metadata(args: Mapping[str, Any], tool: str) -> Metadata | None:
    """Episodic metadata, or None when none is given. An unparsable event_time is dropped."""
    kind = _opt_kind(args, "memory_kind", tool)
    raw_time = _opt_str(args, "event_time", tool, hint=' such as "2024-05-07"')
    participants = _opt_strings(args, "participants", tool, '["Alice", "Bob"]')
    location = _opt_str(args, "location", tool)
    if not (kind or raw_time.strip() or participants or location.strip()):
        return None
    metadata = Metadata(
        kind=kind,
        event_time=parse_flexible_time(raw_time),
        participants=tuple(participants) if participants else None,
        location=location,
    )
    return None if metadata.is_empty() else metadata


def _text_limit(service: Any) -> int:
    limit = getattr(service, "max_text_length", None)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit
    return DEFAULT_MAX_TEXT_LENGTH


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, MemchatError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _invoke(prefix: str, method: Callable[..., Any], *args: Any) -> Any:
    """Call a service method (sync or async); any failure becomes ToolError(prefix: err)."""
    try:
        result = method(*args)
        if inspect.isawaitable(result):
            result = await result
        return result
    except Exception as exc:
        log.debug("%s", prefix, exc_info=True)
        raise ToolError(f"{prefix}: {_describe(exc)}") from exc


def _check_scope(service: Any, key: Any, label: str) -> UserKey:
    if service is None:
        raise ToolError(f"memory {label} tool: memory service is not available")
    app, user = getattr(key, "app", ""), getattr(key, "user", "")
    if not isinstance(app, str) or not isinstance(user, str) or not app.strip() or not user.strip():
        raise ToolError(
            f"memory {label} tool: failed to get app and user from context: "
            f"session exists but missing appName or userID: appName={app}, userID={user}"
        )
    key = key if isinstance(key, UserKey) else UserKey(app, user)
    try:
        key.validate()
    except InvalidKeyError as exc:
        raise ToolError(f"memory {label} tool: the session's {exc}") from exc
    return key


def entry_to_result(entry: Entry) -> dict[str, Any]:
    """The tool-facing view of one entry (reference ``entryToResult``)."""
    memory = entry.memory
    result: dict[str, Any] = {
        "id": entry.id,
        "memory": memory.text,
        "topics": list(memory.topics or ()),
        "created": format_rfc3339(entry.created_at, fractional=True),
    }
    if memory.kind:
        result["kind"] = memory.kind
    if memory.event_time is not None:
        result["event_time"] = format_rfc3339(memory.event_time)
    if memory.participants:
        result["participants"] = list(memory.participants)
    if memory.location:
        result["location"] = memory.location
    score = round(float(entry.score or 0.0), 4)
    if score:
        result["score"] = score
    return result


def build_search_options(
    kind: str, time_after: str, time_before: str, order_by_event_time: bool
) -> SearchOptions:
    """Reference ``buildSearchOptions``: dedup always on, kind as a soft preference,
    time_before pushed to the end of its period, unparsable times ignored. The mode
    is the service's default (hybrid wherever there are vectors), as for every caller."""
    after = parse_flexible_time(time_after) if time_after.strip() else None
    before = parse_flexible_time(time_before) if time_before.strip() else None
    if before is not None:
        before = end_of_period(time_before, before)
    return SearchOptions(
        kind=kind,
        time_after=after,
        time_before=before,
        order_by_event_time=order_by_event_time,
        kind_fallback=bool(kind),
        deduplicate=True,
    )


# -- the six tools -----------------------------------------------------------


def new_add_tool(service: Any) -> Tool:
    async def handler(args: dict[str, Any], key: UserKey) -> dict[str, Any]:
        key = _check_scope(service, key, "add")
        text = _required_text(args, ADD, "add", key, _text_limit(service))
        topics = _opt_strings(args, "topics", ADD, '["food", "travel"]') or []
        metadata = _metadata(args, ADD)
        await _invoke("failed to add memory", service.add, key, text, topics, metadata)
        return {"message": "Memory added successfully", "memory": text, "topics": topics}

    return Tool(ADD, _ADD_DESCRIPTION, _ADD_PARAMETERS, handler)


def new_update_tool(service: Any) -> Tool:
    async def handler(args: dict[str, Any], key: UserKey) -> dict[str, Any]:
        key = _check_scope(service, key, "update")
        memory_id = _required_id(args, UPDATE, "update", key)
        text = _required_text(args, UPDATE, "update", key, _text_limit(service))
        topics = _opt_strings(args, "topics", UPDATE, '["food", "travel"]') or []
        metadata = _metadata(args, UPDATE)
        result = await _invoke(
            "failed to update memory", service.update, key, memory_id, text, topics, metadata
        )
        effective = getattr(result, "memory_id", None) or memory_id
        return {
            "message": "Memory updated successfully",
            "memory_id": effective,
            "memory": text,
            "topics": topics,
        }

    return Tool(UPDATE, _UPDATE_DESCRIPTION, _UPDATE_PARAMETERS, handler)


def new_delete_tool(service: Any) -> Tool:
    async def handler(args: dict[str, Any], key: UserKey) -> dict[str, Any]:
        key = _check_scope(service, key, "delete")
        memory_id = _required_id(args, DELETE, "delete", key)
        await _invoke("failed to delete memory", service.delete, key, memory_id)
        return {"message": "Memory deleted successfully", "memory_id": memory_id}

    return Tool(DELETE, _DELETE_DESCRIPTION, _DELETE_PARAMETERS, handler)


def new_clear_tool(service: Any) -> Tool:
    async def handler(args: dict[str, Any], key: UserKey) -> dict[str, Any]:
        key = _check_scope(service, key, "clear")
        # "reason" is informational only and deliberately not validated.
        await _invoke("memory clear tool: failed to clear memories", service.clear, key)
        return {"message": "All memories cleared successfully"}

    return Tool(CLEAR, _CLEAR_DESCRIPTION, _CLEAR_PARAMETERS, handler)


def new_search_tool(service: Any) -> Tool:
    async def handler(args: dict[str, Any], key: UserKey) -> dict[str, Any]:
        key = _check_scope(service, key, "search")
        limit = _text_limit(service)
        query = _opt_str(args, "query", SEARCH, limit=limit, hint=" with a few keywords")
        kind = _opt_kind(args, "kind", SEARCH)
        time_after = _opt_str(args, "time_after", SEARCH, hint=' such as "2024-05-01"')
        time_before = _opt_str(args, "time_before", SEARCH, hint=' such as "2024-05-31"')
        order = _opt_bool(args, "order_by_event_time", SEARCH)
        if not query.strip():
            return {"query": query, "results": [], "count": 0}
        options = build_search_options(kind, time_after, time_before, order)
        entries = await _invoke("failed to search memories", service.search, key, query, options)
        results = [entry_to_result(e) for e in entries or () if e is not None]
        return {"query": query, "results": results, "count": len(results)}

    return Tool(SEARCH, _SEARCH_DESCRIPTION, _SEARCH_PARAMETERS, handler)


def new_load_tool(service: Any) -> Tool:
    async def handler(args: dict[str, Any], key: UserKey) -> dict[str, Any]:
        key = _check_scope(service, key, "load")
        limit = _opt_int(args, "limit", LOAD)
        if limit is None or limit <= 0:
            limit = DEFAULT_LOAD_LIMIT
        limit = min(limit, MAX_LOAD_LIMIT)
        entries = await _invoke("failed to load memories", service.read, key, limit)
        results = [entry_to_result(e) for e in entries or () if e is not None]
        return {"limit": limit, "results": results, "count": len(results)}

    return Tool(LOAD, _LOAD_DESCRIPTION, _LOAD_PARAMETERS, handler)


DEFAULT_CREATORS: dict[str, Callable[[Any], Tool]] = {
    ADD: new_add_tool,
    UPDATE: new_update_tool,
    DELETE: new_delete_tool,
    CLEAR: new_clear_tool,
    SEARCH: new_search_tool,
    LOAD: new_load_tool,
}

# -- which tools (reference §3.5, §3.6) --------------------------------------


@dataclass
class ToolSettings:
    """Explicit tool choices; anything not mentioned follows the mode's defaults.

    - ``enabled[name]``: turn a tool on or off (in auto mode, "enabled" also
      means the extractor may use it).
    - ``exposed[name]``: show or hide an enabled tool to the agent. Exposing a
      disabled tool does nothing.
    - ``custom[name]``: a creator ``service -> Tool`` replacing the default; it
      enables the tool unless ``enabled[name]`` is explicitly False.

    Unknown names raise ``ConfigError``; explicit settings win over the
    defaults regardless of the order they were written in.
    """

    enabled: dict[str, bool] = field(default_factory=dict)
    exposed: dict[str, bool] = field(default_factory=dict)
    custom: dict[str, Callable[[Any], Tool]] = field(default_factory=dict)

    def validate(self) -> None:
        for label, mapping in (("enabled", self.enabled), ("exposed", self.exposed), ("custom", self.custom)):
            if not isinstance(mapping, Mapping):
                raise ConfigError(f"tool settings {label!r} must be a mapping of tool name to value")
            unknown = sorted(str(name) for name in mapping if name not in ALL_TOOLS)
            if unknown:
                raise ConfigError(
                    f"unknown memory tool name(s) in {label}: {', '.join(unknown)}; "
                    f"valid names are: {', '.join(ALL_TOOLS)}"
                )
        for label, mapping in (("enabled", self.enabled), ("exposed", self.exposed)):
            for name, value in mapping.items():
                if not isinstance(value, bool):
                    raise ConfigError(f"tool setting {label}[{name!r}] must be true or false, got {value!r}")
        for name, creator in self.custom.items():
            if creator is not None and not callable(creator):
                raise ConfigError(f"custom tool creator for {name!r} must be callable (service -> Tool)")


def enabled_tool_names(settings: ToolSettings, auto_mode: bool) -> set[str]:
    """Enabled tools: in auto mode, the operations the extractor may perform."""
    settings.validate()
    enabled = set(AUTO_DEFAULT_ENABLED if auto_mode else AGENTIC_DEFAULT_ENABLED)
    enabled.update(name for name, creator in settings.custom.items() if creator is not None)
    for name, on in settings.enabled.items():
        if on:
            enabled.add(name)
        else:
            enabled.discard(name)
    return enabled


def select_tool_names(settings: ToolSettings, auto_mode: bool) -> list[str]:
    """The tools shown to the agent, sorted by name."""
    enabled = enabled_tool_names(settings, auto_mode)
    selected = []
    for name in ALL_TOOLS:
        if name not in enabled or settings.exposed.get(name) is False:
            continue
        if auto_mode and not (settings.exposed.get(name) is True or name in AUTO_DEFAULT_EXPOSED):
            continue
        selected.append(name)
    return selected


def build_tools(service: Any, settings: ToolSettings | None, auto_mode: bool) -> list[Tool]:
    """Create the selected tools (each creator called once), sorted by name."""
    settings = settings or ToolSettings()
    tools = []
    for name in select_tool_names(settings, auto_mode):
        creator = settings.custom.get(name) or DEFAULT_CREATORS[name]
        tool = creator(service)
        if tool is None:
            raise ConfigError(f"the creator for tool {name!r} returned None instead of a Tool")
        tools.append(tool)
    return tools
