"""What every tool shares: the ``Tool`` itself, its result, and reading the
model's raw arguments into a JSON object.

A tool never raises: ``Tool.run`` turns malformed arguments, service errors
and unexpected backend exceptions alike into a JSON ``{"error": "..."}``
result with ``is_error=True``, so the model can read what went wrong and try
again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..jsonsafe import DEFAULT_MAX_DEPTH, JSONInputError, load_json
from ..model import MemchatError, UserKey

log = logging.getLogger("memchat.engine.tools")


class ToolName(StrEnum):
    """The six memory tools (a ``str``: each member equals its tool name)."""

    ADD = "memory_add"
    UPDATE = "memory_update"
    DELETE = "memory_delete"
    CLEAR = "memory_clear"
    SEARCH = "memory_search"
    LOAD = "memory_load"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returns to the model: JSON text, and whether it is an error."""

    content: str
    is_error: bool = False


class ToolError(Exception):
    """Raised by a tool handler; its message is the sentence shown to the model."""


def dumps(value: Any) -> str:
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


def error_result(message: str) -> ToolResult:
    """``{"error": message}`` as a failed tool result."""
    return ToolResult(dumps({"error": message}), is_error=True)


def unknown_tool_result(name: str, available: Iterable[str]) -> ToolResult:
    """What a call of a tool that is not offered gets, in the chat and over MCP alike."""
    names = ", ".join(available) or "none"
    return error_result(f"unknown tool {name}; available tools: {names}")


def describe_exception(exc: BaseException) -> str:
    """An engine error's own sentence; anything else with its type name."""
    text = str(exc).strip()
    if isinstance(exc, MemchatError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


Handler = Callable[[dict[str, Any], UserKey], Awaitable[Any]]


class Tool:
    """One function tool: name, description, JSON-schema parameters and a handler.

    ``handler(args, key)`` receives the arguments already parsed into a dict
    and the caller's scope. It returns a JSON-serialisable value (or a
    string, used as is) and may raise ``ToolError`` with a message for the
    model; any other exception is reported as an unexpected failure.
    """

    def __init__(self, name: str, description: str, parameters: Mapping[str, Any], handler: Handler) -> None:
        self.name = str(name)
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
            return ToolResult(value if isinstance(value, str) else dumps(value), is_error=False)
        except ToolError as exc:
            log.info("%s rejected a call: %s", self.name, exc)
            return error_result(str(exc))
        except Exception as exc:
            log.warning("%s failed unexpectedly", self.name, exc_info=True)
            return error_result(f"{self.name} failed unexpectedly: {describe_exception(exc)}")

    async def call(self, arguments: str | bytes | Mapping[str, Any] | None, key: UserKey) -> str:
        """``run`` returning only the content string."""
        return (await self.run(arguments, key)).content


# -- the raw arguments -------------------------------------------------------


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type, for error sentences."""
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
        raise ToolError(f"invalid arguments for {tool}: expected a JSON object, got {json_type(arguments)}")
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
            f"got {json_type(value)}"
        )
    return value
