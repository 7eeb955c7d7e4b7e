"""How the Redis store connects: ``url`` > ``REDIS_URL`` > ``REDIS_ADDR``,
checked as redis-py reads it and shown to people without its password; the
client (timeouts, retries); a driver error as one sentence with the fix."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, NoPermissionError, ReadOnlyError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memchat.engine.model import ConfigError
from memchat.engine.secrets import redact

from .base import timeout_message

ENV_URL = "REDIS_URL"
ENV_ADDR = "REDIS_ADDR"
DEFAULT_ADDR = "localhost:6379"

_SCHEMES = ("redis", "rediss", "unix")
_FIX = f"start Redis or set {ENV_URL}/{ENV_ADDR}"


def resolve_url(url: str | None = None, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The URL to connect to and where it came from (for error messages):
    ``url``, then ``REDIS_URL``, then ``redis://`` + ``REDIS_ADDR``."""
    env = os.environ if env is None else env
    if url and url.strip():
        return url.strip(), "the url option"
    if (env.get(ENV_URL) or "").strip():
        return env[ENV_URL].strip(), ENV_URL
    addr = (env.get(ENV_ADDR) or "").strip() or DEFAULT_ADDR
    # Lenient: a full URL in REDIS_ADDR is taken as it is.
    return (addr if "://" in addr else f"redis://{addr}"), ENV_ADDR


def check_url(url: str, source: str = "the url option") -> dict[str, Any]:
    """Parse ``url`` as redis-py would; a malformed one is one ``ConfigError``
    that never repeats the URL (it may hold a password)."""

    def bad(reason: str) -> ConfigError:
        form = "host:port" if source == ENV_ADDR else "redis://[:password@]host:port/db"
        return ConfigError(f"invalid Redis address in {source}: {reason}; write it as {form}")

    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise bad("it cannot be parsed (check the brackets around an IPv6 address)") from exc
    if parts.scheme not in _SCHEMES:
        raise bad("it must start with redis://, rediss:// or unix://")
    try:
        parts.port  # noqa: B018 - raises on a non-numeric or out-of-range port
    except ValueError as exc:
        raise bad(
            "the port is not a number from 0 to 65535 (percent-encode any / # ? @ : in the password)"
        ) from exc
    if parts.scheme != "unix":
        db = parts.path.strip("/")
        if db and not db.isdigit():
            raise bad("the database after the last / must be a number")
    from redis.asyncio.connection import parse_url

    try:
        return dict(parse_url(url))
    except ValueError as exc:
        raise bad("redis-py cannot use it") from exc


def mask_url(url: str) -> str:
    """``redis://:secret@h:1/2`` → ``redis://:***@h:1/2``: for people, never a password."""
    try:
        opts = check_url(url)
    except ConfigError:
        return "(invalid Redis URL)"
    scheme = urlsplit(url).scheme
    db = int(opts.get("db") or 0)
    if scheme == "unix":
        user = f"{opts['username']}@" if opts.get("username") else ""
        secret = "&password=***" if opts.get("password") else ""
        return f"unix://{user}{opts.get('path', '')}?db={db}{secret}"
    auth = ""
    if opts.get("username") or opts.get("password"):
        auth = (opts.get("username") or "") + (":***" if opts.get("password") else "") + "@"
    host = opts.get("host") or "localhost"
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{auth}{host}:{opts.get('port') or 6379}/{db}"


def server_address(opts: Mapping[str, Any]) -> str:
    """``host:port`` (or the socket path) of the server ``check_url`` parsed, for messages."""
    if opts.get("path"):
        return str(opts["path"])
    host = opts.get("host") or "localhost"
    return f"[{host}]:{opts.get('port') or 6379}" if ":" in host else f"{host}:{opts.get('port') or 6379}"


def new_client(url: str, timeout: float, client_options: dict[str, Any]) -> aioredis.Redis:
    """A client of ``url`` whose every call is bounded by ``timeout``."""
    options: dict[str, Any] = {
        "socket_connect_timeout": timeout,
        "socket_timeout": timeout,
        # A few quick retries on a dropped connection: a pooled connection
        # that a restarted server closed is replaced instead of failing the
        # call. Timeouts are not retried: a hung server fails in the timeout.
        "retry": Retry(
            ExponentialWithJitterBackoff(base=0.02, cap=0.25),
            retries=3,
            supported_errors=(RedisConnectionError,),
        ),
        **client_options,
    }
    options.update(decode_responses=True, encoding="utf-8", encoding_errors="surrogatepass")
    return aioredis.Redis.from_url(url, **options)


def explain_error(exc: BaseException, address: str, timeout: float, password: str | None) -> str:
    """One clear sentence for a driver error; never includes a password."""
    lines = str(exc).strip().splitlines()
    text = redact(lines[0].strip(), [password]) if lines else type(exc).__name__
    status = str(getattr(exc, "status_code", "") or "")
    if isinstance(exc, AuthenticationError) or status in ("NOAUTH", "WRONGPASS"):
        if status == "NOAUTH" or "NOAUTH" in text or "authenticated" in text.lower():
            return (
                "the server requires a password and none was given: "
                f"put it in {ENV_URL} as redis://:PASSWORD@host:port/db"
            )
        if "without any password" in text or "no password is set" in text:
            return f"a password was given but the server has none configured: remove it from {ENV_URL}"
        return f"the server rejected the user name or password: correct them in {ENV_URL}"
    if isinstance(exc, NoPermissionError):
        return (
            f"the Redis user may not run a command memchat needs ({text}): allow "
            "its string, hash, list, sorted-set, key, script and transaction commands "
            "(ACL +@string +@hash +@list +@sortedset +@keyspace +@scripting +@transaction +@connection)"
        )
    if isinstance(exc, ReadOnlyError):
        return f"the server is a read-only replica: point {ENV_URL} at the primary"
    if isinstance(exc, RedisTimeoutError | TimeoutError):
        return timeout_message("Redis server", address, timeout)
    if isinstance(exc, RedisConnectionError | OSError):
        if "refused" in text.lower() or "connect call failed" in text.lower():
            return f"the server refused the connection (nothing listens there); {_FIX}"
        return f"cannot reach the server ({text.rstrip('.')}); {_FIX}"
    return text
