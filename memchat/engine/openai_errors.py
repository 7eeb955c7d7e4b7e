"""One sentence for any failure of an OpenAI-compatible endpoint.

The chat model (``memchat.agent.openai_model``) and the embedder
(``memchat.engine.embedding``) talk to the same kind of server through the
same SDK and fail in the same ways, so they describe failures with one
function: what differs between them (how the server is named, which settings
fix what) is an ``OpenAIEndpoint``. The SDK is imported only when there is an
error to describe. Secrets are masked in the server's own text; callers still
scrub the whole sentence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .secrets import redact_keys

__all__ = [
    "RETRYABLE_STATUSES",
    "OpenAIEndpoint",
    "describe_openai_error",
    "host_of",
    "network_reason",
    "public_url",
    "server_detail",
]

#: Status codes worth another try (the same set the SDK retries), besides 5xx.
RETRYABLE_STATUSES = frozenset({408, 409, 429})


def public_url(url: str) -> str:
    """``url`` without credentials, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    if not parts.scheme:
        return url.split("?", 1)[0]
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


def host_of(url: str) -> str:
    """``host[:port]`` of ``url`` (the public URL when it has no host)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return public_url(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


@dataclass(frozen=True, slots=True)
class OpenAIEndpoint:
    """What an error sentence says about the server and the settings that fix it."""

    #: How sentences name the server: "api.deepseek.com", "the embedding service at …".
    server: str
    #: Where it was reached, named when it cannot be reached or has no such model.
    url: str
    model: str
    #: Seconds a request may take.
    timeout: float
    key_setting: str = "OPENAI_API_KEY"
    url_setting: str = "OPENAI_BASE_URL"
    model_setting: str = "--model/MEMCHAT_MODEL"
    #: False: no key was configured (a 401 then says to set one).
    key_set: bool = True
    #: Masked wherever the server's own text is quoted.
    secrets: Sequence[str] = ()


def describe_openai_error(
    exc: BaseException, endpoint: OpenAIEndpoint, *, retries: int | None = None, emitted: bool = False
) -> str:
    """One sentence naming what went wrong and what fixes it.

    ``retries``: how many times the request was retried (None: not counted
    here, e.g. the SDK retried); ``emitted``: part of an answer had already
    arrived when it failed."""
    import openai

    server, url = endpoint.server, endpoint.url
    after = "" if retries is None else f" after {retries} {'retry' if retries == 1 else 'retries'}"
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"no answer from {server} within {endpoint.timeout:g}s"
            + (" (the answer stopped mid-way)" if emitted else "")
            + " — try again, or raise the timeout"
        )
    if isinstance(exc, openai.APIConnectionError):
        if emitted:
            return f"the connection to {server} broke off mid-answer ({network_reason(exc)}) — try again"
        reason = network_reason(exc)
        return f"cannot reach {url} ({reason}) — check {endpoint.url_setting} and that the server is up"
    if isinstance(exc, openai.APIStatusError):
        return _describe_status(exc, endpoint, after)
    if isinstance(exc, openai.APIError):  # an error event inside the stream
        detail = server_detail(exc, endpoint.secrets)
        where = "mid-answer" if emitted else "while answering"
        return f"{server} reported an error {where}" + (f": {detail}" if detail else "") + " — try again"
    return f"the call to {server} failed ({type(exc).__name__}) — try again"


def _describe_status(exc: Any, endpoint: OpenAIEndpoint, after: str) -> str:
    server, status = endpoint.server, exc.status_code
    if status in (401, 403):
        if not endpoint.key_set:
            return f"{server} requires an API key ({status}) and none is set — set {endpoint.key_setting}"
        return f"the API key was rejected by {server} ({status}) — check {endpoint.key_setting}"
    if status == 404:
        return (
            f"model '{endpoint.model}' not found at {endpoint.url} — check {endpoint.model_setting}"
            f" (and {endpoint.url_setting}, which usually ends in /v1)"
        )
    if status == 429:
        return f"rate limited (429) by {server}{after} — wait and try again"
    detail = server_detail(exc, endpoint.secrets)
    if status >= 500 or status in RETRYABLE_STATUSES:
        return (
            f"server error {status} from {server}{after}"
            + (f" ({detail})" if detail else "")
            + " — try again later"
        )
    return f"{server} rejected the request ({status})" + (f": {detail}" if detail else "")


def server_detail(exc: Any, secrets: Sequence[str], limit: int = 160) -> str:
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


def network_reason(exc: BaseException) -> str:
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
