"""How the Chroma store reaches Chroma: settings from arguments or
``CHROMA_*`` variables, the HTTP or embedded client, and a client error as
one sentence naming the fix."""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import chromadb
import chromadb.errors
from chromadb.config import Settings

from memchat.engine.model import BackendError, ConfigError

from ._chroma_records import MARK_BACKEND, MARK_DIMENSION, MARK_SCHEMA, SCHEMA_VERSION
from .base import timeout_message

ENV_URL = "CHROMA_BASE_URL"
ENV_PATH = "CHROMA_PATH"
ENV_COLLECTION = "CHROMA_COLLECTION"
ENV_TENANT = "CHROMA_TENANT"
ENV_DATABASE = "CHROMA_DATABASE"
ENV_API_KEY = "CHROMA_API_KEY"
ENV_BEARER_TOKEN = "CHROMA_BEARER_TOKEN"

DEFAULT_COLLECTION = "memories"
DEFAULT_TENANT = "default_tenant"
DEFAULT_DATABASE = "default_database"
#: Guards chromadb's shared client cache, which is not thread-safe.
CLIENT_LOCK = threading.Lock()

_COLLECTION_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")


def default_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("memchat", appauthor=False) / "chroma"


def validate_collection_name(name: str) -> str:
    """Chroma's rule: 3–512 of ``[a-zA-Z0-9._-]``, starting and ending with a
    letter or digit, no ``..``, not an IPv4 address."""
    ok = isinstance(name, str) and _COLLECTION_NAME.fullmatch(name) and ".." not in name
    if ok:
        try:
            ipaddress.IPv4Address(name)
            ok = False
        except ValueError:
            pass
    if not ok:
        raise ConfigError(
            f"invalid Chroma collection name {name!r}: use 3–512 letters, digits, dots, dashes or "
            "underscores, starting and ending with a letter or digit (set CHROMA_COLLECTION)"
        )
    return name


def safe_url(url: str) -> str:
    """``url`` without credentials or query: fit for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"


def http_client(
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    tenant: str,
    database: str,
    scope_from_auth: bool,
) -> Any:
    """A client of the Chroma server at ``url``, after a heartbeat bounded by ``timeout``."""
    import httpx

    # The client waits forever by default: first a bounded heartbeat, so a
    # server that is down or hanging is a prompt, clear error.
    base = url.removesuffix("/api/v2")
    bounds = httpx.Timeout(timeout)
    response = httpx.get(f"{base}/api/v2/heartbeat", headers=headers, timeout=bounds)
    if response.status_code != 200:
        raise chromadb.errors.ChromaError(  # type: ignore[abstract]  # (chromadb's own base error, raised as it is)
            f"the server at {safe_url(url)} answered the heartbeat with HTTP {response.status_code}"
            + (" (unauthorized)" if response.status_code in (401, 403) else "")
        )
    settings = Settings(anonymized_telemetry=False)
    settings.chroma_overwrite_singleton_tenant_database_access_from_auth = scope_from_auth
    client = chromadb.HttpClient(
        host=url,
        ssl=url.startswith("https://"),
        headers=dict(headers) or None,
        settings=settings,
        tenant=tenant,
        database=database,
    )
    session = getattr(getattr(client, "_server", None), "_session", None)
    if session is not None:
        session.timeout = bounds
    return client


def embedded_client(path: Path, *, tenant: str, database: str) -> Any:
    """A persistent Chroma in the folder ``path`` (created if missing)."""
    path.mkdir(parents=True, exist_ok=True)
    # Clients on one path share one cached system; its cache is not thread-safe.
    with CLIENT_LOCK:
        return chromadb.PersistentClient(
            path=str(path),
            settings=Settings(anonymized_telemetry=False),
            tenant=tenant,
            database=database,
        )


def close_client(client: Any) -> None:
    """Close ``client`` and the HTTP sessions its stopped systems keep open."""
    from chromadb.api.shared_system_client import SharedSystemClient

    with CLIENT_LOCK:
        client.close()
        # A stopped system (the client's, and the admin client it made
        # for itself) keeps its HTTP session open: close it now, not at
        # garbage collection (an unclosed-socket warning).
        for part in (client, getattr(client, "_admin_client", None)):
            if getattr(part, "_identifier", None) in SharedSystemClient._identifier_to_system:
                continue  # still shared with another client
            session = getattr(getattr(part, "_server", None), "_session", None)
            if session is not None:
                session.close()


def explain_error(
    exc: BaseException, *, url: str | None, location: str, timeout: float, tenant: str, database: str
) -> str:
    """One sentence with the fix for a Chroma client error (``url`` None: embedded)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, chromadb.errors.ChromaAuthError | chromadb.errors.AuthorizationError) or re.search(
        r"\b(401|403)\b|unauthori[sz]ed|forbidden", text, re.IGNORECASE
    ):
        return (
            f"the Chroma server refused the credentials ({text}): check {ENV_API_KEY} or "
            f"{ENV_BEARER_TOKEN}, and {ENV_TENANT}/{ENV_DATABASE}"
        )
    if url and (
        isinstance(exc, OSError | TimeoutError)
        or type(exc).__module__.startswith(("httpx", "httpcore"))
        or "Could not connect" in text
    ):
        if "timeout" in type(exc).__name__.lower() or isinstance(exc, TimeoutError):
            return timeout_message("Chroma server", location, timeout)
        why = "it is down or unreachable"
        return (
            f"cannot reach the Chroma server at {location} ({why}): "
            f"start it (chroma run --path ./chroma-data) or set {ENV_URL} to a running server"
        )
    if not url and isinstance(exc, OSError):
        return (
            f"cannot use the folder {location} ({text}): set {ENV_PATH} to a writable folder, "
            f"or {ENV_URL} to use a Chroma server"
        )
    if isinstance(exc, chromadb.errors.NotFoundError) and ("tenant" in text.lower() or "database" in text):
        return (
            f"{text}: create tenant {tenant} / database {database} on the server, "
            f"or set {ENV_TENANT} and {ENV_DATABASE}"
        )
    if isinstance(exc, chromadb.errors.InvalidArgumentError) and "dimension" in text:
        return f"embedding dimension mismatch: {text}"
    return text


def open_collection(client: Any, name: str, dimension: int, *, where: str) -> Any:
    """The collection ``name`` of ``client``, created for cosine and ``dimension``,
    or checked to be such; ``where`` starts the error messages."""
    try:
        collection = client.get_collection(name, embedding_function=None)
    except (chromadb.errors.NotFoundError, ValueError):
        marker = {MARK_BACKEND: "memchat", MARK_SCHEMA: SCHEMA_VERSION, MARK_DIMENSION: dimension}
        return client.get_or_create_collection(
            name,
            embedding_function=None,
            metadata=marker,
            configuration={"hnsw": {"space": "cosine"}},
        )
    _check_collection(collection, name, dimension, where)
    return collection


def _check_collection(collection: Any, name: str, dimension: int, where: str) -> None:
    # The raw JSON: the parsed ``configuration`` warns about our (absent) embedding function.
    config = getattr(collection, "configuration_json", None)
    config = config if isinstance(config, dict) else {}
    spaces = [(config.get(k) or {}).get("space") for k in ("hnsw", "spann")]
    space = next((s for s in spaces if s), None)
    if space is None:
        space = (collection.metadata or {}).get("hnsw:space", "l2")
    if space != "cosine":
        raise BackendError(
            f"{where}: collection {name} uses the {space} distance, but memories need "
            f"cosine: set {ENV_COLLECTION} to another collection (it is created with cosine)"
        )
    stored = (collection.metadata or {}).get(MARK_DIMENSION)
    if stored is None:  # a collection memchat did not create: look at a record
        sample = collection.get(limit=1, include=["embeddings"])
        embeddings = sample.get("embeddings")
        if embeddings is not None and len(embeddings):
            stored = len(embeddings[0])
    if stored is not None and int(stored) != dimension:
        raise BackendError(
            f"{where}: embedding dimension mismatch: collection {name} holds "
            f"{stored}-dimension embeddings but the embedder makes {dimension}-dimension ones: "
            f"use the embedder that filled it ({stored} dimensions), or another collection "
            f"({ENV_COLLECTION}), or delete collection {name} to start afresh"
        )
