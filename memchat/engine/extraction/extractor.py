"""The model-backed extractor (reference §6.3, ``extractor.NewExtractor``).

One model call: a system prompt listing the existing memories under local
numbers, the conversation, and declaration-only copies of the write tools.
The model answers with tool calls (or, for models without tool calling, a
JSON list of operations in its text); each becomes an ``Operation`` whose
``memory_id`` is mapped from the local number back to the real ID.

Anything invalid — arguments that are not a JSON object, an unknown operation,
a missing field, a number that is not listed — is skipped with a logged
warning (also returned in ``Extraction.warnings``). Nothing invalid ever
reaches the memory service.

The model is any object with the ``ChatModel`` shape
(``stream(messages, tools, streaming=False)`` yielding events, the last of
which has ``text`` and ``tool_calls``); the engine does not import the agent.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ..jsonsafe import DEFAULT_MAX_DEPTH, JSONInputError, load_json
from ..model import KIND_EPISODE, KIND_FACT, Entry
from ..timeparse import parse_flexible_time
from .checkers import CheckerMixin
from .prompt import DEFAULT_PROMPT, allowed_operations, build_system_prompt, tool_declarations
from .types import (
    MERGE_SIMILAR,
    POLICIES,
    TOOL_OPERATIONS,
    Checker,
    Extraction,
    ExtractionError,
    Message,
    Operation,
    OperationType,
)

log = logging.getLogger(__name__)

__all__ = [
    "ModelCallbacks",
    "ModelExtractor",
    "ModelRequest",
    "ModelResponse",
    "ToolCallData",
    "filter_messages",
    "message_text",
    "parse_operations",
]

TRAILING_USER_MESSAGE = "Extract and manage memories from the conversation above."


# -- messages ---------------------------------------------------------------


def message_text(message: Message) -> str:
    """Content plus text parts, trimmed and joined with newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, Sequence):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type", "text") == "text":
                text = part.get("text")
                if isinstance(text, str) and text.strip():
                    texts.append(text.strip())
        return "\n".join(texts)
    return ""


def filter_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Only user and assistant messages with text; tool calls, tool results and
    empty messages are dropped (reference ``scanDeltaSince``)."""
    kept = []
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant") or message.get("tool_call_id") or message.get("tool_calls"):
            continue
        text = message_text(message)
        if text:
            kept.append({"role": role, "content": text})
    return kept


# -- model callbacks ---------------------------------------------------------


@dataclass
class ModelRequest:
    """What is about to be sent to the extractor's model (callbacks may change it)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ToolCallData:
    id: str
    name: str
    #: Raw JSON text as the model sent it.
    arguments: str


@dataclass(frozen=True, slots=True)
class ModelResponse:
    text: str = ""
    tool_calls: tuple[ToolCallData, ...] = ()


#: ``before(request)`` → None (go on), a ModelRequest (send this instead) or a
#: ModelResponse (skip the model: use this answer). Sync or async.
BeforeModel = Callable[[ModelRequest], Any]
#: ``after(request, response, error)`` → None (keep) or a ModelResponse (use this
#: instead). ``response`` is None and ``error`` is "<Type>: <message>" when the
#: model call failed; returning a response recovers from the failure. Sync or async.
AfterModel = Callable[[ModelRequest, ModelResponse | None, str], Any]


@dataclass
class ModelCallbacks:
    before: list[BeforeModel] = field(default_factory=list)
    after: list[AfterModel] = field(default_factory=list)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


# -- parsing ----------------------------------------------------------------

_NUMBER = re.compile(r"^\s*\[?\s*#?\s*(\d{1,9})\s*\]?\s*$")
#: One tool call's arguments: the same bound as the agent's tools (one
#: operation holds one memory of at most 10 000 characters).
MAX_ARGUMENTS_BYTES = 1 << 20
#: A whole JSON reply (models without tool calls) lists every operation of the
#: job: 4 MiB holds 100 operations with maximal memories (10 000 characters,
#: at most 40 000 bytes each); a longer reply is runaway output, not a plan.
MAX_REPLY_BYTES = 4 << 20
#: Operations nest 3 levels deep ({"operations": [{"topics": [...]}]}).
MAX_DEPTH = DEFAULT_MAX_DEPTH


def _unfence(body: str) -> str:
    """The inside of a ```json … ``` block (linear time, unlike a lazy regex
    over a long run of whitespace)."""
    if len(body) >= 6 and body.startswith("```") and body.endswith("```"):
        inner = body[3:-3]
        if inner[:4].lower() == "json":
            inner = inner[4:]
        return inner.strip()
    return body


def _strings(value: Any) -> tuple[str, ...]:
    """A JSON array of strings; any other shape is empty and non-strings are skipped."""
    if not isinstance(value, list):
        return ()
    return tuple(v.strip() for v in value if isinstance(v, str) and v.strip())


class _Parser:
    """Turns tool calls into operations, mapping local numbers to entries."""

    def __init__(self, existing: Sequence[Entry]) -> None:
        self.existing = list(existing)
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        log.warning("memory extraction: %s", message)
        self.warnings.append(message)

    def target(self, name: str, args: Mapping[str, Any]) -> Entry | None:
        value = args.get("memory_id")
        if isinstance(value, bool) or value is None or value == "":
            self.warn(f"{name} without a memory_id was skipped")
            return None
        match = _NUMBER.match(str(value)) if isinstance(value, (str, int)) else None
        if match is None:
            self.warn(
                f"{name} with memory_id {value!r} was skipped: it must be the number of an existing memory"
            )
            return None
        number = int(match.group(1))
        if not 1 <= number <= len(self.existing):
            self.warn(
                f"{name} with memory_id {number} was skipped: there is no existing memory [{number}] "
                f"({len(self.existing)} were listed)"
            )
            return None
        return self.existing[number - 1]

    def operation(self, name: str, arguments: Any) -> Operation | None:
        # The tool's name, or (some models shorten it) the operation's own name.
        op_type = TOOL_OPERATIONS.get(name) or (OperationType(name) if name in tuple(OperationType) else None)
        if op_type is None:
            self.warn(f"unknown operation {name!r} was skipped")
            return None
        if isinstance(arguments, Mapping):
            args = dict(arguments)
        else:
            raw = arguments if isinstance(arguments, str) else ""
            try:
                args = (
                    load_json(raw, max_bytes=MAX_ARGUMENTS_BYTES, max_depth=MAX_DEPTH) if raw.strip() else {}
                )
            except JSONInputError as exc:
                self.warn(
                    f"{name} with arguments that are not valid JSON ({exc.reason}) was skipped: {raw[:200]!r}"
                )
                return None
            if not isinstance(args, dict):
                self.warn(f"{name} with arguments that are not a JSON object was skipped: {raw[:200]!r}")
                return None
        if op_type == OperationType.CLEAR:
            return Operation(OperationType.CLEAR)
        target = None
        if op_type in (OperationType.UPDATE, OperationType.DELETE):
            target = self.target(name, args)
            if target is None:
                return None
            if op_type == OperationType.DELETE:
                return Operation(OperationType.DELETE, memory_id=target.id, target=target)
        text = args.get("memory")
        if not isinstance(text, str) or not text.strip():
            self.warn(f"{name} without memory text was skipped")
            return None
        raw_kind = args.get("memory_kind")
        if raw_kind == KIND_EPISODE:
            kind = KIND_EPISODE
        elif op_type == OperationType.ADD or raw_kind == KIND_FACT:
            kind = KIND_FACT
        else:
            kind = ""  # an update that does not say keeps the stored kind
        raw_time = args.get("event_time")
        event_time = parse_flexible_time(raw_time) if isinstance(raw_time, str) and raw_time.strip() else None
        location = args.get("location")
        return Operation(
            op_type,
            memory=text.strip(),
            memory_id=target.id if target is not None else "",
            topics=_strings(args.get("topics")),
            kind=kind,
            event_time=event_time,
            participants=_strings(args.get("participants")),
            location=location.strip() if isinstance(location, str) else "",
            target=target,
        )

    def from_text(self, text: str) -> list[Operation]:
        """Operations written as JSON in the reply text (models without tool calls):
        ``[{"op": "add", "memory": …}, …]`` or ``{"operations": […]}``."""
        body = text.strip()
        if len(body) > MAX_REPLY_BYTES:
            # A cheap first bound on characters; load_json counts bytes exactly.
            self.warn(
                f"the model's reply is not valid JSON (the text is over {MAX_REPLY_BYTES} bytes) "
                "and was skipped"
            )
            return []
        body = _unfence(body)
        if not body.startswith(("[", "{")):
            if body:
                log.debug("memory extraction: the model answered in prose, no operations: %.200s", body)
            return []
        try:
            data = load_json(body, max_bytes=MAX_REPLY_BYTES, max_depth=MAX_DEPTH)
        except JSONInputError as exc:
            self.warn(f"the model's reply is not valid JSON ({exc.reason}) and was skipped: {body[:200]!r}")
            return []
        if isinstance(data, dict):
            data = data.get("operations", [data])
        if not isinstance(data, list):
            self.warn("the model's JSON reply has no list of operations and was skipped")
            return []
        operations = []
        for item in data:
            if not isinstance(item, dict):
                self.warn(f"operation {json.dumps(item)[:200]} is not a JSON object and was skipped")
                continue
            name = next((item[k] for k in ("op", "action", "type", "tool", "name") if k in item), None)
            if not isinstance(name, str):
                self.warn(f"operation {json.dumps(item)[:200]} names no operation and was skipped")
                continue
            arguments = item.get("arguments", item)
            operation = self.safe_operation(name.strip().lower(), arguments)
            if operation is not None:
                operations.append(operation)
        return operations

    def safe_operation(self, name: Any, arguments: Any) -> Operation | None:
        """``operation`` that never raises: anything unexpected becomes a warning."""
        try:
            return self.operation(name, arguments)
        except Exception as exc:
            self.warn(f"{str(name)[:100]} was skipped: {type(exc).__name__}: {str(exc)[:200]}")
            return None


def parse_operations(response: ModelResponse, existing: Sequence[Entry]) -> Extraction:
    """The operations in a model response; invalid parts become warnings. Never
    raises, so invalid output counts as an extraction that found nothing and
    the worker moves its watermark past those messages."""
    parser = _Parser(existing)
    if response.tool_calls:
        operations = [parser.safe_operation(call.name, call.arguments) for call in response.tool_calls]
        found = [op for op in operations if op is not None]
    else:
        try:
            found = parser.from_text(response.text)
        except Exception as exc:
            parser.warn(f"the model's reply was skipped: {type(exc).__name__}: {str(exc)[:200]}")
            found = []
    return Extraction(tuple(found), tuple(parser.warnings))


# -- the extractor ------------------------------------------------------------


class ModelExtractor(CheckerMixin):
    """Extraction with a chat model. See the module docstring.

    ``checkers`` are ANDed (none: extract after every turn). ``policy`` is one
    of ``merge_similar`` (default), ``preserve_history``, ``append_only``.
    ``owns_model``: ``close()`` closes the model too.
    """

    def __init__(
        self,
        model: Any,
        *,
        prompt: str = "",
        checkers: Sequence[Checker] = (),
        callbacks: ModelCallbacks | None = None,
        policy: str = MERGE_SIMILAR,
        owns_model: bool = False,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown update policy {policy!r}: choose one of {', '.join(POLICIES)}")
        self.model = model
        self.prompt = prompt or DEFAULT_PROMPT
        self.checkers = [c for c in checkers if c is not None]
        self.callbacks = callbacks or ModelCallbacks()
        self.policy = policy
        self.owns_model = owns_model

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name", "") or "")

    def metadata(self) -> dict[str, Any]:
        return {"model_name": self.name, "model_available": self.model is not None}

    def set_prompt(self, prompt: str) -> None:
        if prompt:
            self.prompt = prompt

    def set_model(self, model: Any) -> None:
        if model is not None:
            self.model = model

    async def close(self) -> None:
        if self.owns_model and self.model is not None:
            await self.model.close()

    def build_request(
        self,
        messages: Sequence[Message],
        existing: Sequence[Entry],
        *,
        enabled: frozenset[str] | None = None,
        reference_date: datetime | None = None,
    ) -> ModelRequest:
        operations = allowed_operations(enabled, self.policy)
        system = build_system_prompt(
            self.prompt, reference_date or datetime.now(UTC), operations, existing, self.policy
        )
        conversation = filter_messages(messages)
        request_messages: list[dict[str, Any]] = [{"role": "system", "content": system}, *conversation]
        if conversation and conversation[-1]["role"] != "user":
            # Some providers reject a request that ends with an assistant message.
            request_messages.append({"role": "user", "content": TRAILING_USER_MESSAGE})
        return ModelRequest(request_messages, tool_declarations(operations, self.policy))

    async def extract(
        self,
        messages: Sequence[Message],
        existing: Sequence[Entry],
        *,
        enabled: frozenset[str] | None = None,
        reference_date: datetime | None = None,
    ) -> Extraction:
        if self.model is None:
            raise ExtractionError("no model configured for memory extraction")
        if not filter_messages(messages):
            return Extraction()
        request = self.build_request(messages, existing, enabled=enabled, reference_date=reference_date)
        response: ModelResponse | None = None
        for before in self.callbacks.before:
            try:
                outcome = await _maybe_await(before(request))
            except Exception as exc:
                raise ExtractionError(f"before model callback failed: {exc}") from exc
            if isinstance(outcome, ModelResponse):
                response = outcome
                break
            if isinstance(outcome, ModelRequest):
                request = outcome
        if response is None:
            response = await self._call(request)
        allowed = set(allowed_operations(enabled, self.policy))
        extraction = parse_operations(response, existing)
        offered = tuple(op for op in extraction.operations if op.type in allowed)
        warnings = list(extraction.warnings)
        for op in extraction.operations:
            if op.type not in allowed:
                message = f"{op.tool} is not available to the extractor and was skipped"
                log.warning("memory extraction: %s", message)
                warnings.append(message)
        return replace(extraction, operations=offered, warnings=tuple(warnings))

    async def _call(self, request: ModelRequest) -> ModelResponse:
        response: ModelResponse | None = None
        error = ""
        failure: Exception | None = None
        try:
            reply = None
            async for event in self.model.stream(request.messages, request.tools, streaming=False):
                if hasattr(event, "tool_calls"):
                    reply = event
            if reply is None:
                raise ExtractionError("the model ended its answer without a final message")
            response = ModelResponse(
                text=str(getattr(reply, "text", "") or ""),
                tool_calls=tuple(
                    ToolCallData(str(c.id), str(c.name), str(c.arguments or ""))
                    for c in reply.tool_calls or ()
                ),
            )
        except Exception as exc:
            failure = exc
            error = f"{type(exc).__name__}: {exc}"
        for after in self.callbacks.after:
            try:
                outcome = await _maybe_await(after(request, response, error))
            except Exception as exc:
                raise ExtractionError(f"after model callback failed: {exc}") from exc
            if isinstance(outcome, ModelResponse):
                response, error, failure = outcome, "", None
        if failure is not None:
            if isinstance(failure, ExtractionError):
                raise failure
            raise ExtractionError(f"model error: {failure}") from failure
        assert response is not None
        return response
