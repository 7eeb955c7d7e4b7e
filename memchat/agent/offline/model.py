"""The OfflineModel: decides the tool calls and the reply, and streams it."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from ..llm import ModelEvent, ModelReply, TextChunk, ToolCall, Usage
from . import rules as r
from .language import chunks, is_chinese, token_estimate
from .phrases import say
from .understand import (
    Facts,
    extract_facts,
    forget_query,
    matching_hit,
    parse_change,
    question_query,
    relevant_hits,
    remembered,
)

OFFLINE_MODEL_NAME = "offline"
#: How fast the app's offline model streams: a hosted model's usual 100-200 tokens/s.
STREAM_TOKENS_PER_SECOND = 150.0


class OfflineModel:
    """A ChatModel that needs nothing: see the package docstring."""

    name = OFFLINE_MODEL_NAME

    def __init__(self, *, tokens_per_second: float = 0.0, delay: float = 0.0) -> None:
        #: Streaming pace (0: as fast as possible, for tests). ``delay`` (seconds per
        #: piece) is the older way to say it.
        self.tokens_per_second = tokens_per_second or (1.0 / delay if delay > 0 else 0.0)
        #: Auto mode: the background extractor writes memories, the model only reads.
        self.background_memory = False

    def set_background_memory(self, on: bool) -> None:
        """Told by the Runner whether memories are written in the background (auto mode)."""
        self.background_memory = on

    async def close(self) -> None:
        return None

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] = (),
        *,
        streaming: bool = True,
    ) -> AsyncIterator[ModelEvent]:
        available = {t.get("function", {}).get("name") for t in tools}
        text, calls = self._respond(list(messages), available)
        pieces = chunks(text) if text else []
        tokens = sum(token_estimate(p) for p in pieces)
        if streaming:
            async for chunk in self._paced(pieces):
                yield TextChunk(chunk)
        elif text:
            yield TextChunk(text)
        yield ModelReply(
            text=text,
            tool_calls=tuple(calls),
            usage=Usage(completion_tokens=max(tokens, 1)),
            finish_reason="tool_calls" if calls else "stop",
        )

    async def _paced(self, pieces: list[str]) -> AsyncIterator[str]:
        """The pieces at ``tokens_per_second``, by the clock rather than by a sleep per
        piece: when the consumer (a busy TUI) falls behind, the pieces that are due go
        out together instead of each waiting its turn, so the whole answer takes
        tokens / rate seconds whatever the event loop is doing."""
        if not self.tokens_per_second:
            for piece in pieces:
                yield piece
            return
        loop = asyncio.get_running_loop()
        start = loop.time()
        sent = 0.0
        due: list[str] = []
        for piece in pieces:
            wait = start + sent / self.tokens_per_second - loop.time()
            if wait > 0:
                if due:
                    yield "".join(due)
                    due = []
                await asyncio.sleep(wait)
            due.append(piece)
            sent += token_estimate(piece)
        if due:
            yield "".join(due)

    # -- decisions -------------------------------------------------------

    def _respond(self, messages: list[Mapping[str, Any]], available: set[str]) -> tuple[str, list[ToolCall]]:
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        user_text = str(messages[last_user].get("content") or "") if last_user >= 0 else ""
        results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
        called = [c for m in messages[last_user + 1 :] for c in (m.get("tool_calls") or [])]
        chinese = is_chinese(user_text)
        seed = f"{len(messages)}|{user_text}"
        if results:
            return self._after_tools(user_text, called, results, available, chinese, seed)
        if (r.ZH_SAID if chinese else r.EN_SAID).search(user_text.strip()):
            # Answered from the conversation the model was given, not from memory
            # (so a resumed session shows that its history reached the model).
            earlier = [str(m.get("content") or "") for m in messages[:last_user] if m.get("role") == "user"]
            return (
                say(chinese, "you_said", text=earlier[-1]) if earlier else say(chinese, "said_nothing")
            ), []
        text, calls = self._first_round(user_text, available, chinese, seed)
        if self.background_memory and text in (
            say(chinese, "add_disabled"),
            say(chinese, "delete_disabled"),
        ):
            # Auto mode: the background extractor writes; the agent only reads.
            return say(chinese, "background"), []
        return text, calls

    @staticmethod
    def _call(seed: str, index: int, name: str, arguments: dict[str, Any]) -> ToolCall:
        digest = hashlib.sha256(f"{seed}|{index}|{name}".encode()).hexdigest()[:24]
        return ToolCall(
            id=f"call_{index:02d}_{digest}", name=name, arguments=json.dumps(arguments, ensure_ascii=False)
        )

    def _first_round(
        self, text: str, available: set[str], chinese: bool, seed: str
    ) -> tuple[str, list[ToolCall]]:
        stripped = text.strip()
        if r.FORGET_ALL.search(stripped):
            if "memory_clear" in available:
                return "", [self._call(seed, 0, "memory_clear", {"reason": stripped})]
            return say(chinese, "clear_disabled"), []
        target = forget_query(stripped)
        if target is not None:
            if "memory_delete" not in available:
                return say(chinese, "delete_disabled"), []
            return "", [self._call(seed, 0, "memory_search", {"query": target})]
        note = remembered(stripped)
        query = None if note else question_query(stripped)
        if query is not None:
            return self._look_up(query, stripped, available, chinese, seed)
        change = None if note else parse_change(stripped)
        if change is not None:
            if not {"memory_add", "memory_update"} <= available or "memory_search" not in available:
                return say(chinese, "add_disabled"), []
            return "", [self._call(seed, 0, "memory_search", {"query": change.old})]
        facts = Facts(memories=[note]) if note else extract_facts(stripped)
        if facts.memories:
            if "memory_add" not in available:
                return say(chinese, "add_disabled"), []
            intro = say(chinese, "greet_name", name=facts.name) if facts.name else ""
            calls = [
                self._call(seed, i, "memory_add", {"memory": memory, "topics": topics})
                for i, (memory, topics) in enumerate(facts.memories)
            ]
            return intro, calls
        if r.GREETING.match(stripped):
            return say(chinese, "hello"), []
        return say(chinese, "help"), []

    def _look_up(
        self, query: str, text: str, available: set[str], chinese: bool, seed: str
    ) -> tuple[str, list[ToolCall]]:
        if query and "memory_search" in available:
            return say(chinese, "looking"), [self._call(seed, 0, "memory_search", {"query": query})]
        if "memory_load" in available:
            return say(chinese, "looking"), [self._call(seed, 0, "memory_load", {"limit": 10})]
        if "memory_search" in available:
            return say(chinese, "looking"), [self._call(seed, 0, "memory_search", {"query": query or text})]
        return say(chinese, "no_read_tools"), []

    def _after_tools(
        self,
        user_text: str,
        called: list[Mapping[str, Any]],
        results: list[Mapping[str, Any]],
        available: set[str],
        chinese: bool,
        seed: str,
    ) -> tuple[str, list[ToolCall]]:
        names = [c.get("function", {}).get("name") for c in called]
        arguments = [_load_json(c.get("function", {}).get("arguments")) or {} for c in called]
        payloads = [_load_json(m.get("content")) for m in results]
        errors = [p["error"] for p in payloads if isinstance(p, dict) and "error" in p]
        if errors:
            return say(chinese, "failed", error=errors[-1]), []
        last_name, last = names[-1], payloads[-1] or {}
        stripped = user_text.strip()
        hits = last.get("results") or [] if isinstance(last, dict) else []
        if last_name == "memory_search" and forget_query(stripped) is not None:
            if not hits:
                return say(chinese, "nothing_to_forget"), []
            return "", [self._call(seed, 0, "memory_delete", {"memory_id": hits[0]["id"]})]
        change = parse_change(stripped) if last_name == "memory_search" and len(names) == 1 else None
        if change is not None and question_query(stripped) is None and remembered(stripped) is None:
            already = next((h for h in hits if h.get("memory") == change.new), None)
            old = matching_hit(change, [h for h in hits if h is not already])
            if already is not None:  # the new fact is stored: the old one only has to go
                if old is not None and "memory_delete" in available:
                    return "", [self._call(seed, 1, "memory_delete", {"memory_id": old["id"]})]
                return say(chinese, "remembered", items=change.new), []
            if old is None:
                return "", [
                    self._call(seed, 1, "memory_add", {"memory": change.new, "topics": change.topics})
                ]
            update = {"memory_id": old["id"], "memory": change.new, "topics": change.topics}
            return "", [self._call(seed, 1, "memory_update", update)]
        if last_name == "memory_update":
            before = _memory_of(payloads, arguments[-1].get("memory_id")) or "?"
            return say(chinese, "updated", new=last.get("memory", ""), old=before), []
        if last_name == "memory_delete":
            gone = _memory_of(payloads, arguments[-1].get("memory_id")) or "it"
            change = parse_change(stripped)
            if change is not None:  # the new fact was already stored: the old one went
                return say(chinese, "updated", new=change.new, old=gone), []
            return say(chinese, "forgotten", item=gone), []
        if last_name == "memory_clear":
            return say(chinese, "cleared"), []
        if last_name in ("memory_search", "memory_load"):
            query = str(arguments[-1].get("query", "")) if last_name == "memory_search" else ""
            shown = relevant_hits(query, hits) if query else hits
            if not shown:
                return say(chinese, "no_memories"), []
            items = "\n".join(f"- {h.get('memory', '')}" for h in shown)
            return say(chinese, "recall", items=items), []
        added = [p.get("memory", "") for p in payloads if isinstance(p, dict) and p.get("memory")]
        return say(chinese, "remembered", items="; ".join(added)), []


def _memory_of(payloads: list[Any], memory_id: Any) -> str:
    """The text of the memory ``memory_id`` as an earlier search or load in this turn returned it."""
    for payload in payloads:
        for hit in payload.get("results", []) if isinstance(payload, dict) else []:
            if hit.get("id") == memory_id:
                return str(hit.get("memory", ""))
    return ""


def _load_json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
