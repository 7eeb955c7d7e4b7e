"""Helpers shared by the test modules."""

from __future__ import annotations

import os

import pytest

REQUIRE_SERVICES = os.environ.get("MEMCHAT_REQUIRE_SERVICES", "") not in ("", "0", "false", "no")


def require(condition: bool, reason: str) -> None:
    """Skip (or fail under MEMCHAT_REQUIRE_SERVICES) when ``condition`` is false."""
    if condition:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"required service unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


def clean_cli_environment(tmp_path, monkeypatch, **extra: str) -> dict[str, str]:
    """For running memchat's CLI in a test: SQLite in ``tmp_path``, no config
    file, no MEMCHAT_*/OPENAI_*/SQLITE* variables from the developer's shell,
    plus ``extra``; the working directory is ``tmp_path``. The values set."""
    for name in list(os.environ):
        if name.startswith(("MEMCHAT_", "OPENAI_", "SQLITE")):
            monkeypatch.delenv(name)
    values = {
        "SQLITE_MEMORY_DSN": str(tmp_path / "memories.db"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        **extra,
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    return values
