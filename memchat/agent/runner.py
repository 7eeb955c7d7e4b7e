"""The Runner: one chat session over a model and a memory service.

One turn = preload → model → tool calls → tool results → model … → done,
yielded as typed events (``events.py``). The session history stays valid for
the next turn whatever happens: a model error, a tool error, too many tool
rounds, or the turn being cancelled half-way (the partial answer is kept and
every requested tool call gets a result message).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

from memchat.engine import MemoryService, UserKey
from memchat.engine.extraction.types import JobState
from memchat.engine.preload import build_preload_block, merge_into_system, select_preload
from memchat.engine.tools import Tool, ToolName, ToolResult, unknown_tool_result

from .events import (
    Event,
    TextDelta,
    ToolCallsRequested,
    ToolExecuting,
    ToolFinished,
    TurnDone,
    TurnError,
    TurnStats,
)
from .llm import ChatModel, MemoryModeAware, Message, ModelError, ModelReply, TextChunk, ToolCall
from .memory_access import MemoryAccess

log = logging.getLogger(__name__)

APP_NAME = "memory-chat"
AGENT_NAME = "memory-assistant"
DEFAULT_USER = "user"
DEFAULT_MAX_TOOL_ROUNDS = 8

SYSTEM_PROMPT = (
    "You are memory-assistant, a helpful AI assistant with memory capabilities. "
    "You can remember what the user tells you across conversations with your memory tools: "
    "store durable facts about the user when they share them, search your memories when an answer "
    "may depend on what you know about the user, update memories that changed, and delete one only "
    "when the user asks you to forget it. Answer in the user's language."
)
#: Auto mode: memories are written by the background extractor, not by the agent.
AUTO_SYSTEM_PROMPT = (
    "You are memory-assistant, a helpful AI assistant with long-term memory. "
    "What the user tells you is remembered automatically in the background after each turn, so you "
    "do not need to store anything yourself. Search your memories when an answer may depend on what "
    "you know about the user. Answer in the user's language."
)
#: Added when the agent has no memory_delete tool (its default): the person can still
#: forget a memory themselves, and a real model should say how instead of only refusing.
FORGET_YOURSELF_PROMPT = (
    " You cannot delete memories yourself: the memory_delete tool is not enabled. When the user "
    "asks you to forget something, say so and tell them how to do it themselves: type /forget "
    "followed by what to forget (for example: /forget I like Go), or select the memory in the "
    "memory panel (ctrl+b) and press d; or restart memchat with --enable-tool memory_delete to "
    "let you do it."
)


class SessionClock:
    """Session ids ``memory-session-<unix seconds>``, strictly increasing even
    when ``/new`` is typed twice within a second."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._last = 0

    def new_id(self) -> str:
        self._last = max(int(self._now()), self._last + 1)
        return f"memory-session-{self._last}"

    def after(self, session_id: str) -> None:
        """New ids come after ``session_id`` (a saved session), so a restart
        within the same second never continues an old conversation by accident."""
        self._last = max(self._last, session_number(session_id))


def session_number(session_id: str) -> int:
    """The seconds in ``memory-session-<seconds>`` (0 for another id)."""
    number = session_id.rpartition("-")[2]
    return int(number) if number.isdigit() else 0


class ConversationLog(Protocol):
    """Told of everything a conversation keeps, as it happens (the session
    recorder, ``memchat.sessions.recorder``). Calls must not block."""

    def message(self, session_id: str, message: Mapping[str, Any], meta: Mapping[str, Any]) -> None: ...

    def turn_stats(self, session_id: str, stats: TurnStats, model: str) -> None: ...

    def turn_error(self, session_id: str, text: str) -> None: ...


@dataclass
class _Turn:
    """What one turn has measured so far, and what it has not yet committed."""

    streamed: bool
    started: float = field(default_factory=time.perf_counter)
    first_token: float | None = None
    last_token: float | None = None
    completion_tokens: int = 0
    tool_time: float = 0.0
    tool_calls: int = 0
    model_time: float = 0.0
    #: Text of the current model round, until it is committed to the history.
    answer: list[str] = field(default_factory=list)
    #: All the text of the turn (what TurnDone carries).
    text: list[str] = field(default_factory=list)
    #: Tool calls requested and not yet answered in the history.
    pending_calls: list[ToolCall] = field(default_factory=list)

    def text_arrived(self, text: str) -> None:
        now = time.perf_counter()
        self.first_token = self.first_token or now
        self.last_token = now
        self.answer.append(text)
        self.text.append(text)

    def stats(self) -> TurnStats:
        first, last, tokens, streamed = (
            self.first_token,
            self.last_token,
            self.completion_tokens,
            self.streamed,
        )
        streaming_time = (last - first) if first and last else 0.0
        rate = tokens / streaming_time if streaming_time > 0 and tokens else None
        return TurnStats(
            # Without streaming the whole answer is the "first token": not a figure to show.
            time_to_first_token=(first - self.started) if first and streamed else None,
            completion_tokens=tokens,
            tokens_per_second=rate if streamed else None,
            tool_time=self.tool_time,
            tool_calls=self.tool_calls,
            elapsed=time.perf_counter() - self.started,
            streamed=streamed,
            model_time=self.model_time,
        )


class Runner:
    def __init__(
        self,
        model: ChatModel,
        service: MemoryService,
        *,
        app: str = APP_NAME,
        user: str = DEFAULT_USER,
        streaming: bool = True,
        preload: int = 0,
        max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS,
        system_prompt: str | None = None,
        session_clock: SessionClock | None = None,
        recorder: ConversationLog | None = None,
    ) -> None:
        self.model = model
        self.service = service
        self.key = UserKey(app, user)
        #: The UI's one door to the memories (it never touches ``service``).
        self.memory = MemoryAccess(service, self.key)
        self.streaming = streaming
        self.preload = preload
        self.max_tool_rounds = max(1, max_tool_rounds)
        self.tools: dict[str, Tool] = {t.name: t for t in service.tools()}
        if system_prompt is None:
            system_prompt = AUTO_SYSTEM_PROMPT if service.extractor else SYSTEM_PROMPT
            if not service.auto_mode and ToolName.DELETE not in self.tools:
                system_prompt += FORGET_YOURSELF_PROMPT
        self.system_prompt = system_prompt
        if isinstance(model, MemoryModeAware):
            # Auto mode: the agent is shown only the reading tools; memories are
            # written in the background (by the extractor, when there is one).
            model.set_background_memory(service.auto_mode)
        self._sessions = session_clock or SessionClock()
        self.session_id = self._sessions.new_id()
        self.history: list[Message] = []
        #: Saves the conversation as it happens (None: not saved).
        self.recorder = recorder

    @property
    def tool_names(self) -> list[str]:
        return sorted(self.tools)

    # -- auto extraction (background; see memchat.engine.extraction) ---------

    @property
    def auto_extraction(self) -> bool:
        """Memories are extracted in the background after each turn."""
        return self.service.extractor is not None

    def add_extraction_listener(self, listener: Callable[[object], object]) -> Callable[[], None]:
        """``listener(event)`` for every ExtractionStarted / ExtractionFinished of
        the background extractor (called on the event loop). Returns a remover."""
        if not self.auto_extraction:
            return lambda: None
        return self.service.add_extraction_listener(listener)

    def _enqueue_extraction(self, *, force: bool = False) -> JobState:
        if not self.auto_extraction or not self.history:
            return JobState.OFF
        try:
            state = self.service.enqueue_auto_memory_job(
                self.key, self.session_id, list(self.history), force=force
            )
            return JobState(state)
        except Exception:  # extraction is best effort: never cost the user the turn
            log.warning("could not hand the turn to the memory extractor", exc_info=True)
            return JobState.FAILED

    def flush_extraction(self) -> JobState:
        """Extract what is still pending in this conversation, whatever the checkers say
        (done on /new and when the chat ends)."""
        return self._enqueue_extraction(force=True)

    @property
    def extraction_pending(self) -> int:
        """Background extraction jobs queued or running."""
        auto = self.service.auto
        return auto.pending_jobs if auto is not None else 0

    async def drain_extraction(self, timeout: float | None = None) -> bool:
        """Wait until the background extraction is idle: True, or False after
        ``timeout`` seconds (default: the extraction's drain bound, its job timeout)."""
        auto = self.service.auto
        if auto is None:
            return True
        if timeout is None:
            timeout = auto.config.drain_timeout or auto.config.job_timeout
        return await auto.drain(timeout)

    def new_session(self) -> tuple[str, str]:
        """Start a new conversation; memories are kept. Returns (previous, current).
        In auto mode what is pending of the old conversation is extracted first."""
        self.flush_extraction()
        previous = self.session_id
        self.session_id = self._sessions.new_id()
        self.history = []
        return previous, self.session_id

    def resume(self, session_id: str, history: list[Message]) -> str:
        """Continue a saved conversation: ``history`` (already trimmed to fit the
        model) is what the model sees of it. Returns the previous session id."""
        self.flush_extraction()
        previous = self.session_id
        self._sessions.after(session_id)
        self.session_id = session_id
        self.history = list(history)
        return previous

    def session_seen(self, session_id: str) -> None:
        """A saved session exists with this id: new ids come after it."""
        self._sessions.after(session_id)
        if not self.history and session_number(self.session_id) <= session_number(session_id):
            self.session_id = self._sessions.new_id()

    # -- recording (memchat.sessions) ---------------------------------------

    def _remember(self, message: Message, **meta: Any) -> None:
        """Add to the history, and to the saved session."""
        self.history.append(message)
        if self.recorder is not None:
            try:
                self.recorder.message(self.session_id, message, meta)
            except Exception:  # saving is best effort: never cost the user the turn
                log.warning("could not record the message", exc_info=True)

    def _record_error(self, text: str) -> TurnError:
        if self.recorder is not None:
            try:
                self.recorder.turn_error(self.session_id, text)
            except Exception:
                log.warning("could not record the error", exc_info=True)
        return TurnError(text)

    async def _request(self, user_text: str) -> list[Message]:
        messages: list[Message] = [{"role": "system", "content": self.system_prompt}, *self.history]
        if self.preload:
            entries = await select_preload(self.service, self.key, self.preload, user_text)
            messages = merge_into_system(messages, build_preload_block(entries))
        return messages

    async def _call_tool(self, call: ToolCall) -> tuple[ToolResult, float]:
        started = time.perf_counter()
        tool = self.tools.get(call.name)
        if tool is None:
            result = unknown_tool_result(call.name, self.tool_names)
        else:
            result = await tool.run(call.arguments, self.key)
        return result, time.perf_counter() - started

    async def run(self, user_text: str) -> AsyncIterator[Event]:
        """Run one turn. Always ends with ``TurnDone`` unless cancelled."""
        turn = _Turn(streamed=self.streaming)
        self._remember({"role": "user", "content": user_text})
        try:
            try:
                messages = await self._request(user_text)
            except Exception as exc:  # preload failing must not cost the user the turn
                messages = [{"role": "system", "content": self.system_prompt}, *self.history]
                yield self._record_error(f"could not preload memories: {exc}")
            for round_number in range(self.max_tool_rounds + 1):
                async with aclosing(self._model_round(turn, messages)) as answer:
                    async for delta in answer:
                        yield delta
                calls = turn.pending_calls
                if not calls:
                    break
                if round_number == self.max_tool_rounds:
                    yield self._stop_at_round_limit(turn)
                    break
                async with aclosing(self._run_tools(turn, calls, messages)) as progress:
                    async for event in progress:
                        yield event
        except ModelError as exc:
            self._commit_partial(turn.answer)
            turn.answer.clear()
            yield self._record_error(str(exc))
        except (asyncio.CancelledError, GeneratorExit):
            self._commit_partial(turn.answer, stopped=True)
            self._answer_pending(turn.pending_calls, "cancelled: the user stopped the turn")
            raise
        yield self._record_stats(turn.stats())
        try:
            yield TurnDone("".join(turn.text))
        finally:
            # The turn is over (and TurnDone delivered): hand it to the background
            # extractor, which runs on its own tasks; this never waits for it.
            self._enqueue_extraction()

    async def _model_round(self, turn: _Turn, messages: list[Message]) -> AsyncGenerator[TextDelta, None]:
        """Ask the model once: its text as it streams, then its message in the
        history and its tool calls in ``turn.pending_calls``."""
        reply: ModelReply | None = None
        asked = time.perf_counter()
        schemas = [t.schema for t in self.tools.values()]
        async for event in self.model.stream(messages, schemas, streaming=self.streaming):
            turn.model_time += time.perf_counter() - asked
            if isinstance(event, TextChunk):
                if event.text:
                    turn.text_arrived(event.text)
                    yield TextDelta(event.text)
            else:
                reply = event
            asked = time.perf_counter()  # the consumer's time is not the model's
        if reply is None:
            raise ModelError("the model ended its answer without a final message")
        turn.answer.clear()
        if reply.usage:
            turn.completion_tokens += reply.usage.completion_tokens
        message = reply.to_message()
        self._remember(message)
        messages.append(message)
        turn.pending_calls = list(reply.tool_calls)

    def _stop_at_round_limit(self, turn: _Turn) -> TurnError:
        self._answer_pending(turn.pending_calls, "not run: the tool round limit was reached")
        turn.pending_calls = []
        return self._record_error(
            f"stopped after {self.max_tool_rounds} rounds of tool calls in one turn; ask again or rephrase"
        )

    async def _run_tools(
        self, turn: _Turn, calls: list[ToolCall], messages: list[Message]
    ) -> AsyncGenerator[Event, None]:
        """Run the calls of one round side by side; report and record them in order."""
        yield ToolCallsRequested(tuple(calls))
        tasks = [asyncio.ensure_future(self._call_tool(c)) for c in calls]
        try:
            for call in calls:
                yield ToolExecuting(call)
            for call, task in zip(list(calls), tasks, strict=True):
                result, elapsed = await task
                turn.tool_time += elapsed
                turn.tool_calls += 1
                tool_message = {"role": "tool", "tool_call_id": call.id, "content": result.content}
                self._remember(tool_message, name=call.name, is_error=result.is_error, elapsed=elapsed)
                messages.append(tool_message)
                turn.pending_calls.remove(call)
                yield ToolFinished(call, result.content, result.is_error, elapsed)
        finally:
            for task in tasks:
                task.cancel()

    def _record_stats(self, stats: TurnStats) -> TurnStats:
        if self.recorder is not None:
            try:
                self.recorder.turn_stats(self.session_id, stats, self.model.name)
            except Exception:
                log.warning("could not record the turn's stats", exc_info=True)
        return stats

    def _commit_partial(self, answer: list[str], stopped: bool = False) -> None:
        """Keep a partial answer in the history so the next turn sees it."""
        if answer:
            text = "".join(answer) + (" [stopped]" if stopped else "")
            self._remember({"role": "assistant", "content": text}, stopped=stopped)

    def _answer_pending(self, calls: list[ToolCall], why: str) -> None:
        """Every tool call in the history must have a result, or the next
        request is rejected by the API."""
        for call in calls:
            content = json.dumps({"error": why}, ensure_ascii=False)
            self._remember(
                {"role": "tool", "tool_call_id": call.id, "content": content},
                name=call.name,
                is_error=True,
                elapsed=0.0,
            )


#: The order the reference's banner lists tools in.
BANNER_ORDER = (
    "memory_add",
    "memory_update",
    "memory_search",
    "memory_load",
    "memory_delete",
    "memory_clear",
)


def tool_summary(runner: Runner) -> tuple[str, str]:
    """The banner's two lines: the tools the model has, and the ones that are off."""
    enabled = [n for n in BANNER_ORDER if n in runner.tools]
    off = [n for n in BANNER_ORDER if n not in runner.tools]
    note = f"({', '.join(off)} disabled by default, can be enabled with --enable-tool)" if off else ""
    if runner.auto_extraction:
        auto = runner.service.auto
        enabled_names = (
            auto.enabled if auto is not None and auto.enabled is not None else frozenset(BANNER_ORDER)
        )
        writers = [n for n in off if n in enabled_names and n not in ("memory_search", "memory_load")]
        note = (
            f"({', '.join(writers)} used by the background extractor; "
            "show them to the model with --expose-tool)"
            if writers
            else ""
        )
    return ", ".join(enabled) or "none", note


__all__ = [
    "APP_NAME",
    "AUTO_SYSTEM_PROMPT",
    "DEFAULT_USER",
    "FORGET_YOURSELF_PROMPT",
    "ConversationLog",
    "Runner",
    "SessionClock",
    "session_number",
    "tool_summary",
]
