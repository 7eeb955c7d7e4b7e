"""Storage backends and the registry that builds them by name.

A backend's module (and so its driver) is imported only when it is chosen:
``import backends`` costs nothing, and a missing optional driver is one clear
error naming the ``pip install`` that fixes it.
"""

from __future__ import annotations

import importlib
from typing import Any

from memchat.engine.model import ConfigError

from .base import Capabilities, Store, Transaction

#: name → (``module:Class``, the extra that installs its driver or None).
REGISTRY: dict[str, tuple[str, str | None]] = {
    "inmemory": ("backends.inmemory:InMemoryStore", None),
    "sqlite": ("backends.sqlite:SQLiteStore", None),
    "sqlitevec": ("backends.sqlitevec:SQLiteVecStore", "sqlitevec"),
    "redis": ("backends.redis:RedisStore", "redis"),
    "mysql": ("backends.mysql:MySQLStore", "mysql"),
    "mysqlvec": ("backends.mysqlvec:MySQLVecStore", "mysqlvec"),
    "postgres": ("backends.postgres:PostgresStore", "postgres"),
    "pgvector": ("backends.pgvector:PgVectorStore", "pgvector"),
    "chromadb": ("backends.chromadb:ChromaStore", "chroma"),
}

BACKEND_NAMES: tuple[str, ...] = tuple(REGISTRY)

#: The nine backends of the reference, in its order; those not in REGISTRY yet
#: are named as not available rather than unknown.
REFERENCE_BACKENDS = (
    "inmemory", "sqlite", "sqlitevec", "redis", "mysql", "mysqlvec", "postgres", "pgvector", "chromadb",
)  # fmt: skip


def check_name(name: str) -> str:
    """The normalised backend name, or a ConfigError naming the valid ones.
    Imports nothing."""
    normalised = name.strip().lower() if isinstance(name, str) else ""
    if normalised in REGISTRY:
        return normalised
    if normalised in REFERENCE_BACKENDS:
        raise ConfigError(
            f"the {normalised} backend is not available in this version yet: "
            f"choose one of {', '.join(BACKEND_NAMES)}"
        )
    raise ConfigError(f"unknown memory backend {name!r}: choose one of {', '.join(BACKEND_NAMES)}")


def store_class(name: str) -> type[Store]:
    """The Store class registered under ``name`` (imports its module now)."""
    name = check_name(name)
    target, extra = REGISTRY[name]
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if extra is None or (exc.name or "").startswith("backends"):
            raise
        raise ConfigError(
            f"the {name} backend needs the {exc.name} package: pip install 'memchat[{extra}]'"
        ) from exc
    return getattr(module, class_name)


def create(name: str, **options: Any) -> Store:
    """Build (but do not yet connect) the store registered under ``name``.

    Options not given are read from the environment variables the reference
    uses (e.g. ``SQLITE_MEMORY_DSN``), then from the backend's defaults.
    """
    return store_class(name)(**options)


__all__ = [
    "BACKEND_NAMES",
    "REFERENCE_BACKENDS",
    "REGISTRY",
    "Capabilities",
    "Store",
    "Transaction",
    "check_name",
    "create",
    "store_class",
]
