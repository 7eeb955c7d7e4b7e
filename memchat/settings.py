"""One Settings object: flag > environment > .env > config file > default.

Each field is declared once, with :func:`~memchat.settings_spec.setting`: its
default, type, environment variable, config-file key, flag, metavar, help and
choices. The command-line options (memchat/cli_options.py), the parsing below
and the documented files (``python -m memchat.settings_docs``) read those
declarations.

Backend variables (``SQLITE_MEMORY_DSN``, ``REDIS_ADDR``, ``PG_HOST``…) are
not fields here: they travel in ``Settings.env``, the merged environment
(real environment over ``.env`` over the config file's ``[env]`` table), which
is what the backend factories read.

Importing this module imports neither the engine nor a driver (the TUI's
first frame waits for it); validation imports engine parts only for values
that are not the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .settings_sources import BOOLS, find_config, parse_duration, read_config, user_config_path
from .settings_sources import config_error as _error
from .settings_spec import ASK, BACKEND_VARIABLES, CHAT, MCP, Spec, cli_help, setting

__all__ = ["BACKEND_VARIABLES", "CONFIG_KEYS", "ENV_NAMES", "SPECS", "Settings", "parse_duration"]

DEFAULT_MODEL = "deepseek-v4-flash"
OFFLINE_MODEL = "offline"
_TOOLS_HELP = "memory_add, memory_update, memory_delete, memory_clear, memory_search, memory_load"


@dataclass(frozen=True)
class Settings:
    # fmt: off
    memory: str = setting(
        "sqlite",
        "Storage backend: inmemory, sqlite (in the user data folder), sqlitevec, redis, mysql, mysqlvec, "
        "postgres, pgvector, chromadb.",
        env="MEMCHAT_MEMORY", config=("memory", "backend"), flag="--memory", short="-m", metavar="BACKEND",
        choices=("sqlite", "inmemory", "sqlitevec", "redis", "mysql", "mysqlvec", "postgres", "pgvector",
                 "chromadb"),
        commands=(CHAT, ASK, MCP),
        note="Every one searches by meaning and keywords; where to connect is set by the backend "
        "variables ([env] below).",
    )
    model: str = setting(
        DEFAULT_MODEL, "Chat model ('offline' for the offline model).",
        env="MEMCHAT_MODEL", config=("model", "name"), flag="--model", metavar="MODEL", commands=(CHAT, ASK),
        note="The offline model is built in and rule-based; it answers when OPENAI_API_KEY is unset "
        "(and says so when another model was asked for). MODEL_NAME, the reference's variable, works too.",
    )
    user: str = setting(
        "user", "User id: whose memories these are.",
        env="MEMCHAT_USER", config=("session", "user"), flag="--user", short="-u", metavar="USER",
        commands=(CHAT, ASK, MCP),
    )
    app: str = setting(
        "memory-chat", "App name: the memories of one user are kept apart per app.",
        env="MEMCHAT_APP", config=("session", "app"), flag="--app", metavar="NAME", commands=(CHAT, ASK, MCP),
    )
    streaming: bool = setting(
        True, "Stream answers token by token.",
        env="MEMCHAT_STREAMING", config=("model", "streaming"), flag="--streaming/--no-streaming",
        note="ctrl+t in the TUI switches it and writes it here.",
    )
    soft_delete: bool = setting(
        False, "Keep deleted memories as restorable tombstones (`memchat memory restore` undoes a delete).",
        env="MEMCHAT_SOFT_DELETE", config=("memory", "soft_delete"), flag="--soft-delete/--hard-delete",
        commands=(CHAT, MCP),
    )
    preload: int = setting(
        0, "Memories put in the system prompt: 0 off, N adaptive, -1 all.",
        env="MEMCHAT_PRELOAD", config=("model", "preload"), flag="--preload", metavar="N",
    )
    limit: int = setting(
        1000, "Maximum active memories per user; 0 = no limit.",
        env="MEMCHAT_MEMORY_LIMIT", config=("memory", "limit"),
        note="Re-adding or updating an existing memory never counts against it.",
    )
    timeout: float = setting(
        10.0, "Give up on a backend operation (connect, query, lock wait) after this long, e.g. 10s.",
        env="MEMCHAT_TIMEOUT", config=("memory", "timeout"), flag="--timeout", metavar="DURATION",
        commands=(CHAT, ASK, MCP), duration=True,
    )
    #: How memories are ranked, for every search (tool, preload, CLI, TUI filter).
    search: str = setting(
        "hybrid", "How memories are found: hybrid (meaning and keywords), semantic (meaning only) "
        "or keyword (shared words only, the reference's ranking).",
        env="MEMCHAT_SEARCH", config=("memory", "search"), flag="--search", metavar="MODE",
        choices=("hybrid", "semantic", "keyword"), commands=(CHAT, ASK, MCP),
        note="Every search uses it: the memory_search tool, preload, `memchat memory search`, the TUI "
        "filter.",
    )
    #: What turns memories into vectors for semantic search ("none": keywords only).
    embedder: str = setting(
        "default", "Embedding model for semantic search: default (offline multilingual-e5-small and USE "
        "multilingual, blended), e5 (multilingual-e5-small alone), minilm (offline, English), openai "
        "(OPENAI_EMBEDDING_MODEL; chosen when that is set) or none (keyword search only).",
        env="MEMCHAT_EMBEDDER", config=("memory", "embedder"),
        choices=("default", "e5", "minilm", "openai", "none"),
    )
    history_tokens: int = setting(
        24_000,
        "Estimated tokens of a resumed session's history given to the model (the newest whole turns).",
        env="MEMCHAT_HISTORY_TOKENS", config=("session", "history_tokens"),
    )
    plain: bool = setting(False, "Line-mode chat (automatic when not on a terminal).", flag="--plain")
    resume: bool = setting(False, "Continue the most recent saved session.", flag="--resume", short="-c")
    session: str = setting(
        "", "Continue this saved session: its id or the end of it (`memchat sessions list`).",
        flag="--session", metavar="ID",
    )
    enable_tools: tuple[str, ...] = setting(
        (), f"Enable a memory tool, e.g. memory_delete (repeatable): {_TOOLS_HELP}.",
        env="MEMCHAT_ENABLE_TOOLS", config=("tools", "enable"), flag="--enable-tool", metavar="TOOL",
        commands=(CHAT, MCP), example="memory_delete,memory_clear",
        note="In auto mode it also says what the background extractor may do (default: add, update, delete).",
    )
    disable_tools: tuple[str, ...] = setting(
        (), "Disable a memory tool (repeatable).",
        env="MEMCHAT_DISABLE_TOOLS", config=("tools", "disable"), flag="--disable-tool", metavar="TOOL",
        commands=(CHAT, MCP),
    )
    expose_tools: tuple[str, ...] = setting(
        (), "In auto mode, also show this memory tool to the model, e.g. memory_add (repeatable).",
        env="MEMCHAT_EXPOSE_TOOLS", config=("tools", "expose"), flag="--expose-tool", metavar="TOOL",
        example="memory_add", note="memory_search is always shown (and memory_load once enabled).",
    )
    extract: bool = setting(
        False, "Auto mode: a background extractor makes the memories after each turn; the model only "
        "searches them.",
        env="MEMCHAT_EXTRACT", config=("extraction", "enabled"), flag="--extract/--no-extract",
    )
    extract_model: str = setting(
        "", "Model of the extractor ('offline' for the rule-based one, also used without OPENAI_API_KEY).",
        env="MEMCHAT_EXTRACT_MODEL", config=("extraction", "model"), flag="--extract-model", metavar="MODEL",
        default_text="the chat model",
    )
    extract_every: int = setting(
        0, "Extract once N new messages are pending (a turn is 2: yours and the answer; 0: every turn).",
        env="MEMCHAT_EXTRACT_EVERY", config=("extraction", "every"), flag="--extract-every", metavar="N",
    )
    extract_interval: float = setting(
        0.0, "Extract once this long has passed since the last extraction, e.g. 90s, 3m, 1h "
        "(0: off; with --extract-every: whichever comes first, unless extract_match is all).",
        env="MEMCHAT_EXTRACT_INTERVAL", config=("extraction", "interval"), flag="--extract-interval",
        metavar="DURATION", duration=True, example="3m",
    )
    extract_match: str = setting(
        "any", "With both extract_every and extract_interval: any (either) or all (both).",
        env="MEMCHAT_EXTRACT_MATCH", config=("extraction", "match"), choices=("any", "all"),
    )
    update_policy: str = setting(
        "merge_similar", "How extracted changes apply: merge_similar (reconcile near-duplicates), "
        "preserve_history (changes become new memories), append_only (only adds).",
        env="MEMCHAT_UPDATE_POLICY", config=("extraction", "update_policy"), flag="--update-policy",
        metavar="POLICY", choices=("merge_similar", "preserve_history", "append_only"),
    )
    workers: int = setting(
        1, "Background extraction workers.",
        env="MEMCHAT_EXTRACT_WORKERS", config=("extraction", "workers"), flag="--workers", metavar="N",
    )
    queue_size: int = setting(
        10, "Extraction jobs waiting per worker; when full, jobs wait their turn without blocking the chat.",
        env="MEMCHAT_EXTRACT_QUEUE_SIZE", config=("extraction", "queue_size"), flag="--queue-size",
        metavar="N",
    )
    job_timeout: float = setting(
        30.0, "Time limit of one extraction, e.g. 30s.",
        env="MEMCHAT_EXTRACT_JOB_TIMEOUT", config=("extraction", "job_timeout"), flag="--job-timeout",
        metavar="DURATION", duration=True,
    )
    mcp_tokens: str = setting(
        "", "The token file of `memchat mcp --http` (its bearer tokens, as salted hashes).",
        env="MEMCHAT_MCP_TOKENS", config=("mcp", "tokens"),
        default_text="mcp-tokens.json in the user data folder, beside the default SQLite database",
    )
    theme: str = setting(
        "", "The TUI's colour theme: any Textual theme, e.g. nord, gruvbox, textual-light.",
        env="MEMCHAT_THEME", config=("tui", "theme"), default_text="Textual's default", example="nord",
        note="Changing it in the app (ctrl+p → Change theme) writes it here.",
    )
    tool_panels: str = setting(
        "compact", "Tool calls in the TUI: compact (one line each; Enter or a click opens one) or expanded.",
        env="MEMCHAT_TOOL_PANELS", config=("tui", "tool_panels"), choices=("compact", "expanded"),
        note="ctrl+o in the app switches them and writes it here.",
    )
    api_key: str = setting(
        "", "The chat model's API key; without one the offline model answers.",
        env="OPENAI_API_KEY", secret=True, default_text="none: the offline model", example="sk-...",
    )
    base_url: str = setting(
        "", "An OpenAI-compatible endpoint (DeepSeek, vLLM, Ollama…).",
        env="OPENAI_BASE_URL", config=("model", "base_url"), default_text="OpenAI's",
        example="https://api.deepseek.com/v1",
    )
    # fmt: on
    #: The config file the TUI writes run-time choices to (theme, streaming, tool
    #: panels): the one in effect, else the user's; "" (tests, the library) = none.
    preferences_file: str = field(default="", repr=False)
    #: Merged environment handed to the backend factories and model clients.
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: Where values came from, for `memchat config` style diagnostics.
    sources: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def help_for(cls, name: str) -> str:
        """The ``--help`` text declared with the setting, with its default, variable and config key."""
        return cli_help(SPECS[name], DEFAULTS[name])

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

        config_path = Path(config_file) if config_file else find_config(cwd, environ)
        config = read_config(config_path)
        merged_env: dict[str, str] = {k: str(v) for k, v in (config.get("env") or {}).items()}
        for (section, key), name in CONFIG_KEYS.items():
            if key in (config.get(section) or {}):
                values[name] = config[section][key]
                sources[name] = f"config file [{section}] {key}"

        dotenv_path = Path(env_file) if env_file else cwd / ".env"
        if env_file and not dotenv_path.is_file():
            raise _error(f"--env-file {dotenv_path} does not exist: check the path")
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
        preferences = config_path or user_config_path()
        settings = cls(**{k: _coerce(k, v) for k, v in values.items()}, env=merged_env, sources=sources,
                       preferences_file=str(preferences or ""))  # fmt: skip
        return settings.validated()

    def validated(self) -> Settings:
        name = self.memory
        if name not in SPECS["memory"].choices:  # the backends' own message for a wrong name
            from backends import check_name

            name = check_name(name)
        self._validate_scope()
        if self.preload < -1:
            raise _error(f"preload must be -1 (all), 0 (off) or a number of memories, not {self.preload}")
        if self.history_tokens < 1:
            raise _error(
                f"{self.origin_of('history_tokens')} must be a positive number of tokens "
                f"such as 24000, not {self.history_tokens}"
            )
        if self.resume and self.session:
            raise _error("--resume and --session both choose a session to continue: give one of them")
        if self.limit < 0:
            raise _error(f"memory limit must be 0 (no limit) or more, not {self.limit}")
        self._validate_tools()
        self._validate_choices()
        if self.tool_panels not in SPECS["tool_panels"].choices:
            raise _error(
                f"{self.origin_of('tool_panels')} is {self.tool_panels!r}: choose compact (one line per "
                "tool call, the default) or expanded"
            )
        if not self.timeout > 0 or self.timeout == float("inf"):
            raise _error("--timeout must be a positive duration such as 10s")
        self._validate_extraction()
        return replace(self, memory=name)

    def _validate_tools(self) -> None:
        if not (self.enable_tools or self.disable_tools or self.expose_tools):
            return  # the engine's tool names are imported only when some are named
        from memchat.engine.tools import ALL_TOOLS

        for tool in (*self.enable_tools, *self.disable_tools):
            if tool not in ALL_TOOLS:
                raise _error(f"unknown tool {tool!r}: choose from {', '.join(ALL_TOOLS)}")
        both = set(self.enable_tools) & set(self.disable_tools)
        if both:
            raise _error(f"{', '.join(sorted(both))} is both enabled and disabled: pick one")
        for tool in self.expose_tools:
            if tool not in ALL_TOOLS:
                raise _error(f"unknown tool {tool!r} for --expose-tool: choose from {', '.join(ALL_TOOLS)}")

    def _validate_scope(self) -> None:
        """An empty or blank user or app is an error, never a silent default
        (an empty environment variable still means unset: it never gets here)."""
        for name, noun, example in (("user", "a user ID", "alice"), ("app", "an app name", "my-app")):
            value, default, flag = getattr(self, name), DEFAULTS[name], SPECS[name].flag
            origin = self.sources.get(name, "")
            if isinstance(value, str) and value.strip():
                if value != default:
                    _check_identity(name, value, origin, flag)
                continue
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
            raise _error(f"{where} is empty: {fix}")

    def _validate_choices(self) -> None:
        """--search and the embedder: one of their names, said with where the value came from."""
        nouns = {"search": "a search mode", "embedder": "an embedder"}
        for name, noun in nouns.items():
            value, choices = getattr(self, name), SPECS[name].choices
            if value not in choices:
                default = DEFAULTS[name]
                *rest, last = (c for c in choices if c != default)
                listed = f"{', '.join(rest)} or {last}" if rest else last
                raise _error(
                    f"{self.origin_of(name)} is {value!r}, which is not {noun}: "
                    f"choose {default} (the default), {listed}"
                )

    def origin_of(self, name: str) -> str:
        """How a person would name where a setting came from: its flag, variable or config key."""
        origin = self.sources.get(name, "")
        if origin == "command line":
            return SPECS[name].flag.split("/")[0] or name
        if origin.startswith("config file "):
            return f"{origin.removeprefix('config file ')} in the config file"
        if origin:  # the environment or a .env file: "<where> VARIABLE"
            return origin.rsplit(" ", 1)[-1]
        return name

    def _validate_extraction(self) -> None:
        if not self.extract:
            given = [
                SPECS[name].flag
                for name in EXTRACTION_ONLY
                if self.sources.get(name) == "command line" and SPECS[name].flag
            ]
            if given:
                raise _error(f"{given[0]} only applies to auto extraction: add --extract")
        if self.extract_every < 0:
            raise _error(
                f"--extract-every must be 0 (every turn) or a number of messages, not {self.extract_every}"
            )
        if self.extract_interval < 0:
            raise _error("--extract-interval must be 0 (off) or a positive duration such as 3m")
        if self.extract_match not in SPECS["extract_match"].choices:
            raise _error(f"extraction match must be 'any' or 'all', not {self.extract_match!r}")
        policies = SPECS["update_policy"].choices
        if self.update_policy not in policies:
            raise _error(f"unknown update policy {self.update_policy!r}: choose from {', '.join(policies)}")
        if self.workers < 1:
            raise _error(f"--workers must be 1 or more, not {self.workers}")
        if self.queue_size < 1:
            raise _error(f"--queue-size must be 1 or more, not {self.queue_size}")
        if self.job_timeout <= 0:
            raise _error("--job-timeout must be a positive duration such as 30s")

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


#: Settings field → its declaration, in declaration order (fields without one are not settings).
SPECS: dict[str, Spec] = {f.name: f.metadata["spec"] for f in fields(Settings) if "spec" in f.metadata}
DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Settings) if f.name in SPECS}
#: Settings field → its type, as declared ("str", "bool", "int", "float", "tuple[str, ...]").
KINDS: dict[str, str] = {f.name: str(f.type) for f in fields(Settings) if f.name in SPECS}
#: Settings field → environment variable.
ENV_NAMES: dict[str, str] = {name: spec.env for name, spec in SPECS.items() if spec.env}
#: Config file (section, key) → Settings field.
CONFIG_KEYS: dict[tuple[str, str], str] = {spec.config: name for name, spec in SPECS.items() if spec.config}
#: Options that only mean something in auto mode (a flag for them without --extract is an error).
EXTRACTION_ONLY = [name for name, spec in SPECS.items() if spec.config and spec.config[0] == "extraction"
                   and name not in ("extract", "extract_match")]  # fmt: skip
#: Fields compared without regard to case ("Hybrid" = "hybrid").
CASELESS = {"search", "embedder", "tool_panels"}
#: Fields kept exactly as given (user and app name who owns the memories).
EXACT_STRINGS = {"user", "app"}


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
        raise _error(f"{where} is not usable: {exc}") from None


def _apply_env(values: dict[str, Any], sources: dict[str, str], env: Mapping[str, str], origin: str) -> None:
    for name, variable in ENV_NAMES.items():
        if env.get(variable, "") != "":
            values[name] = env[variable]
            sources[name] = f"{origin} {variable}"
    name_override = env.get("MODEL_NAME")  # the reference's runner variable
    if name_override and ("model" not in values or sources.get("model", "").startswith("config")):
        values["model"] = name_override
        sources["model"] = f"{origin} MODEL_NAME"


def _coerce(name: str, value: Any) -> Any:
    """A value from the command line, a variable or the config file, as its declared type."""
    kind, spec = KINDS[name], SPECS[name]
    label = spec.env or name
    if spec.duration:
        return parse_duration(value, label)
    if kind == "bool" and not isinstance(value, bool):
        parsed = BOOLS.get(str(value).strip().lower())
        if parsed is None:
            raise _error(f"{label} must be true or false, not {value!r}")
        return parsed
    if kind == "int" and not isinstance(value, int):
        try:
            return int(str(value).strip())
        except ValueError:
            raise _error(f"{label} must be a whole number, not {value!r}") from None
    if kind == "tuple[str, ...]":
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(i.strip() for i in items if str(i).strip())
    if name in CASELESS:
        return str(value).strip().lower()
    if name in EXACT_STRINGS:
        # An identity is taken as typed: stripping " bob" would silently reach user "bob".
        return str(value)
    if kind == "str":
        return str(value).strip()
    return value
