"""Argument kinds: each one knows both its JSON schema and how to read it.

A tool's arguments are a dataclass (``arguments.py``) whose fields carry one
of these specs; the schema the model sees and the validation of what the
model sends are both derived from that single declaration, so they cannot
drift apart. Reading is lenient where the reference is (a single string for
a list, ``"true"`` for a boolean, ``"5"`` for an integer) and otherwise
raises a ``ToolError`` naming the argument and what it must be.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from ..model import KIND_EPISODE, KIND_FACT, UserKey
from .base import ToolError, json_type

KINDS = (KIND_FACT, KIND_EPISODE)
MAX_ID_LENGTH = 255
MAX_LIST_ITEMS = 50
MAX_ITEM_LENGTH = 100
MAX_FIELD_LENGTH = 1_000


class CallContext:
    """Who is calling which tool: what the error sentences name."""

    __slots__ = ("key", "label", "text_limit", "tool")

    def __init__(self, tool: str, label: str, key: UserKey, text_limit: int) -> None:
        self.tool = tool
        #: The tool's short name in sentences: "memory add tool: ...".
        self.label = label
        self.key = key
        #: The longest memory text (and search query) the service accepts.
        self.text_limit = text_limit


def invalid(context: CallContext, message: str) -> ToolError:
    return ToolError(f"invalid arguments for {context.tool}: {message}")


#: The dataclass field metadata key under which a field's spec is kept.
_SPEC = "memchat.tool_argument"


class Spec:
    """One argument: its description, whether the schema lists it as required,
    and (in subclasses) its JSON type and how a value is read.

    Plain classes rather than dataclasses: they load in a fraction of the
    time, and the chat's first frame waits for the tools."""

    __slots__ = ("description", "required")
    json_type: ClassVar[str] = "string"
    #: Arguments are shown and checked in field order, except that a lower
    #: rank comes first: the memory a call is about is named before the rest.
    rank: ClassVar[int] = 1

    def __init__(self, description: str, *, required: bool = False) -> None:
        self.description = description
        #: Listed in the schema's "required" (reading may still be lenient).
        self.required = required

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.description!r})"

    @property
    def metadata(self) -> dict[str, Spec]:
        """Declares a dataclass field as this argument: ``field(metadata=spec.metadata)``."""
        return {_SPEC: self}

    def schema(self) -> dict[str, Any]:
        return {"type": self.json_type, "description": self.description}

    def read(self, value: Any, name: str, context: CallContext) -> Any:
        raise NotImplementedError


class Text(Spec):
    """An optional string; missing or null gives ""."""

    __slots__ = ("hint", "limit")

    def __init__(
        self,
        description: str,
        *,
        required: bool = False,
        limit: int | None = MAX_FIELD_LENGTH,
        hint: str = "",
    ) -> None:
        super().__init__(description, required=required)
        #: Longest accepted value; None: the service's memory text limit.
        self.limit = limit
        #: Said after "must be a string" when the value is not one.
        self.hint = hint

    def read(self, value: Any, name: str, context: CallContext) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise invalid(context, f'"{name}" must be a string{self.hint}, got {json_type(value)}')
        limit = context.text_limit if self.limit is None else self.limit
        if len(value) > limit:
            raise invalid(context, f'"{name}" is too long ({len(value)} characters, limit {limit})')
        return value


class Note(Spec):
    """Informational only (a reason given for an action): shown in the schema,
    deliberately not validated."""

    __slots__ = ()

    def read(self, value: Any, name: str, context: CallContext) -> Any:
        return value


class Kind(Spec):
    """Either "fact" or "episode" (case-insensitive); "" when missing."""

    __slots__ = ()

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(KINDS), "description": self.description}

    def read(self, value: Any, name: str, context: CallContext) -> str:
        text = Text(self.description, hint=' ("fact" or "episode")').read(value, name, context)
        kind = text.strip().lower()
        if kind and kind not in KINDS:
            raise invalid(context, f'"{name}" must be "fact" or "episode"; omit it when unsure')
        return kind


class Texts(Spec):
    """An optional array of short strings; a single string is taken as a one-item list."""

    __slots__ = ("example",)

    def __init__(self, description: str, *, example: str) -> None:
        super().__init__(description)
        #: Shown in the error sentence, e.g. '["Alice", "Bob"]'.
        self.example = example

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "string"}, "description": self.description}

    def read(self, value: Any, name: str, context: CallContext) -> list[str] | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
            got = (
                json_type(value) if not isinstance(value, (list, tuple)) else "an array with non-string items"
            )
            raise invalid(context, f'"{name}" must be an array of strings such as {self.example}, got {got}')
        if len(value) > MAX_LIST_ITEMS:
            raise invalid(context, f'"{name}" has {len(value)} items, at most {MAX_LIST_ITEMS} are allowed')
        for item in value:
            if len(item) > MAX_ITEM_LENGTH:
                raise invalid(
                    context,
                    f'an item of "{name}" is too long ({len(item)} characters, limit {MAX_ITEM_LENGTH})',
                )
        return list(value)


class Flag(Spec):
    """An optional boolean (also "true"/"false" as text); missing is false."""

    __slots__ = ()

    json_type: ClassVar[str] = "boolean"

    def read(self, value: Any, name: str, context: CallContext) -> bool:
        if value is None:
            return False
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise invalid(context, f'"{name}" must be true or false, got {json_type(value)}')


class Count(Spec):
    """An optional positive integer (also as text) with a default and a cap:
    missing, zero or negative gives the default; more than the cap gives the cap."""

    __slots__ = ("default", "maximum")
    json_type: ClassVar[str] = "integer"

    def __init__(self, description: str, *, default: int, maximum: int) -> None:
        super().__init__(description)
        self.default = default
        self.maximum = maximum

    def schema(self) -> dict[str, Any]:
        description = f"{self.description} (default {self.default}, at most {self.maximum})."
        return {"type": self.json_type, "description": description}

    def read(self, value: Any, name: str, context: CallContext) -> int:
        count = self._integer(value, name, context)
        if count is None or count <= 0:
            count = self.default
        return min(count, self.maximum)

    def _integer(self, value: Any, name: str, context: CallContext) -> int | None:
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
        raise invalid(context, f'"{name}" must be an integer such as {self.default}, got {value!r:.40}')


class MemoryId(Spec):
    """The id of a stored memory; required, said in the scope's words when missing."""

    __slots__ = ()
    rank: ClassVar[int] = 0

    def __init__(self, description: str) -> None:
        super().__init__(description, required=True)

    def read(self, value: Any, name: str, context: CallContext) -> str:
        hint = " (the id returned by memory_search or memory_load)"
        memory_id = Text(self.description, limit=MAX_ID_LENGTH, hint=hint).read(value, name, context).strip()
        if not memory_id:
            key = context.key
            raise ToolError(
                f"memory {context.label} tool: memory ID is required for app {key.app} and user {key.user}"
            )
        return memory_id


class MemoryText(Spec):
    """The text of a memory: required, at most the service's text limit."""

    __slots__ = ()

    def __init__(self, description: str) -> None:
        super().__init__(description, required=True)

    def read(self, value: Any, name: str, context: CallContext) -> str:
        if value is not None and not isinstance(value, str):
            raise invalid(
                context, f'"{name}" must be a string with the text to remember, got {json_type(value)}'
            )
        text = value or ""
        key, label, limit = context.key, context.label, context.text_limit
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


class ToolArguments:
    """Base of a tool's argument dataclass: the schema and the reading both
    come from the fields, in their declared order (a ``MemoryId`` first),
    which is also the order problems are reported in."""

    @classmethod
    def _specs(cls) -> list[tuple[str, Spec]]:
        specs = [(f.name, f.metadata[_SPEC]) for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        return sorted(specs, key=lambda named: named[1].rank)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The "parameters" object of the tool's declaration."""
        specs = cls._specs()
        return {
            "type": "object",
            "properties": {name: spec.schema() for name, spec in specs},
            "required": [name for name, spec in specs if spec.required],
        }

    @classmethod
    def read(cls, args: Mapping[str, Any], context: CallContext) -> Self:
        """The model's arguments checked and converted; a ``ToolError`` on the first problem."""
        return cls(**{name: spec.read(args.get(name), name, context) for name, spec in cls._specs()})
