"""ChatModel over any OpenAI-compatible endpoint (OpenAI, DeepSeek, vLLM, Ollama...).

Uses the official ``openai`` SDK (``AsyncOpenAI``), imported lazily on the
first call so the app can draw its first frame before paying for the import.
The SDK's own retries are off (``max_retries=0``): 429 and 5xx are retried
here with exponential backoff, and every failure becomes a ``ModelError`` with
one sentence a person can act on — never containing the API key.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from memchat.agent.llm import ModelConfig, ModelError, ModelEvent, ModelReply, TextChunk, ToolCall, Usage
from memchat.engine.openai_errors import (
    RETRYABLE_STATUSES,
    OpenAIEndpoint,
    describe_openai_error,
    host_of,
    public_url,
)
from memchat.engine.secrets import redact

if TYPE_CHECKING:  # pragma: no cover - typing only; openai is imported lazily
    from openai import AsyncOpenAI

__all__ = ["OpenAIChatModel", "describe_endpoint"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Sent when no key is configured, so keyless local servers (Ollama, vLLM) work.
_NO_KEY = "not-set"


def _resolve_base_url(config: ModelConfig) -> str:
    return (config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def describe_endpoint(config: ModelConfig) -> str:
    """``"model @ host"`` for banners and logs (no key, no credentials in the URL)."""
    return f"{config.model} @ {host_of(_resolve_base_url(config))}"


class OpenAIChatModel:
    """``ChatModel`` over ``POST {base_url}/chat/completions``.

    ``retry_base_delay``, ``retry_max_delay`` and ``retry_after_cap`` (seconds)
    shape the backoff: attempt *n* waits ``base·2ⁿ`` capped at ``max``, or the
    server's Retry-After capped at ``retry_after_cap``.
    """

    retry_base_delay: float = 0.5
    retry_max_delay: float = 8.0
    retry_after_cap: float = 30.0

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.name = config.model
        self.base_url = _resolve_base_url(config)
        self._client: AsyncOpenAI | None = None
        # Learned from the server on the first call and kept for the session.
        self._send_stream_options = True
        self._max_tokens_param = "max_tokens"

    def __repr__(self) -> str:
        return f"OpenAIChatModel({describe_endpoint(self.config)!r})"

    # -- client ------------------------------------------------------------

    def _ensure_client(self) -> AsyncOpenAI:
        if self._client is None:
            import openai  # lazy: ~0.7 s, kept off the startup path

            self._client = openai.AsyncOpenAI(
                api_key=self.config.api_key or os.environ.get("OPENAI_API_KEY") or _NO_KEY,
                base_url=self.base_url,
                timeout=self.config.timeout,
                max_retries=0,
            )
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -- the call ------------------------------------------------------------

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] = (),
        *,
        streaming: bool = True,
    ) -> AsyncIterator[ModelEvent]:
        client = self._ensure_client()
        import openai

        retries = 0
        while True:
            params = self._params(messages, tools, streaming)
            emitted = False
            try:
                if streaming:
                    # aclosing: if our consumer stops early, the HTTP stream is closed now, not at GC.
                    async with aclosing(self._streamed(client, params)) as events:
                        async for event in events:
                            emitted = emitted or isinstance(event, TextChunk)
                            yield event
                else:
                    reply = await self._complete(client, params)
                    if reply.text:
                        emitted = True
                        yield TextChunk(reply.text)
                    yield reply
                return
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if not emitted and self._adapt_to(exc):
                    continue  # same attempt, one parameter fewer
                raise self._error(exc, retries, emitted) from None
            except openai.APIStatusError as exc:
                if emitted or not self._retryable(exc) or retries >= self.config.max_retries:
                    raise self._error(exc, retries, emitted) from None
                await asyncio.sleep(self._backoff(exc, retries))
                retries += 1
            except openai.OpenAIError as exc:
                raise self._error(exc, retries, emitted) from None

    def _params(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], streaming: bool
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(m) for m in messages],
            "stream": streaming,
        }
        if self.config.max_tokens:
            params[self._max_tokens_param] = self.config.max_tokens
        if self.config.temperature is not None:
            params["temperature"] = self.config.temperature
        if tools:
            params["tools"] = [dict(t) for t in tools]
        if streaming and self._send_stream_options:
            params["stream_options"] = {"include_usage": True}
        return params

    async def _streamed(
        self, client: AsyncOpenAI, params: dict[str, Any]
    ) -> AsyncGenerator[ModelEvent, None]:
        response = await client.chat.completions.create(**params)
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}  # by index, in first-seen order
        usage: Usage | None = None
        finish_reason = ""
        try:
            async for chunk in response:
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or ():
                    if choice.index not in (0, None):
                        continue
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        text.append(delta.content)
                        yield TextChunk(delta.content)
                    for part in delta.tool_calls or ():
                        _merge_tool_delta(calls, part)
        finally:
            await response.close()
        yield ModelReply(
            text="".join(text),
            tool_calls=_finish_calls(calls.values()),
            usage=usage,
            finish_reason=finish_reason,
        )

    async def _complete(self, client: AsyncOpenAI, params: dict[str, Any]) -> ModelReply:
        completion = await client.chat.completions.create(**params)
        usage = _usage(completion.usage) if completion.usage is not None else None
        if not completion.choices:
            return ModelReply(text="", usage=usage)
        choice = completion.choices[0]
        message = choice.message
        calls = []
        for call in message.tool_calls or ():
            function = getattr(call, "function", None)
            if function is None:  # a non-function ("custom") tool call: not ours
                continue
            calls.append(
                {"id": call.id or "", "name": function.name or "", "arguments": function.arguments or ""}
            )
        return ModelReply(
            text=message.content or "",
            tool_calls=_finish_calls(calls),
            usage=usage,
            finish_reason=choice.finish_reason or "",
        )

    # -- compatibility -------------------------------------------------------

    def _adapt_to(self, exc: Exception) -> bool:
        """Drop what a stricter server refused (once per session); True to resend."""
        # Matched against everything the server said (body, param, message); never shown to anyone.
        parts = (getattr(exc, "body", None), getattr(exc, "param", None), getattr(exc, "message", None))
        detail = " ".join(str(p) for p in parts if p).lower()
        if self._send_stream_options and "stream_options" in detail:
            self._send_stream_options = False
            return True
        if self._max_tokens_param == "max_tokens" and "max_completion_tokens" in detail:
            # OpenAI's reasoning models refuse max_tokens and ask for max_completion_tokens.
            self._max_tokens_param = "max_completion_tokens"
            return True
        return False

    # -- retries ---------------------------------------------------------------

    @staticmethod
    def _retryable(exc: Any) -> bool:
        status = getattr(exc, "status_code", 0) or 0
        return status in RETRYABLE_STATUSES or status >= 500

    def _backoff(self, exc: Any, retries: int) -> float:
        delay = min(self.retry_base_delay * (2**retries), self.retry_max_delay)
        after = _retry_after(getattr(getattr(exc, "response", None), "headers", None))
        if after is not None:
            delay = min(max(after, 0.0), self.retry_after_cap)
        return delay

    # -- errors ----------------------------------------------------------------

    def _error(self, exc: Exception, retries: int, emitted: bool) -> ModelError:
        return ModelError(self._scrub(self._describe(exc, retries, emitted)))

    def _describe(self, exc: Exception, retries: int, emitted: bool) -> str:
        endpoint = OpenAIEndpoint(
            server=host_of(self.base_url),
            url=public_url(self.base_url),
            model=self.config.model,
            timeout=self.config.timeout,
            key_set=bool(self.config.api_key or os.environ.get("OPENAI_API_KEY")),
            secrets=self._keys(),
        )
        return describe_openai_error(exc, endpoint, retries=retries, emitted=emitted)

    def _keys(self) -> list[str]:
        return [k for k in (self.config.api_key, os.environ.get("OPENAI_API_KEY")) if k]

    def _scrub(self, text: str) -> str:
        """``text`` without the key or any piece of it of 8+ characters (a server
        often echoes part of a rejected key)."""
        return redact(text, self._keys())


# -- helpers ----------------------------------------------------------------


def _usage(raw: Any) -> Usage:
    return Usage(
        prompt_tokens=int(getattr(raw, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
    )


def _merge_tool_delta(calls: dict[int, dict[str, str]], part: Any) -> None:
    """Fold one ``delta.tool_calls[i]`` into the call it belongs to.

    Calls are keyed by ``index``; ``id`` and the name arrive in a call's first
    delta and ``arguments`` come as fragments to concatenate. Servers that omit
    ``index`` get one by ``id`` (a new id opens a new call).
    """
    index = getattr(part, "index", None)
    cid = getattr(part, "id", None) or ""
    if index is None:
        known = [i for i, c in calls.items() if cid and c["id"] == cid]
        if known:
            index = known[0]
        elif cid or not calls:
            index = max(calls, default=-1) + 1
        else:
            index = max(calls)  # an id-less continuation of the latest call
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if cid and not call["id"]:
        call["id"] = cid
    function = getattr(part, "function", None)
    if function is not None:
        name = getattr(function, "name", None) or ""
        if name and name != call["name"]:
            # Normally the whole name arrives once; a few servers repeat it (ignored above) or split it.
            call["name"] += name
        call["arguments"] += getattr(function, "arguments", None) or ""


def _finish_calls(calls: Any) -> tuple[ToolCall, ...]:
    out = []
    for n, call in enumerate(calls):
        if not call["name"] and not call["arguments"]:
            continue
        out.append(ToolCall(id=call["id"] or f"call_{n}", name=call["name"], arguments=call["arguments"]))
    return tuple(out)


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return float(millis) / 1000
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return when.timestamp() - time.time()
    except (TypeError, ValueError, OverflowError):
        return None
