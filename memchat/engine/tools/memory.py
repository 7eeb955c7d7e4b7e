"""The six memory tools (reference ``memory/tool``): what each does with its
checked arguments.

The (app, user) scope comes only from the ``key`` the caller passes (the
session of the conversation); ``app_name``/``user_id`` fields inside the
model's arguments are ignored.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..model import Entry, InvalidKeyError, SearchOptions, UserKey
from ..timeparse import end_of_period, format_rfc3339, parse_flexible_time
from . import descriptions
from .arguments import (
    AddArguments,
    ClearArguments,
    DeleteArguments,
    LoadArguments,
    SearchArguments,
    UpdateArguments,
)
from .base import Tool, ToolError, ToolName, describe_exception, log
from .specs import CallContext, ToolArguments

#: Used when the service does not say how long a memory may be.
DEFAULT_MAX_TEXT_LENGTH = 10_000

A = TypeVar("A", bound=ToolArguments)
Action = Callable[[Any, A, UserKey], Awaitable[dict[str, Any]]]


def _text_limit(service: Any) -> int:
    limit = getattr(service, "max_text_length", None)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit
    return DEFAULT_MAX_TEXT_LENGTH


async def _invoke(prefix: str, method: Callable[..., Any], *args: Any) -> Any:
    """Call a service method (sync or async); any failure becomes ToolError(prefix: err)."""
    try:
        result = method(*args)
        if inspect.isawaitable(result):
            result = await result
        return result
    except Exception as exc:
        log.debug("%s", prefix, exc_info=True)
        raise ToolError(f"{prefix}: {describe_exception(exc)}") from exc


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


def _memory_tool(
    service: Any, name: ToolName, description: str, arguments: type[A], action: Action[A]
) -> Tool:
    """A tool whose handler checks the scope, then reads ``arguments``, then runs ``action``."""
    label = name.removeprefix("memory_")

    async def handler(args: dict[str, Any], key: UserKey) -> dict[str, Any]:
        key = _check_scope(service, key, label)
        parsed = arguments.read(args, CallContext(name, label, key, _text_limit(service)))
        return await action(service, parsed, key)

    return Tool(name, description, arguments.json_schema(), handler)


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


# -- what each tool does -----------------------------------------------------


async def _add(service: Any, args: AddArguments, key: UserKey) -> dict[str, Any]:
    topics = args.topics or []
    await _invoke("failed to add memory", service.add, key, args.memory, topics, args.metadata())
    return {"message": "Memory added successfully", "memory": args.memory, "topics": topics}


async def _update(service: Any, args: UpdateArguments, key: UserKey) -> dict[str, Any]:
    topics = args.topics or []
    result = await _invoke(
        "failed to update memory", service.update, key, args.memory_id, args.memory, topics, args.metadata()
    )
    return {
        "message": "Memory updated successfully",
        "memory_id": getattr(result, "memory_id", None) or args.memory_id,
        "memory": args.memory,
        "topics": topics,
    }


async def _delete(service: Any, args: DeleteArguments, key: UserKey) -> dict[str, Any]:
    await _invoke("failed to delete memory", service.delete, key, args.memory_id)
    return {"message": "Memory deleted successfully", "memory_id": args.memory_id}


async def _clear(service: Any, args: ClearArguments, key: UserKey) -> dict[str, Any]:
    await _invoke("memory clear tool: failed to clear memories", service.clear, key)
    return {"message": "All memories cleared successfully"}


async def _search(service: Any, args: SearchArguments, key: UserKey) -> dict[str, Any]:
    query = args.query
    if not query.strip():
        return {"query": query, "results": [], "count": 0}
    options = build_search_options(args.kind, args.time_after, args.time_before, args.order_by_event_time)
    entries = await _invoke("failed to search memories", service.search, key, query, options)
    results = [entry_to_result(e) for e in entries or () if e is not None]
    return {"query": query, "results": results, "count": len(results)}


async def _load(service: Any, args: LoadArguments, key: UserKey) -> dict[str, Any]:
    entries = await _invoke("failed to load memories", service.read, key, args.limit)
    results = [entry_to_result(e) for e in entries or () if e is not None]
    return {"limit": args.limit, "results": results, "count": len(results)}


#: Each tool: what the model reads about it, its arguments and what it does.
_DEFINITIONS: dict[ToolName, tuple[str, type[Any], Action[Any]]] = {
    ToolName.ADD: (descriptions.ADD_DESCRIPTION, AddArguments, _add),
    ToolName.UPDATE: (descriptions.UPDATE_DESCRIPTION, UpdateArguments, _update),
    ToolName.DELETE: (descriptions.DELETE_DESCRIPTION, DeleteArguments, _delete),
    ToolName.CLEAR: (descriptions.CLEAR_DESCRIPTION, ClearArguments, _clear),
    ToolName.SEARCH: (descriptions.SEARCH_DESCRIPTION, SearchArguments, _search),
    ToolName.LOAD: (descriptions.LOAD_DESCRIPTION, LoadArguments, _load),
}


def _creator(name: ToolName) -> Callable[[Any], Tool]:
    def create(service: Any) -> Tool:
        return _memory_tool(service, name, *_DEFINITIONS[name])

    create.__name__ = create.__qualname__ = f"new_{name.removeprefix('memory_')}_tool"
    create.__doc__ = f"The default {name} tool over ``service``."
    return create


#: Tool name → creator ``service -> Tool`` (what ToolSettings.custom replaces).
DEFAULT_CREATORS: dict[str, Callable[[Any], Tool]] = {name: _creator(name) for name in ToolName}
new_add_tool = DEFAULT_CREATORS[ToolName.ADD]
new_update_tool = DEFAULT_CREATORS[ToolName.UPDATE]
new_delete_tool = DEFAULT_CREATORS[ToolName.DELETE]
new_clear_tool = DEFAULT_CREATORS[ToolName.CLEAR]
new_search_tool = DEFAULT_CREATORS[ToolName.SEARCH]
new_load_tool = DEFAULT_CREATORS[ToolName.LOAD]
