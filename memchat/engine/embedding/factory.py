"""Choosing an embedder: by name, or from MEMCHAT_EMBEDDER; one instance of each
offline model per process."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any, TypeVar

from ..model import ConfigError
from ..pieces import PieceVectors
from .default import DefaultEmbedder
from .e5 import E5Embedder
from .minilm import ENV_MODEL_PATH, ENV_TOKENIZER_PATH, LocalEmbedder
from .openai_compatible import OpenAIEmbedder
from .protocol import EMBEDDER_CHOICES, ENV_EMBEDDER, Embedder

_lock = threading.Lock()
#: One instance per model class in the process: a model is loaded once, however many services.
_shared: dict[type, Any] = {}
_default: DefaultEmbedder | None = None

E = TypeVar("E")


def _shared_instance(cls: type[E]) -> E:
    with _lock:
        if cls not in _shared:
            _shared[cls] = cls()
        return _shared[cls]


def _e5() -> E5Embedder:
    return _shared_instance(E5Embedder)


def _minilm() -> LocalEmbedder:
    return _shared_instance(LocalEmbedder)


def _pieces() -> PieceVectors:
    return _shared_instance(PieceVectors)


def default_embedder() -> DefaultEmbedder:
    """The process-wide offline default (each model in memory once, however many
    services). Constructing it loads nothing."""
    global _default
    e5, pieces = _e5(), _pieces()
    with _lock:
        if _default is None:
            _default = DefaultEmbedder(e5, pieces)
        return _default


#: Names create_embedder accepts besides EMBEDDER_CHOICES (older spellings).
_ALIASES = {
    "": "default",
    "local": "default",
    "offline": "default",
    "multilingual-e5-small": "e5",
    "all-minilm-l6-v2": "minilm",
    "openai-compatible": "openai",
    "off": "none",
}


def _minilm_env_is_the_process_env(env: Mapping[str, str]) -> bool:
    """MiniLM reads two path variables; the shared instance reads os.environ's."""
    return env is os.environ or all(
        env.get(name) == os.environ.get(name) for name in (ENV_MODEL_PATH, ENV_TOKENIZER_PATH)
    )


def create_embedder(
    kind: str | None = None, *, env: Mapping[str, str] | None = None, **options: Any
) -> Embedder | None:
    """The embedder named ``kind``, one of :data:`EMBEDDER_CHOICES`:

    * ``"default"`` — :class:`DefaultEmbedder` (e5 vectors, static MiniLM word pieces);
    * ``"e5"`` — :class:`E5Embedder` alone (no token re-rank);
    * ``"minilm"`` — :class:`LocalEmbedder`, the default before issue 11 (English only);
    * ``"openai"`` — :class:`OpenAIEmbedder`; ``options`` go to it (``model=`` names
      the model, as the per-backend ``*_EMBEDDER_MODEL`` variables do);
    * ``"none"`` — no embedder: returns None (keyword search only).

    With no ``kind``, ``MEMCHAT_EMBEDDER`` decides (see :func:`embedder_from_env`).
    The offline ones are process-wide instances unless ``options`` ask for another.
    An unknown name is a ConfigError listing the valid ones.
    """
    env = os.environ if env is None else env
    if kind is None:
        return embedder_from_env(env, **options)
    choice = kind.strip().lower()
    choice = _ALIASES.get(choice, choice)
    if choice == "none":
        return None
    if choice == "openai":
        return OpenAIEmbedder(env=env, **options)
    if choice == "e5":
        return _e5() if not options else E5Embedder(**options)
    if choice == "minilm":
        if not options and _minilm_env_is_the_process_env(env):
            return _minilm()
        return LocalEmbedder(env=env, **options)
    if choice == "default":
        if not options and _minilm_env_is_the_process_env(env):
            return default_embedder()
        unknown = set(options) - {"batch_size", "threads"}
        if unknown:
            raise TypeError(f"unexpected options for the default embedder: {', '.join(sorted(unknown))}")
        threads = options.get("threads")
        return DefaultEmbedder(E5Embedder(threads=threads), PieceVectors(env=env))
    raise ConfigError(f"unknown embedder {kind!r}: choose one of {', '.join(EMBEDDER_CHOICES)}")


def embedder_from_env(env: Mapping[str, str] | None = None, **options: Any) -> Embedder | None:
    """The embedder ``MEMCHAT_EMBEDDER`` names (:data:`EMBEDDER_CHOICES`); unset or
    empty: ``openai`` when ``OPENAI_EMBEDDING_MODEL`` is set, else ``default``.
    None for ``none``: the caller searches by keyword only (and says so once)."""
    env = os.environ if env is None else env
    chosen = (env.get(ENV_EMBEDDER) or "").strip()
    if not chosen:
        chosen = "openai" if (env.get("OPENAI_EMBEDDING_MODEL") or "").strip() else "default"
    elif chosen.lower() not in EMBEDDER_CHOICES:
        raise ConfigError(
            f"{ENV_EMBEDDER}={chosen!r} is not an embedder: choose one of {', '.join(EMBEDDER_CHOICES)}"
        )
    return create_embedder(chosen, env=env, **options)
