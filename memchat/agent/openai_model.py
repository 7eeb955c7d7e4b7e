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
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memchat.agent.llm import ModelConfig, ModelError, ModelEvent, ModelReply, TextChunk, ToolCall, Usage
from memchat.engine.secrets import redact, redact_keys

if TYPE_CHECKING:  # pragma: no cover - typing only; openai is imported lazily
    from openai import AsyncOpenAI

__all__ = ["OpenAIChatModel", "describe_endpoint"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Sent when no key is configured, so keyless local servers (Ollama, vLLM) work.
_NO_KEY = "not-set"
#: Status codes worth another try (the same set the SDK retries).
_RETRYABLE = frozenset({408, 409, 429})
#: Anything that looks like a secret key in server text (``sk-...``, ``sk-proj-...``, masked forms).


def _resolve_base_url(config: ModelConfig) -> str:
    return (config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def _public_url(url: str) -> str:
    """``url`` without credentials, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    if not parts.scheme:
        return url.split("?", 1)[0]
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


def _host(url: str) -> str:
    parts = urlsplit(url)
    if not parts.hostname:
        return _public_url(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


def describe_endpoint(config: ModelConfig) -> str:
    """``"model @ host"`` for banners and logs (no key, no credentials in the URL)."""
    return f"{config.model} @ {_host(_resolve_base_url(config))}"


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

    async def _streamed(self, client: AsyncOpenAI, params: dict[str, Any]) -> AsyncIterator[ModelEvent]:
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
        return status in _RETRYABLE or status >= 500

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
        import openai

        host = _host(self.base_url)
        url = _public_url(self.base_url)
        after = f" after {retries} {'retry' if retries == 1 else 'retries'}"
        if isinstance(exc, openai.APITimeoutError):
            return (
                f"no answer from {host} within {self.config.timeout:g}s"
                + (" (the answer stopped mid-way)" if emitted else "")
                + " — try again, or raise the timeout"
            )
        if isinstance(exc, openai.APIConnectionError):
            if emitted:
                return f"the connection to {host} broke off mid-answer ({_network_reason(exc)}) — try again"
            reason = _network_reason(exc)
            return f"cannot reach {url} ({reason}) — check OPENAI_BASE_URL and that the server is up"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status in (401, 403):
                if not (self.config.api_key or os.environ.get("OPENAI_API_KEY")):
                    return f"{host} requires an API key ({status}) and none is set — set OPENAI_API_KEY"
                return f"the API key was rejected by {host} ({status}) — check OPENAI_API_KEY"
            if status == 404:
                return (
                    f"model '{self.config.model}' not found at {url} — check --model/MEMCHAT_MODEL"
                    " (and OPENAI_BASE_URL, which usually ends in /v1)"
                )
            if status == 429:
                return f"rate limited (429) by {host}{after} — wait and try again"
            if status >= 500 or status in _RETRYABLE:
                detail = _server_detail(exc, self._keys())
                return (
                    f"server error {status} from {host}{after}"
                    + (f" ({detail})" if detail else "")
                    + " — try again later"
                )
            detail = _server_detail(exc, self._keys())
            return f"{host} rejected the request ({status})" + (f": {detail}" if detail else "")
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            detail = _server_detail(exc, self._keys())
            where = "mid-answer" if emitted else "while answering"
            return f"{host} reported an error {where}" + (f": {detail}" if detail else "") + " — try again"
        return f"the call to {host} failed ({type(exc).__name__}) — try again"

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


def _server_detail(exc: Any, secrets: list[str], limit: int = 160) -> str:
    """The server's own error message from the response body, shortened (never
    the SDK's wrapper text), with ``secrets`` masked before it is cut."""
    body = getattr(exc, "body", None)
    message: Any = None
    if isinstance(body, Mapping):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, Mapping) else error
        if message is None and isinstance(error, Mapping):
            message = body.get("message")
    elif isinstance(body, str):
        message = body
    if not isinstance(message, str):
        return ""
    message = redact_keys(" ".join(message.split()), secrets)
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _network_reason(exc: BaseException) -> str:
    """A short cause for a network failure, from the exception chain."""
    import socket
    import ssl

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, socket.gaierror):
            return "host name not found"
        if isinstance(current, ssl.SSLError):
            return "TLS handshake failed"
        text = str(current).lower()
        if "connection refused" in text or "connect call failed" in text:
            return "connection refused"
        if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
            return "host name not found"
        if "certificate" in text or "ssl" in text:
            return "TLS handshake failed"
        if "peer closed" in text or "incomplete" in text or "reset" in text:
            return "connection closed by the server"
        current = current.__cause__ or current.__context__
    return "network error"
