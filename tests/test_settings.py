"""Settings precedence: flag > environment > .env > config file > default."""

from __future__ import annotations

import pytest

from memchat.engine import ConfigError
from memchat.settings import Settings


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults(tmp_path) -> None:
    s = Settings.load({}, environ={}, cwd=tmp_path)
    assert (s.memory, s.model, s.streaming, s.soft_delete, s.preload, s.user, s.app, s.limit) == (
        "sqlite",
        "deepseek-v4-flash",
        True,
        False,
        0,
        "user",
        "memory-chat",
        1000,
    )
    assert s.offline and s.offline_reason == "no OPENAI_API_KEY is set"


def test_each_layer_overrides_the_one_below(tmp_path) -> None:
    config = write(
        tmp_path / "memchat.toml",
        """
[memory]
backend = "inmemory"
soft_delete = true
[session]
user = "from-config"
app = "config-app"
[model]
name = "config-model"
preload = 3
[env]
SQLITE_MEMORY_DSN = "sqlite:///config.db"
""",
    )
    write(tmp_path / ".env", "MEMCHAT_USER=from-dotenv\nMEMCHAT_PRELOAD=5\nSQLITE_MEMORY_DSN=dotenv.db\n")
    s = Settings.load({"preload": 7}, environ={"MEMCHAT_USER": "from-env"}, cwd=tmp_path)
    assert s.memory == "inmemory" and s.soft_delete is True  # config file
    assert s.app == "config-app" and s.model == "config-model"
    assert s.user == "from-env"  # environment beats .env
    assert s.preload == 7  # flag beats everything
    assert s.env["SQLITE_MEMORY_DSN"] == "dotenv.db"  # .env beats the config file's [env]
    assert s.sources["user"] == "environment MEMCHAT_USER"
    assert config.exists()


def test_an_explicit_env_file_and_a_missing_one(tmp_path) -> None:
    env_file = write(tmp_path / "custom.env", "OPENAI_API_KEY=sk-from-file\nMEMCHAT_MEMORY=inmemory\n")
    s = Settings.load({}, environ={}, env_file=env_file, cwd=tmp_path)
    assert s.api_key == "sk-from-file" and not s.offline and s.memory == "inmemory"
    assert "sk-from-file" not in repr(s) and s.describe()["api_key"] == "***"
    with pytest.raises(ConfigError, match="does not exist"):
        Settings.load({}, environ={}, env_file=tmp_path / "nope.env", cwd=tmp_path)


def test_offline_model_flag_wins_over_a_key(tmp_path) -> None:
    s = Settings.load({"model": "offline"}, environ={"OPENAI_API_KEY": "sk-x"}, cwd=tmp_path)
    assert s.offline and s.offline_reason == "chosen with --model offline"


def test_the_references_model_name_variable_is_honoured(tmp_path) -> None:
    assert Settings.load({}, environ={"MODEL_NAME": "gpt-4o-mini"}, cwd=tmp_path).model == "gpt-4o-mini"
    both = {"MODEL_NAME": "gpt-4o-mini", "MEMCHAT_MODEL": "deepseek-chat"}
    assert Settings.load({}, environ=both, cwd=tmp_path).model == "deepseek-chat"


@pytest.mark.parametrize(
    ("environ", "needle"),
    [
        ({"MEMCHAT_STREAMING": "maybe"}, "MEMCHAT_STREAMING must be true or false"),
        ({"MEMCHAT_PRELOAD": "lots"}, "MEMCHAT_PRELOAD must be a whole number"),
        ({"MEMCHAT_MEMORY": "mongo"}, "unknown memory backend"),
        ({"MEMCHAT_ENABLE_TOOLS": "memory_add,memory_bogus"}, "unknown tool 'memory_bogus'"),
    ],
)
def test_bad_values_are_one_clear_error(tmp_path, environ, needle) -> None:
    with pytest.raises(ConfigError, match=needle):
        Settings.load({}, environ=environ, cwd=tmp_path)


def test_broken_config_file_names_the_file(tmp_path) -> None:
    write(tmp_path / "memchat.toml", "[memory\nbackend=")
    with pytest.raises(ConfigError, match=r"memchat\.toml is not valid TOML"):
        Settings.load({}, environ={}, cwd=tmp_path)


def test_tool_switches(tmp_path) -> None:
    s = Settings.load(
        {"enable_tools": ("memory_delete",), "disable_tools": ("memory_load",)}, environ={}, cwd=tmp_path
    )
    assert s.tool_settings().enabled == {"memory_delete": True, "memory_load": False}
    with pytest.raises(ConfigError, match="both enabled and disabled"):
        Settings.load(
            {"enable_tools": ("memory_load",), "disable_tools": ("memory_load",)}, environ={}, cwd=tmp_path
        )


def test_the_backend_timeout_from_each_layer(tmp_path) -> None:
    assert Settings.load({}, environ={}, cwd=tmp_path).timeout == 10.0
    write(tmp_path / "memchat.toml", '[memory]\ntimeout = "30s"\n')
    assert Settings.load({}, environ={}, cwd=tmp_path).timeout == 30.0
    s = Settings.load({}, environ={"MEMCHAT_TIMEOUT": "1m"}, cwd=tmp_path)
    assert s.timeout == 60.0 and s.sources["timeout"] == "environment MEMCHAT_TIMEOUT"
    assert Settings.load({"timeout": "500ms"}, environ={"MEMCHAT_TIMEOUT": "1m"}, cwd=tmp_path).timeout == 0.5


@pytest.mark.parametrize("value", ["0", "-3s", "soon", "nan"])
def test_a_timeout_that_is_not_a_positive_duration_is_one_clear_error(tmp_path, value) -> None:
    with pytest.raises(
        ConfigError, match=r"(--timeout must be a positive duration|MEMCHAT_TIMEOUT must be a duration)"
    ):
        Settings.load({}, environ={"MEMCHAT_TIMEOUT": value}, cwd=tmp_path)


def test_the_documented_config_file_states_the_timeout_default() -> None:
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).parents[1] / "config" / "memchat.toml").read_text())
    assert config["memory"]["timeout"] == "10s"
    assert "MEMCHAT_TIMEOUT=10s" in (Path(__file__).parents[1] / "config" / ".env.example").read_text()


def test_search_and_embedder_are_declared_once(tmp_path) -> None:
    from memchat.settings import CONFIG_KEYS, ENV_NAMES

    s = Settings.load({}, environ={}, cwd=tmp_path)
    assert (s.search, s.embedder) == ("hybrid", "default")
    assert ENV_NAMES["search"] == "MEMCHAT_SEARCH" and ENV_NAMES["embedder"] == "MEMCHAT_EMBEDDER"
    assert CONFIG_KEYS[("memory", "search")] == "search" and CONFIG_KEYS[("memory", "embedder")] == "embedder"
    assert "keyword" in Settings.help_for("search") and "MEMCHAT_SEARCH" in Settings.help_for("search")
    write(tmp_path / "memchat.toml", '[memory]\nsearch = "semantic"\nembedder = "minilm"\n')
    s = Settings.load({}, environ={}, cwd=tmp_path)
    assert (s.search, s.embedder) == ("semantic", "minilm")
    s = Settings.load({"search": "keyword"}, environ={"MEMCHAT_EMBEDDER": "E5"}, cwd=tmp_path)
    assert (s.search, s.embedder) == ("keyword", "e5")


def test_an_embedding_model_implies_openai_unless_an_embedder_is_given(tmp_path) -> None:
    environ = {"OPENAI_EMBEDDING_MODEL": "text-embedding-3-small"}
    assert Settings.load({}, environ=environ, cwd=tmp_path).embedder == "openai"
    environ["MEMCHAT_EMBEDDER"] = "none"
    assert Settings.load({}, environ=environ, cwd=tmp_path).embedder == "none"


@pytest.mark.parametrize(
    ("flags", "environ", "config", "needle"),
    [
        ({"search": "fuzzy"}, {}, "", "--search is 'fuzzy', which is not a search mode: choose hybrid"),
        ({}, {"MEMCHAT_SEARCH": "dense"}, "", "MEMCHAT_SEARCH is 'dense', which is not a search mode"),
        ({}, {}, '[memory]\nsearch = "bm25"\n', "[memory] search in the config file is 'bm25'"),
        ({}, {"MEMCHAT_EMBEDDER": "bert"}, "", "choose default (the default), e5, minilm, openai or none"),
    ],
)
def test_a_bad_search_mode_or_embedder_is_one_sentence(tmp_path, flags, environ, config, needle) -> None:
    if config:
        write(tmp_path / "memchat.toml", config)
    with pytest.raises(ConfigError) as caught:
        Settings.load(flags, environ=environ, cwd=tmp_path)
    assert needle in str(caught.value)
