"""One Settings object: flag > environment > .env > config file > default.

Backend variables (``SQLITE_MEMORY_DSN``, ``REDIS_ADDR``, ``PG_HOST``…) are
not fields here: they travel in ``Settings.env``, the merged environment
(real environment over ``.env`` over the config file's ``[env]`` table), which
is what the backend factories read.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from memchat.engine.embedding import EMBEDDER_CHOICES
from memchat.engine.model import SEARCH_MODES, ConfigError

DEFAULT_MODEL = "deepseek-v4-flash"
OFFLINE_MODEL = "offline"
CONFIG_NAME = "memchat.toml"

#: Every backend variable the reference's factory reads (listed in --help).
BACKEND_VARIABLES: dict[str, tuple[str, ...]] = {
    "sqlite": ("SQLITE_MEMORY_DSN",),
    "sqlitevec": ("SQLITEVEC_MEMORY_DSN", "SQLITEVEC_EMBEDDER_MODEL", "SQLITEVEC_DIMENSION"),
    "redis": ("REDIS_URL", "REDIS_ADDR"),
    "mysql": ("MYSQL_DSN", "MYSQL_HOST", "MYSQL_PORT", "MYSQL_USER", "MYSQL_PASSWORD", "MYSQL_DATABASE"),
    "mysqlvec": ("MYSQLVEC_DSN", "MYSQLVEC_HOST", "MYSQLVEC_PORT", "MYSQLVEC_USER", "MYSQLVEC_PASSWORD",
                 "MYSQLVEC_DATABASE", "MYSQLVEC_EMBEDDER_MODEL", "MYSQLVEC_DIMENSION"),
    "postgres": ("POSTGRES_DSN", "PG_HOST", "PG_PORT", "PG_USER", "PG_PASSWORD", "PG_DATABASE", "PG_SSLMODE"),
    "pgvector": ("PGVECTOR_DSN", "PGVECTOR_HOST", "PGVECTOR_PORT", "PGVECTOR_USER", "PGVECTOR_PASSWORD",
                 "PGVECTOR_DATABASE", "PGVECTOR_SSLMODE", "PGVECTOR_EMBEDDER_MODEL"),
    "chromadb": ("CHROMA_BASE_URL", "CHROMA_PATH", "CHROMA_COLLECTION", "CHROMA_EMBEDDER_MODEL",
                 "CHROMA_API_KEY", "CHROMA_BEARER_TOKEN", "CHROMA_TENANT", "CHROMA_DATABASE"),
    "embeddings": ("OPENAI_EMBEDDING_MODEL", "OPENAI_EMBEDDING_API_KEY", "OPENAI_EMBEDDING_BASE_URL"),
}  # fmt: skip

#: Options that only mean something in auto mode (a flag for them without --extract is an error).
EXTRACTION_FLAGS = {
    "extract_model": "--extract-model",
    "extract_every": "--extract-every",
    "extract_interval": "--extract-interval",
    "update_policy": "--update-policy",
    "workers": "--workers",
    "queue_size": "--queue-size",
    "job_timeout": "--job-timeout",
}
#: Fields kept exactly as given (user and app name who owns the memories).
EXACT_STRINGS = {"user", "app"}
#: Fields holding seconds, given as 90, "90s", "3m", "1h30m"…
DURATIONS = {"extract_interval", "job_timeout", "timeout"}


def _setting(
    default: Any, *, env: str = "", config: tuple[str, str] | None = None, help: str = "", flag: str = ""
) -> Any:
    """Declare a setting once: its default, environment variable, config file
    key ``(section, key)``, command-line flag and help (shown by ``--help``)."""
    return field(default=default, metadata={"env": env, "config": config, "help": help, "flag": flag})


@dataclass(frozen=True)
class Settings:
    memory: str = _setting("sqlite", env="MEMCHAT_MEMORY", config=("memory", "backend"), flag="--memory")
    model: str = _setting(DEFAULT_MODEL, env="MEMCHAT_MODEL", config=("model", "name"), flag="--model")
    streaming: bool = _setting(True, env="MEMCHAT_STREAMING", config=("model", "streaming"))
    soft_delete: bool = _setting(False, env="MEMCHAT_SOFT_DELETE", config=("memory", "soft_delete"))
    preload: int = _setting(0, env="MEMCHAT_PRELOAD", config=("model", "preload"), flag="--preload")
    user: str = _setting("user", env="MEMCHAT_USER", config=("session", "user"), flag="--user")
    app: str = _setting("memory-chat", env="MEMCHAT_APP", config=("session", "app"), flag="--app")
    limit: int = _setting(1000, env="MEMCHAT_MEMORY_LIMIT", config=("memory", "limit"))
    enable_tools: tuple[str, ...] = _setting((), env="MEMCHAT_ENABLE_TOOLS", config=("tools", "enable"))
    disable_tools: tuple[str, ...] = _setting((), env="MEMCHAT_DISABLE_TOOLS", config=("tools", "disable"))
    api_key: str = field(default="", repr=False, metadata={"env": "OPENAI_API_KEY"})
    base_url: str = _setting("", env="OPENAI_BASE_URL", config=("model", "base_url"))
    plain: bool = False
    #: ``--resume`` / ``-c``: continue the most recent saved session.
    resume: bool = False
    #: ``--session ID``: continue this saved session.
    session: str = ""
    #: Estimated tokens of a resumed session's history sent to the model (the newest whole turns).
    history_tokens: int = _setting(
        24_000,
        env="MEMCHAT_HISTORY_TOKENS",
        config=("session", "history_tokens"),
        help="Estimated tokens of a resumed session's history given to the model (default 24000).",
    )
    #: How memories are ranked, for every search (tool, preload, CLI, TUI filter).
    search: str = _setting(
        SEARCH_MODES[0],
        env="MEMCHAT_SEARCH",
        config=("memory", "search"),
        flag="--search",
        help="How memories are found: hybrid (meaning and keywords, default), semantic (meaning only) "
        "or keyword (shared words only, the reference's ranking).",
    )
    #: What turns memories into vectors for semantic search ("none": keywords only).
    embedder: str = _setting(
        EMBEDDER_CHOICES[0],
        env="MEMCHAT_EMBEDDER",
        config=("memory", "embedder"),
        help="Embedding model for semantic search: default (offline multilingual-e5-small), e5, minilm "
        "(offline, English), openai (OPENAI_EMBEDDING_MODEL; chosen when that is set) or none "
        "(keyword search only).",
    )
    #: Auto mode: a background extractor makes the memories (the agent only searches).
    extract: bool = _setting(False, env="MEMCHAT_EXTRACT", config=("extraction", "enabled"))
    #: The extractor's model ("" = the chat model; "offline" = the rule-based extractor).
    extract_model: str = _setting("", env="MEMCHAT_EXTRACT_MODEL", config=("extraction", "model"))
    #: Extract once at least this many new messages are pending (0 = after every turn).
    extract_every: int = _setting(0, env="MEMCHAT_EXTRACT_EVERY", config=("extraction", "every"))
    #: Extract once this many seconds passed since the last extraction (0 = off).
    extract_interval: float = _setting(0.0, env="MEMCHAT_EXTRACT_INTERVAL", config=("extraction", "interval"))
    #: With both extract_every and extract_interval: "any" (either) or "all" (both).
    extract_match: str = _setting("any", env="MEMCHAT_EXTRACT_MATCH", config=("extraction", "match"))
    update_policy: str = _setting(
        "merge_similar", env="MEMCHAT_UPDATE_POLICY", config=("extraction", "update_policy")
    )
    workers: int = _setting(1, env="MEMCHAT_EXTRACT_WORKERS", config=("extraction", "workers"))
    queue_size: int = _setting(10, env="MEMCHAT_EXTRACT_QUEUE_SIZE", config=("extraction", "queue_size"))
    job_timeout: float = _setting(
        30.0, env="MEMCHAT_EXTRACT_JOB_TIMEOUT", config=("extraction", "job_timeout")
    )
    #: Seconds a memory backend may take to answer (connecting, each call, lock
    #: waits) before the call fails with a clear error.
    timeout: float = _setting(10.0, env="MEMCHAT_TIMEOUT", config=("memory", "timeout"), flag="--timeout")
    #: Tools shown to the model in auto mode besides memory_search (e.g. memory_add).
    expose_tools: tuple[str, ...] = _setting((), env="MEMCHAT_EXPOSE_TOOLS", config=("tools", "expose"))
    #: Where `memchat mcp` keeps its HTTP bearer tokens (hashed); "" = the user data folder.
    mcp_tokens: str = _setting(
        "",
        env="MEMCHAT_MCP_TOKENS",
        config=("mcp", "tokens"),
        help="The MCP server's token file (default: mcp-tokens.json in the user data folder, "
        "beside the default SQLite database).",
    )
    #: The TUI's colour theme ("" = Textual's default); remembered when changed in the app.
    theme: str = _setting("", env="MEMCHAT_THEME", config=("tui", "theme"))
    #: Tool-call panels in the TUI: "compact" (one line each, Enter opens one) or "expanded".
    tool_panels: str = _setting("compact", env="MEMCHAT_TOOL_PANELS", config=("tui", "tool_panels"))
    #: The config file the TUI writes run-time choices to (theme, streaming, tool
    #: panels): the one in effect, else the user's; "" (tests, the library) = none.
    preferences_file: str = field(default="", repr=False)
    #: Merged environment handed to the backend factories and model clients.
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: Where values came from, for `memchat config` style diagnostics.
    sources: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def help_for(cls, name: str) -> str:
        """The help text declared with the setting, naming its variable and config key."""
        meta = _META[name]
        where = [meta["env"]] if meta["env"] else []
        if meta["config"]:
            where.append("[{}] {} in memchat.toml".format(*meta["config"]))
        return meta["help"] + (f" Also {' or '.join(where)}." if where else "")

    @property
    def offline(self) -> bool:
        """No key (or ``--model offline``): use the rule-based offline model."""
        return self.model == OFFLINE_MODEL or not self.api_key

    @property
    def extract_offline(self) -> bool:
        """The background extractor is the rule-based one (no key, or chosen)."""
        if self.extract_model == OFFLINE_MODEL or not self.api_key:
            return True
        return not self.extract_model and self.model == OFFLINE_MODEL

    @property
    def extraction_model_name(self) -> str:
        return OFFLINE_MODEL if self.extract_offline else (self.extract_model or self.model)

    @property
    def offline_reason(self) -> str:
        if self.model == OFFLINE_MODEL:
            return "chosen with --model offline"
        if self.offline_fallback:
            return f"{self.model} needs OPENAI_API_KEY, which is not set"
        return "no OPENAI_API_KEY is set"

    @property
    def offline_fallback(self) -> bool:
        """A real model was asked for (flag, variable or config file), but there is no key:
        the offline model answers instead, which the CLI and the header say."""
        return self.offline and self.model != OFFLINE_MODEL and "model" in self.sources

    @property
    def model_label(self) -> str:
        """The model as the header shows it ("offline (no key for gpt-4o)" for a fallback)."""
        if not self.offline:
            return self.model
        return f"{OFFLINE_MODEL} (no key for {self.model})" if self.offline_fallback else OFFLINE_MODEL

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

        config_path = Path(config_file) if config_file else _find_config(cwd, environ)
        config = _read_config(config_path)
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

        if "embedder" not in values and merged_env.get("OPENAI_EMBEDDING_MODEL", "").strip():
            # The reference's way to pick a remote embedding model: it implies openai unless chosen.
            values["embedder"], sources["embedder"] = "openai", "environment OPENAI_EMBEDDING_MODEL"
        preferences = config_path or _user_config_path()
        settings = cls(**{k: _coerce(k, v) for k, v in values.items()}, env=merged_env, sources=sources,
                       preferences_file=str(preferences or ""))  # fmt: skip
        return settings.validated()

    def validated(self) -> Settings:
        from backends import check_name

        name = check_name(self.memory)
        self._validate_scope()
        if self.preload < -1:
            raise ConfigError(
                f"preload must be -1 (all), 0 (off) or a number of memories, not {self.preload}"
            )
        if self.history_tokens < 1:
            raise ConfigError(
                f"{self.origin_of('history_tokens')} must be a positive number of tokens "
                f"such as 24000, not {self.history_tokens}"
            )
        if self.resume and self.session:
            raise ConfigError("--resume and --session both choose a session to continue: give one of them")
        if self.limit < 0:
            raise ConfigError(f"memory limit must be 0 (no limit) or more, not {self.limit}")
        from memchat.engine.tools import ALL_TOOLS

        for tool in (*self.enable_tools, *self.disable_tools):
            if tool not in ALL_TOOLS:
                raise ConfigError(f"unknown tool {tool!r}: choose from {', '.join(ALL_TOOLS)}")
        both = set(self.enable_tools) & set(self.disable_tools)
        if both:
            raise ConfigError(f"{', '.join(sorted(both))} is both enabled and disabled: pick one")
        for tool in self.expose_tools:
            if tool not in ALL_TOOLS:
                raise ConfigError(
                    f"unknown tool {tool!r} for --expose-tool: choose from {', '.join(ALL_TOOLS)}"
                )
        self._validate_choices()
        if self.tool_panels not in TOOL_PANELS:
            raise ConfigError(
                f"{self.origin_of('tool_panels')} is {self.tool_panels!r}: choose compact (one line per "
                "tool call, the default) or expanded"
            )
        if not self.timeout > 0 or self.timeout == float("inf"):
            raise ConfigError("--timeout must be a positive duration such as 10s")
        self._validate_extraction()
        return replace(self, memory=name)

    def _validate_scope(self) -> None:
        """An empty or blank user or app is an error, never a silent default
        (an empty environment variable still means unset: it never gets here)."""
        scopes = (("user", "--user", "a user ID", "alice"), ("app", "--app", "an app name", "my-app"))
        for name, flag, noun, example in scopes:
            value = getattr(self, name)
            origin = self.sources.get(name, "")
            if isinstance(value, str) and value.strip():
                _check_identity(name, value, origin, flag)
                continue
            default = getattr(Settings, name)
            if origin == "command line":
                where = flag
                fix = f"give {noun} such as {flag} {example}, or leave the option out for {default!r}"
            elif origin.startswith("config file "):
                where = f"{origin.removeprefix('config file ')} in the config file"
                fix = f"set {noun} or remove the line (the default is {default!r})"
            elif origin:  # the environment or a .env file: "<where> VARIABLE"
                where = origin.rsplit(" ", 1)[-1]
                fix = f"set it to {noun} or unset it (the default is {default!r})"
            else:
                where, fix = name, f"give {noun} (the default is {default!r})"
            raise ConfigError(f"{where} is empty: {fix}")

    def _validate_choices(self) -> None:
        """--search and the embedder: one of their names, said with where the value came from."""
        nouns = {"search": "a search mode", "embedder": "an embedder"}
        for name, choices in CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                first, *rest = choices
                raise ConfigError(
                    f"{self.origin_of(name)} is {value!r}, which is not {nouns[name]}: "
                    f"choose {first} (the default), {', '.join(rest[:-1])} or {rest[-1]}"
                )

    def origin_of(self, name: str) -> str:
        """How a person would name where a setting came from: its flag, variable or config key."""
        meta, origin = _META[name], self.sources.get(name, "")
        if origin == "command line":
            return meta.get("flag") or name
        if origin.startswith("config file "):
            return f"{origin.removeprefix('config file ')} in the config file"
        if origin:  # the environment or a .env file: "<where> VARIABLE"
            return origin.rsplit(" ", 1)[-1]
        return name

    def _validate_extraction(self) -> None:
        from memchat.engine.extraction import POLICIES

        if not self.extract:
            given = [
                flag for name, flag in EXTRACTION_FLAGS.items() if self.sources.get(name) == "command line"
            ]
            if given:
                raise ConfigError(f"{given[0]} only applies to auto extraction: add --extract")
        if self.extract_every < 0:
            raise ConfigError(
                f"--extract-every must be 0 (every turn) or a number of messages, not {self.extract_every}"
            )
        if self.extract_interval < 0:
            raise ConfigError("--extract-interval must be 0 (off) or a positive duration such as 3m")
        if self.extract_match not in ("any", "all"):
            raise ConfigError(f"extraction match must be 'any' or 'all', not {self.extract_match!r}")
        if self.update_policy not in POLICIES:
            raise ConfigError(
                f"unknown update policy {self.update_policy!r}: choose from {', '.join(POLICIES)}"
            )
        if self.workers < 1:
            raise ConfigError(f"--workers must be 1 or more, not {self.workers}")
        if self.queue_size < 1:
            raise ConfigError(f"--queue-size must be 1 or more, not {self.queue_size}")
        if self.job_timeout <= 0:
            raise ConfigError("--job-timeout must be a positive duration such as 30s")

    def tool_settings(self) -> Any:
        from memchat.engine.tools import ToolSettings

        enabled = {name: True for name in self.enable_tools} | {name: False for name in self.disable_tools}
        return ToolSettings(enabled=enabled, exposed={name: True for name in self.expose_tools})

    def describe(self) -> dict[str, Any]:
        """Every field with its value (the key masked), for diagnostics."""
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("env", "sources")}
        if shown["api_key"]:
            shown["api_key"] = "***"
        return shown


_META: dict[str, Mapping[str, Any]] = {f.name: f.metadata for f in fields(Settings)}
#: Settings field → environment variable.
ENV_NAMES: dict[str, str] = {name: meta["env"] for name, meta in _META.items() if meta.get("env")}
#: Config file (section, key) → Settings field.
CONFIG_KEYS: dict[tuple[str, str], str] = {
    meta["config"]: name for name, meta in _META.items() if meta.get("config")
}
#: Fields compared without regard to case ("Hybrid" = "hybrid").
CHOICES = {"search": SEARCH_MODES, "embedder": EMBEDDER_CHOICES}
#: How the TUI shows tool calls.
TOOL_PANELS = ("compact", "expanded")


def _check_identity(name: str, value: str, origin: str, flag: str) -> None:
    """The engine's rule for a user id or app name (no control characters, at
    most 255 characters), said with where the value came from."""
    from memchat.engine.model import InvalidKeyError, UserKey
    from memchat.engine.validation import check_key

    key = UserKey(app=value, user="user") if name == "app" else UserKey(app="app", user=value)
    try:
        check_key(key)
    except InvalidKeyError as exc:
        if origin.startswith("config file "):
            where = f"{origin.removeprefix('config file ')} in the config file"
        else:
            where = flag if origin in ("", "command line") else origin.rsplit(" ", 1)[-1]
        raise ConfigError(f"{where} is not usable: {exc}") from None


def _find_config(cwd: Path, environ: Mapping[str, str]) -> Path | None:
    explicit = environ.get("MEMCHAT_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"MEMCHAT_CONFIG points to {path}, which does not exist")
        return path
    candidates = [cwd / CONFIG_NAME]
    user = _user_config_path()
    if user is not None:
        candidates.append(user)
    return next((p for p in candidates if p.is_file()), None)


def _user_config_path() -> Path | None:
    """``~/.config/memchat/memchat.toml`` on Linux (the platform's user config folder)."""
    try:
        from platformdirs import user_config_path

        return user_config_path("memchat", appauthor=False) / CONFIG_NAME
    except Exception:  # platformdirs missing is not fatal: the local file still counts
        return None


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


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")


def parse_duration(value: Any, label: str = "duration") -> float:
    """Seconds from 90, 1.5, "90", "90s", "3m", "1h30m" or "500ms"."""
    if isinstance(value, bool):
        raise ConfigError(f"{label} must be a duration such as 90s, 3m or 1h, not {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower().replace(" ", "")
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ConfigError(f"{label} must be a duration such as 90s, 3m or 1h, not {value!r}")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * scale[unit] for number, unit in parts)


def _coerce(name: str, value: Any) -> Any:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    if name in DURATIONS:
        return parse_duration(value, _label(name))
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
    if name in CHOICES or name == "tool_panels":
        return str(value).strip().lower()
    if name in EXACT_STRINGS:
        # An identity is taken as typed: stripping " bob" would silently reach user "bob".
        return str(value)
    if kind == "str":
        return str(value).strip()
    return value


def _label(name: str) -> str:
    return ENV_NAMES.get(name, name)
