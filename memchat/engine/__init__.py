"""The memory engine: a library with no UI, CLI or LLM-client imports.

from backends import create
from memchat.engine import MemoryService, UserKey

async with MemoryService(create("sqlite"), soft_delete=True) as svc:
    entry = await svc.add(UserKey("my-app", "alice"), "Alice likes green tea", topics=["drinks"])
"""

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
