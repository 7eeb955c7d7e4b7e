"""How a setting is declared, once: :func:`setting` on a field of
:class:`memchat.settings.Settings` gives its default (the field's), type (the
field's annotation), environment variable, config-file key, command-line flag,
metavar, help and choices. The command-line options, the environment and
config-file parsing, ``config/memchat.toml``, ``config/.env.example`` and the
README's settings table are all derived from these declarations.

Standard library only: ``memchat``'s start imports this before its first frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The command-line commands that take a setting's flag.
CHAT, ASK, MCP = "chat", "ask", "mcp"


@dataclass(frozen=True)
class Spec:
    """Everything about one setting besides its name, type and default."""

    #: One or two sentences for ``--help`` and the config files.
    help: str
    #: Environment variable (also read from ``.env``), or "".
    env: str = ""
    #: ``(section, key)`` in memchat.toml, or None.
    config: tuple[str, str] | None = None
    #: Long flag; a boolean's pair as ``--on/--off``; "" for none.
    flag: str = ""
    short: str = ""
    metavar: str = ""
    #: The accepted values (the first is the default), or () for any.
    choices: tuple[str, ...] = ()
    #: The commands whose options include the flag.
    commands: tuple[str, ...] = (CHAT,)
    #: The default as a person reads it, where the value alone says too little.
    default_text: str = ""
    #: More for the config files (and the README) than ``--help`` needs.
    note: str = ""
    #: A value for config/.env.example to show instead of the default.
    example: str = ""
    #: Given in seconds as 90, "90s", "3m", "1h30m"…
    duration: bool = False


def setting(
    default: Any,
    help: str,
    *,
    secret: bool = False,
    **spec: Any,
) -> Any:
    """Declare a Settings field and everything about it (see :class:`Spec`);
    a ``secret`` is left out of the field's repr."""
    return field(default=default, repr=not secret, metadata={"spec": Spec(help, **spec)})


def format_duration(seconds: float) -> str:
    """10.0 → "10s", 90.0 → "90s", 0.5 → "500ms"."""
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"


def as_text(spec: Spec, value: Any) -> str:
    """A value as an environment variable holds it: 10s, true, memory_add,memory_delete."""
    if spec.duration:
        return format_duration(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return ",".join(value) if isinstance(value, tuple) else str(value)


def shown_default(spec: Spec, default: Any) -> str:
    """The default as ``--help``, the README and the comments say it."""
    if spec.default_text:
        return spec.default_text
    if isinstance(default, bool):
        return "on" if default else "off"
    return as_text(spec, default) or "none"


def where(spec: Spec) -> str:
    """ "MEMCHAT_SEARCH or [memory] search in memchat.toml"."""
    places = [spec.env] if spec.env else []
    if spec.config:
        places.append("[{}] {} in memchat.toml".format(*spec.config))
    return " or ".join(places)


def cli_help(spec: Spec, default: Any) -> str:
    """An option's ``--help`` text: the help, the default, and where else it can be set."""
    text = spec.help
    if spec.env or spec.config or spec.default_text:
        text += f" Default: {shown_default(spec, default)}."
    places = where(spec)
    return text + (f" Also {places}." if places else "")


# -- variables that are not Settings fields ---------------------------------------------


@dataclass(frozen=True)
class VariableGroup:
    """Variables a backend (or the embedding client) reads from the merged environment."""

    backend: str
    #: What the group is, and its defaults, for the config files.
    title: str
    #: (variable, example value), the first the one `memchat memory migrate --to-dsn` sets.
    variables: tuple[tuple[str, str], ...]


_MODEL = "text-embedding-3-small"


#: The reference's separate fields of a server backend (``<prefix>HOST``…), with examples.
_SERVER_FIELDS = {
    "mysql": {"HOST": "localhost", "PORT": "3306", "USER": "root", "PASSWORD": "", "DATABASE": "memchat"},
    "postgresql": {"HOST": "localhost", "PORT": "5432", "USER": "postgres", "PASSWORD": "",
                   "DATABASE": "memchat", "SSLMODE": "disable"},
}  # fmt: skip


def _server(family: str, dsn: str, prefix: str, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    """A server backend's variables: its DSN, the separate fields, then its own."""
    port = _SERVER_FIELDS[family]["PORT"]
    url = f"{family}://user:password@localhost:{port}/memchat"
    return ((dsn, url), *((prefix + name, value) for name, value in _SERVER_FIELDS[family].items()), *extra)


#: Every backend variable the reference's factory reads (listed in --help and the config files).
BACKEND_ENV: tuple[VariableGroup, ...] = (
    VariableGroup("sqlite", "SQLite (default: memories.db in the user data folder).",
                  (("SQLITE_MEMORY_DSN", "sqlite:///memories.db"),)),
    VariableGroup("sqlitevec", "SQLite + sqlite-vec (default: memories-vec.db beside it). The dimension "
                  "follows the embedder (384 for the offline one); EMBEDDER_MODEL names an "
                  "OpenAI-compatible embedding model for this backend.",
                  (("SQLITEVEC_MEMORY_DSN", "sqlite:///memories-vec.db"),
                   ("SQLITEVEC_EMBEDDER_MODEL", _MODEL), ("SQLITEVEC_DIMENSION", "384"))),
    VariableGroup("redis", "Redis: a URL, or host:port as the reference.",
                  (("REDIS_URL", "redis://:password@localhost:6379/0"), ("REDIS_ADDR", "localhost:6379"))),
    VariableGroup("mysql", "MySQL / MariaDB: a DSN, or the separate fields as the reference. The "
                  "database is created on first use when the account may.",
                  _server("mysql", "MYSQL_DSN", "MYSQL_")),
    VariableGroup("mysqlvec", "MySQL / MariaDB with vectors (native VECTOR on MariaDB 11.7+, else a BLOB).",
                  _server("mysql", "MYSQLVEC_DSN", "MYSQLVEC_",
                          ("MYSQLVEC_EMBEDDER_MODEL", _MODEL), ("MYSQLVEC_DIMENSION", "384"))),
    VariableGroup("postgres", "PostgreSQL: a DSN, or the separate fields as the reference. The "
                  "database is created on first use when the account may.",
                  _server("postgresql", "POSTGRES_DSN", "PG_")),
    VariableGroup("pgvector", "PostgreSQL + pgvector (the vector extension is created if the account may).",
                  _server("postgresql", "PGVECTOR_DSN", "PGVECTOR_",
                          ("PGVECTOR_EMBEDDER_MODEL", _MODEL))),
    VariableGroup("chromadb", "Chroma: a server (BASE_URL), else embedded in CHROMA_PATH (default: chroma/ "
                  "in the user data folder). API_KEY is sent as X-Chroma-Token, BEARER_TOKEN as "
                  "Authorization: Bearer.",
                  (("CHROMA_BASE_URL", "http://localhost:8000"), ("CHROMA_PATH", "/path/to/chroma"),
                   ("CHROMA_COLLECTION", "memories"), ("CHROMA_EMBEDDER_MODEL", _MODEL),
                   ("CHROMA_API_KEY", ""), ("CHROMA_BEARER_TOKEN", ""), ("CHROMA_TENANT", "default_tenant"),
                   ("CHROMA_DATABASE", "default_database"))),
    VariableGroup("embeddings", "An OpenAI-compatible embedding model instead of the offline one "
                  "(OPENAI_EMBEDDING_MODEL implies MEMCHAT_EMBEDDER=openai).",
                  (("OPENAI_EMBEDDING_MODEL", _MODEL), ("OPENAI_EMBEDDING_API_KEY", ""),
                   ("OPENAI_EMBEDDING_BASE_URL", ""))),
)  # fmt: skip

#: Backend → its variables (as the reference's factory reads them).
BACKEND_VARIABLES: dict[str, tuple[str, ...]] = {
    group.backend: tuple(name for name, _ in group.variables) for group in BACKEND_ENV
}

#: Variables settings.py reads besides the fields' own: (name, example, meaning).
EXTRA_VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("MODEL_NAME", "deepseek-v4-flash", "The reference's name for MEMCHAT_MODEL (MEMCHAT_MODEL wins)."),
    ("MEMCHAT_CONFIG", "/path/to/memchat.toml",
     "A memchat.toml to read instead of ./memchat.toml or the user config folder's."),
)  # fmt: skip

#: The sections of memchat.toml, in order, with what the section is for.
SECTIONS: dict[str, str] = {
    "memory": "Where memories are kept and how they are found.",
    "session": "Who the memories belong to (saved conversations are scoped the same way).",
    "model": "The chat model.",
    "tools": "The memory tools the model may call. Off by default: memory_delete, memory_clear.",
    "extraction": "Auto mode: after each turn a background extractor reads the new messages and "
    "adds, updates or deletes memories; the chat model only searches them. Without OPENAI_API_KEY "
    "a rule-based offline extractor is used. A full queue never blocks the chat.",
    "mcp": "`memchat mcp`: the memory tools served to other agents.",
    "tui": "The TUI's run-time choices; changing them in the app writes them here.",
}
