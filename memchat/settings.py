"""One Settings object: flag > environment > .env > config file > default.

Backend variables (``SQLITE_MEMORY_DSN``, ``REDIS_ADDR``, ``PG_HOST``…) are
not fields here: they travel in ``Settings.env``, the merged environment
(real environment over ``.env`` over the config file's ``[env]`` table), which
is what the backend factories read.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from memchat.engine.model import ConfigError

DEFAULT_MODEL = "deepseek-v4-flash"
OFFLINE_MODEL = "offline"
CONFIG_NAME = "memchat.toml"

#: Every backend variable the reference's factory reads (listed in --help).
BACKEND_VARIABLES: dict[str, tuple[str, ...]] = {
    "sqlite": ("SQLITE_MEMORY_DSN",),
    "sqlitevec": ("SQLITEVEC_MEMORY_DSN", "SQLITEVEC_EMBEDDER_MODEL"),
    "redis": ("REDIS_URL", "REDIS_ADDR"),
    "mysql": ("MYSQL_DSN", "MYSQL_HOST", "MYSQL_PORT", "MYSQL_USER", "MYSQL_PASSWORD", "MYSQL_DATABASE"),
    "mysqlvec": ("MYSQLVEC_HOST", "MYSQLVEC_PORT", "MYSQLVEC_USER", "MYSQLVEC_PASSWORD", "MYSQLVEC_DATABASE",
                 "MYSQLVEC_EMBEDDER_MODEL"),
    "postgres": ("POSTGRES_DSN", "PG_HOST", "PG_PORT", "PG_USER", "PG_PASSWORD", "PG_DATABASE", "PG_SSLMODE"),
    "pgvector": ("PGVECTOR_DSN", "PGVECTOR_HOST", "PGVECTOR_PORT", "PGVECTOR_USER", "PGVECTOR_PASSWORD",
                 "PGVECTOR_DATABASE", "PGVECTOR_EMBEDDER_MODEL"),
    "chromadb": ("CHROMA_BASE_URL", "CHROMA_COLLECTION", "CHROMA_EMBEDDER_MODEL", "CHROMA_API_KEY",
                 "CHROMA_BEARER_TOKEN", "CHROMA_TENANT", "CHROMA_DATABASE"),
    "embeddings": ("OPENAI_EMBEDDING_MODEL", "OPENAI_EMBEDDING_API_KEY", "OPENAI_EMBEDDING_BASE_URL"),
}  # fmt: skip

#: Settings field → environment variable.
ENV_NAMES = {
    "memory": "MEMCHAT_MEMORY",
    "model": "MEMCHAT_MODEL",
    "streaming": "MEMCHAT_STREAMING",
    "soft_delete": "MEMCHAT_SOFT_DELETE",
    "preload": "MEMCHAT_PRELOAD",
    "user": "MEMCHAT_USER",
    "app": "MEMCHAT_APP",
    "limit": "MEMCHAT_MEMORY_LIMIT",
    "enable_tools": "MEMCHAT_ENABLE_TOOLS",
    "disable_tools": "MEMCHAT_DISABLE_TOOLS",
    "api_key": "OPENAI_API_KEY",
    "base_url": "OPENAI_BASE_URL",
}

#: Config file (section, key) → Settings field.
CONFIG_KEYS = {
    ("memory", "backend"): "memory",
    ("memory", "soft_delete"): "soft_delete",
    ("memory", "limit"): "limit",
    ("session", "app"): "app",
    ("session", "user"): "user",
    ("model", "name"): "model",
    ("model", "base_url"): "base_url",
    ("model", "streaming"): "streaming",
    ("model", "preload"): "preload",
    ("tools", "enable"): "enable_tools",
    ("tools", "disable"): "disable_tools",
}


@dataclass(frozen=True)
class Settings:
    memory: str = "sqlite"
    model: str = DEFAULT_MODEL
    streaming: bool = True
    soft_delete: bool = False
    preload: int = 0
    user: str = "user"
    app: str = "memory-chat"
    limit: int = 1000
    enable_tools: tuple[str, ...] = ()
    disable_tools: tuple[str, ...] = ()
    api_key: str = field(default="", repr=False)
    base_url: str = ""
    plain: bool = False
    #: Merged environment handed to the backend factories and model clients.
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: Where values came from, for `memchat config` style diagnostics.
    sources: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def offline(self) -> bool:
        """No key (or ``--model offline``): use the rule-based offline model."""
        return self.model == OFFLINE_MODEL or not self.api_key

    @property
    def offline_reason(self) -> str:
        if self.model == OFFLINE_MODEL:
            return "chosen with --model offline"
        return "no OPENAI_API_KEY is set"

    @classmethod
    def load(
        cls,
        flags: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        env_file: str | os.PathLike[str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        cwd: Path | None = None,
    ) -> Settings:
        """Resolve every setting. ``flags`` holds only what was given on the
        command line (None values are ignored)."""
        environ = dict(os.environ if environ is None else environ)
        cwd = cwd or Path.cwd()
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}

        config = _read_config(Path(config_file) if config_file else _find_config(cwd, environ))
        merged_env: dict[str, str] = {k: str(v) for k, v in (config.get("env") or {}).items()}
        for (section, key), name in CONFIG_KEYS.items():
            if key in (config.get(section) or {}):
                values[name] = config[section][key]
                sources[name] = f"config file [{section}] {key}"

        dotenv_path = Path(env_file) if env_file else cwd / ".env"
        if env_file and not dotenv_path.is_file():
            raise ConfigError(f"--env-file {dotenv_path} does not exist: check the path")
        if dotenv_path.is_file():
            from dotenv import dotenv_values

            dotenv = {k: v for k, v in dotenv_values(dotenv_path).items() if v is not None}
            merged_env.update(dotenv)
            _apply_env(values, sources, dotenv, f"{dotenv_path.name} file")
        merged_env.update(environ)
        _apply_env(values, sources, environ, "environment")

        for name, value in (flags or {}).items():
            if value is not None and value != ():
                values[name] = value
                sources[name] = "command line"

        settings = cls(**{k: _coerce(k, v) for k, v in values.items()}, env=merged_env, sources=sources)
        return settings.validated()

    def validated(self) -> Settings:
        from backends import check_name

        name = check_name(self.memory)
        if self.preload < -1:
            raise ConfigError(
                f"preload must be -1 (all), 0 (off) or a number of memories, not {self.preload}"
            )
        if self.limit < 0:
            raise ConfigError(f"memory limit must be 0 (no limit) or more, not {self.limit}")
        from memchat.engine.tools import ALL_TOOLS

        for tool in (*self.enable_tools, *self.disable_tools):
            if tool not in ALL_TOOLS:
                raise ConfigError(f"unknown tool {tool!r}: choose from {', '.join(ALL_TOOLS)}")
        both = set(self.enable_tools) & set(self.disable_tools)
        if both:
            raise ConfigError(f"{', '.join(sorted(both))} is both enabled and disabled: pick one")
        return replace(self, memory=name)

    def tool_settings(self) -> Any:
        from memchat.engine.tools import ToolSettings

        enabled = {name: True for name in self.enable_tools} | {name: False for name in self.disable_tools}
        return ToolSettings(enabled=enabled)

    def describe(self) -> dict[str, Any]:
        """Every field with its value (the key masked), for diagnostics."""
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("env", "sources")}
        if shown["api_key"]:
            shown["api_key"] = "***"
        return shown


def _find_config(cwd: Path, environ: Mapping[str, str]) -> Path | None:
    explicit = environ.get("MEMCHAT_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"MEMCHAT_CONFIG points to {path}, which does not exist")
        return path
    candidates = [cwd / CONFIG_NAME]
    try:
        from platformdirs import user_config_path

        candidates.append(user_config_path("memchat", appauthor=False) / CONFIG_NAME)
    except Exception:  # platformdirs missing is not fatal: the local file still counts
        pass
    return next((p for p in candidates if p.is_file()), None)


def _read_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}): fix or remove it") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc


def _apply_env(values: dict[str, Any], sources: dict[str, str], env: Mapping[str, str], origin: str) -> None:
    for name, variable in ENV_NAMES.items():
        if env.get(variable, "") != "":
            values[name] = env[variable]
            sources[name] = f"{origin} {variable}"
    name_override = env.get("MODEL_NAME")  # the reference's runner variable
    if name_override and ("model" not in values or sources.get("model", "").startswith("config")):
        values["model"] = name_override
        sources["model"] = f"{origin} MODEL_NAME"


_BOOLS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def _coerce(name: str, value: Any) -> Any:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    if kind == "bool" and not isinstance(value, bool):
        parsed = _BOOLS.get(str(value).strip().lower())
        if parsed is None:
            raise ConfigError(f"{_label(name)} must be true or false, not {value!r}")
        return parsed
    if kind == "int" and not isinstance(value, int):
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{_label(name)} must be a whole number, not {value!r}") from None
    if kind == "tuple[str, ...]":
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(i.strip() for i in items if str(i).strip())
    if kind == "str":
        return str(value).strip()
    return value


def _label(name: str) -> str:
    return ENV_NAMES.get(name, name)
