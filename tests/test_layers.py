"""The layers (issue 13): the engine owns the Store protocol, and importing a layer
loads only what it needs. import-linter (pyproject.toml, run by .ci/run) holds who
may import whom; these check what a user notices: what an import costs."""

from __future__ import annotations

import subprocess
import sys

import pytest

import memchat.engine as engine


def _modules_after(statement: str) -> set[str]:
    """The memchat and backends modules a fresh interpreter has loaded after ``statement``."""
    listing = "print(' '.join(m for m in sys.modules if m.startswith(('memchat', 'backends'))))"
    code = f"{statement}\nimport sys\n{listing}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_importing_the_backends_registry_loads_no_service_search_or_embedding() -> None:
    loaded = _modules_after("import backends")
    assert "memchat.engine.store" in loaded
    heavy = {"memchat.engine.service", "memchat.engine.search", "memchat.engine.embedding"}
    assert not loaded & heavy, sorted(loaded & heavy)


def test_a_backend_module_loads_no_service() -> None:
    loaded = _modules_after("import backends.inmemory")
    assert "memchat.engine.service" not in loaded


def test_every_public_engine_name_resolves_to_its_defining_module() -> None:
    from memchat.engine import ids, model, service, vectors

    for name in engine.__all__:
        value = getattr(engine, name)
        homes = [m for m in (ids, model, service, vectors) if getattr(m, name, None) is value]
        assert homes, name
    assert set(engine.__all__) <= set(dir(engine))


def test_an_unknown_engine_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'MemoryServise'"):
        _ = engine.MemoryServise


def test_backends_base_is_the_engine_protocol() -> None:
    import backends.base
    import memchat.engine.store

    for name in ("Store", "Transaction", "VectorStore", "Capabilities"):
        assert getattr(backends.base, name) is getattr(memchat.engine.store, name)


def test_the_layer_contract_names_every_cli_module() -> None:
    """import-linter has no wildcard for ``memchat.cli*``: a new CLI module must be
    added to the contract by name, or the engine could import it unnoticed."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text())
    contract = next(
        c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "engine-backends-below-the-app"
    )
    cli_modules = {f"memchat.{p.stem}" for p in (root / "memchat").glob("cli*.py")}
    assert cli_modules <= set(contract["forbidden_modules"]), sorted(
        cli_modules - set(contract["forbidden_modules"])
    )
