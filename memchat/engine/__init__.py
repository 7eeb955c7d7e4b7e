"""The memory engine: a library with no UI, CLI or LLM-client imports.

from backends import create
from memchat.engine import MemoryService, UserKey

async with MemoryService(create("sqlite"), soft_delete=True) as svc:
    entry = await svc.add(UserKey("my-app", "alice"), "Alice likes green tea", topics=["drinks"])

The names below are imported on first use (PEP 562), so importing one engine
module (a backend importing ``memchat.engine.model``) does not load the
service, search and embedding code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ids import memory_id
    from .model import (
        SEARCH_MODES,
        BackendError,
        ConfigError,
        Entry,
        InvalidKeyError,
        InvalidMemoryError,
        MemchatError,
        Memory,
        MemoryConflictError,
        MemoryIdCollisionError,
        MemoryLimitError,
        MemoryNotFoundError,
        Metadata,
        SearchOptions,
        UpdateResult,
        UserKey,
    )
    from .service import DEFAULT_MEMORY_LIMIT, MemoryService
    from .vectors import NO_EMBEDDER, EmbeddingProgress

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "NO_EMBEDDER",
    "SEARCH_MODES",
    "BackendError",
    "ConfigError",
    "EmbeddingProgress",
    "Entry",
    "InvalidKeyError",
    "InvalidMemoryError",
    "MemchatError",
    "Memory",
    "MemoryConflictError",
    "MemoryIdCollisionError",
    "MemoryLimitError",
    "MemoryNotFoundError",
    "MemoryService",
    "Metadata",
    "SearchOptions",
    "UpdateResult",
    "UserKey",
    "memory_id",
]

#: The engine module of each public name not defined in ``.model``.
_HOMES = {
    "memory_id": "ids",
    "DEFAULT_MEMORY_LIMIT": "service",
    "MemoryService": "service",
    "NO_EMBEDDER": "vectors",
    "EmbeddingProgress": "vectors",
}


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = _HOMES.get(name, "model")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
