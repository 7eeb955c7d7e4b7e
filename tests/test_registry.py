"""The backend registry and the engine's import hygiene."""

from __future__ import annotations

import subprocess
import sys

import pytest

import backends
from memchat.engine import ConfigError


def test_unknown_backend_lists_the_valid_names() -> None:
    with pytest.raises(ConfigError) as info:
        backends.create("mongo")
    message = str(info.value)
    assert "unknown memory backend 'mongo'" in message
    for name in backends.BACKEND_NAMES:
        assert name in message


def test_backend_names_are_case_and_space_tolerant() -> None:
    assert backends.create(" InMemory ").name == "inmemory"


def test_importing_the_engine_loads_no_ui_cli_llm_or_driver() -> None:
    code = (
        "import sys, backends, memchat.engine\n"
        "heavy = {'textual', 'typer', 'openai', 'sqlalchemy', 'aiosqlite', 'jieba', 'redis', 'rich'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_backend_module_is_imported_only_when_chosen() -> None:
    code = (
        "import sys, backends\n"
        "assert 'backends.sqlite' not in sys.modules\n"
        "backends.create('inmemory')\n"
        "assert 'backends.sqlite' not in sys.modules and 'sqlalchemy' not in sys.modules\n"
        "backends.create('sqlite', dsn='sqlite://')\n"
        "assert 'backends.sqlite' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
