"""config/memchat.toml and config/.env.example document every setting of
memchat/settings.py, with the defaults the code really has.

Both are generated from the declarations (`python -m memchat.settings_docs`;
tests/test_settings_docs.py fails when they are stale); these tests check that
what is generated really is what the code reads."""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from memchat.settings import BACKEND_VARIABLES, CONFIG_KEYS, ENV_NAMES, Settings

CONFIG = Path(__file__).resolve().parents[1] / "config"
TOML = CONFIG / "memchat.toml"
ENV_EXAMPLE = CONFIG / ".env.example"
#: Read by settings.py besides the fields' own variables.
EXTRA_VARIABLES = ("MODEL_NAME", "MEMCHAT_CONFIG")
BACKEND_VARS = [name for names in BACKEND_VARIABLES.values() for name in names]


@pytest.fixture(autouse=True)
def no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own ~/.config/memchat/memchat.toml must not count."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.mark.parametrize("variable", sorted({*ENV_NAMES.values(), *EXTRA_VARIABLES, *BACKEND_VARS}))
def test_every_variable_is_in_the_env_example(variable: str) -> None:
    text = ENV_EXAMPLE.read_text(encoding="utf-8")
    assert re.search(rf"^(?:# )?{variable}=", text, re.M), f"{variable} is missing from {ENV_EXAMPLE}"


@pytest.mark.parametrize(("section", "key"), sorted(CONFIG_KEYS))
def test_every_config_key_is_in_the_toml_file(section: str, key: str) -> None:
    config = tomllib.loads(TOML.read_text(encoding="utf-8"))
    assert key in config.get(section, {}), f"[{section}] {key} is missing from {TOML}"


@pytest.mark.parametrize("variable", BACKEND_VARS)
def test_every_backend_variable_is_in_the_toml_env_table(variable: str) -> None:
    env_table = TOML.read_text(encoding="utf-8").split("\n[env]\n", 1)[1]
    assert re.search(rf"^# {variable} = ", env_table, re.M), f"{variable} is missing from [env] in {TOML}"


def test_the_toml_file_shows_the_real_defaults(tmp_path: Path) -> None:
    """Loading the documented file changes nothing: every value in it is the default."""
    documented = Settings.load(environ={}, config_file=TOML, cwd=tmp_path)
    defaults = Settings.load(environ={}, cwd=tmp_path)
    for f in fields(Settings):
        if f.name in ("env", "sources", "preferences_file"):  # where it was loaded from, not a value
            continue
        assert getattr(documented, f.name) == getattr(defaults, f.name), f.name


def test_the_env_example_shows_the_real_defaults(tmp_path: Path) -> None:
    """Its uncommented lines, as a .env file, are the defaults too."""
    dotenv = tmp_path / ".env"
    dotenv.write_text(ENV_EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    documented = Settings.load(environ={}, cwd=tmp_path)
    (tmp_path / "elsewhere").mkdir()
    defaults = Settings.load(environ={}, cwd=tmp_path / "elsewhere")
    for f in fields(Settings):
        if f.name not in ("env", "sources", "preferences_file"):
            assert getattr(documented, f.name) == getattr(defaults, f.name), f.name
