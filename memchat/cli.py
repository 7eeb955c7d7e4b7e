"""Command line: ``memchat memory …`` inspects and edits stored memories.

Heavy modules (backends' drivers) are imported only inside the commands, so
``memchat --help`` stays instant.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from .engine.model import MemchatError

T = TypeVar("T")


app = typer.Typer(
    name="memchat",
    help=(
        "memchat: chat with an assistant that remembers you, on any of nine storage backends.\n\n"
        "Without OPENAI_API_KEY an offline rule-based model answers (it remembers and recalls what "
        "you tell it). `memchat memory --help` inspects and edits stored memories."
    ),
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
memory_app = typer.Typer(help="Inspect and edit stored memories without the chat.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")


def _backend_epilog() -> str:
    from .settings import BACKEND_VARIABLES

    # "\b" keeps click from re-wrapping the block.
    lines = ["\b", "Backend variables (environment, .env, or [env] in memchat.toml):"]
    for backend, names in BACKEND_VARIABLES.items():
        lines.append(f"  {backend}: {', '.join(names)}")
    lines.append("Model: OPENAI_API_KEY, OPENAI_BASE_URL, MEMCHAT_MODEL (or MODEL_NAME).")
    lines.append("Defaults: MEMCHAT_MEMORY, MEMCHAT_USER, MEMCHAT_APP, MEMCHAT_PRELOAD, MEMCHAT_STREAMING,")
    lines.append("  MEMCHAT_SOFT_DELETE, MEMCHAT_MEMORY_LIMIT, MEMCHAT_CONFIG (a memchat.toml).")
    return "\n".join(lines)


BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--memory",
        "-m",
        help="Storage backend: inmemory, sqlite, sqlitevec, redis, mysql, mysqlvec, postgres, pgvector, "
        "chromadb (default: $MEMCHAT_MEMORY, else sqlite in the user data folder).",
        show_default=False,
    ),
]
UserOpt = Annotated[
    str | None, typer.Option("--user", "-u", help="User id (default: user).", show_default=False)
]
AppOpt = Annotated[
    str | None, typer.Option("--app", help="App name (default: memory-chat).", show_default=False)
]
SoftOpt = Annotated[
    bool | None,
    typer.Option(
        "--soft-delete/--hard-delete",
        help="Keep deleted memories as restorable tombstones (default: hard).",
        show_default=False,
    ),
]
EnvFileOpt = Annotated[
    Path | None, typer.Option("--env-file", help="Read variables from this file instead of ./.env.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"memchat: {message}", err=True)
    raise typer.Exit(code)


def _settings(**flags: Any) -> Any:
    from .settings import Settings

    env_file = flags.pop("env_file", None)
    try:
        return Settings.load(flags, env_file=env_file)
    except MemchatError as exc:
        _fail(str(exc))


def _run(settings: Any, action: Callable[[Any, Any], Awaitable[T]]) -> T:
    """Open the chosen backend, run ``action(service, key)``, close, and turn
    every expected failure into one line on stderr with exit code 2."""
    from memchat.engine import UserKey

    from .agent.factory import create_service

    async def main() -> T:
        async with create_service(settings) as svc:
            return await action(svc, UserKey(settings.app, settings.user))

    try:
        return asyncio.run(main())
    except MemchatError as exc:
        _fail(str(exc))


@app.callback(invoke_without_command=True, epilog=_backend_epilog())
def chat(
    ctx: typer.Context,
    memory: BackendOpt = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="Chat model (default: deepseek-v4-flash; 'offline' for the offline model)."
        ),
    ] = None,
    streaming: Annotated[
        bool | None,
        typer.Option("--streaming/--no-streaming", help="Stream answers token by token (default: on)."),
    ] = None,
    soft_delete: SoftOpt = None,
    preload: Annotated[
        int | None,
        typer.Option("--preload", help="Memories put in the prompt: 0 off (default), N adaptive, -1 all."),
    ] = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    plain: Annotated[
        bool, typer.Option("--plain", help="Line-mode chat (automatic when not on a terminal).")
    ] = False,
    env_file: EnvFileOpt = None,
    enable_tool: Annotated[
        list[str] | None,
        typer.Option("--enable-tool", help="Enable a memory tool, e.g. memory_delete (repeatable)."),
    ] = None,
    disable_tool: Annotated[
        list[str] | None, typer.Option("--disable-tool", help="Disable a memory tool (repeatable).")
    ] = None,
    extract: Annotated[
        bool | None,
        typer.Option(
            "--extract/--no-extract",
            help="Auto mode: a background extractor makes the memories after each turn; the model "
            "only searches them (default: off).",
            show_default=False,
        ),
    ] = None,
    extract_model: Annotated[
        str | None,
        typer.Option(
            "--extract-model",
            help="Model of the extractor (default: the chat model; 'offline' for the rule-based one, "
            "also used without OPENAI_API_KEY).",
            show_default=False,
        ),
    ] = None,
    extract_every: Annotated[
        int | None,
        typer.Option(
            "--extract-every",
            help="Extract once N new messages are pending (a turn is 2: yours and the answer). "
            "Default: after every turn.",
            show_default=False,
        ),
    ] = None,
    extract_interval: Annotated[
        str | None,
        typer.Option(
            "--extract-interval",
            help="Extract once this long has passed since the last extraction, e.g. 90s, 3m, 1h "
            "(with --extract-every: whichever comes first).",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", help="Background extraction workers (default: 1).", show_default=False),
    ] = None,
    queue_size: Annotated[
        int | None,
        typer.Option(
            "--queue-size",
            help="Extraction jobs waiting per worker (default: 10); when full, jobs wait their turn "
            "without blocking the chat.",
            show_default=False,
        ),
    ] = None,
    job_timeout: Annotated[
        str | None,
        typer.Option(
            "--job-timeout", help="Time limit of one extraction, e.g. 30s (default).", show_default=False
        ),
    ] = None,
    expose_tool: Annotated[
        list[str] | None,
        typer.Option(
            "--expose-tool",
            help="In auto mode, also show this memory tool to the model, e.g. memory_add (repeatable).",
        ),
    ] = None,
    update_policy: Annotated[
        str | None,
        typer.Option(
            "--update-policy",
            help="How extracted changes apply: merge_similar (default), preserve_history, append_only.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Chat with long-term memory."""
    # `memchat --memory redis memory list` means the same as `memchat memory list --memory redis`.
    ctx.obj = {"env_file": env_file, "memory": memory, "user": user, "app": app_name}
    if ctx.invoked_subcommand is not None:
        return
    settings = _settings(
        memory=memory, model=model, streaming=streaming, soft_delete=soft_delete, preload=preload,
        user=user, app=app_name, enable_tools=tuple(enable_tool or ()),
        disable_tools=tuple(disable_tool or ()), env_file=env_file,
        extract=extract, extract_model=extract_model, extract_every=extract_every,
        extract_interval=extract_interval, workers=workers, queue_size=queue_size, job_timeout=job_timeout,
        expose_tools=tuple(expose_tool or ()), update_policy=update_policy,
    )  # fmt: skip
    if not plain and sys.stdin.isatty() and sys.stdout.isatty():
        from .tui import run_tui  # Textual is imported only here

        raise typer.Exit(run_tui(settings))
    from .console import run_console

    try:
        code = asyncio.run(run_console(settings))
    except MemchatError as exc:
        _fail(str(exc))
    raise typer.Exit(code)


def _print_entries(entries: list[Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps([e.to_dict() for e in entries], ensure_ascii=False, indent=2))
        return
    if not entries:
        typer.echo("No memories.")
        return
    for e in entries:
        topics = f"  [{', '.join(e.memory.topics)}]" if e.memory.topics else ""
        score = f"  ({e.score:.3f})" if e.score else ""
        deleted = "  (deleted)" if e.is_deleted else ""
        stamp = e.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
        typer.echo(f"{e.id[:12]}  {stamp}  {e.memory.text}{topics}{score}{deleted}")


async def _resolve(svc: Any, key: Any, prefix: str) -> str:
    """Accept a unique ID prefix (as ``list`` prints them) as well as a full ID."""
    if len(prefix) == 64:
        return prefix
    matches = [e.id for e in await svc.read(key, include_deleted=True) if e.id.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    from memchat.engine import MemoryNotFoundError

    if not matches:
        raise MemoryNotFoundError(prefix)
    raise MemchatError(f"ID prefix {prefix!r} matches {len(matches)} memories: give more characters")


def _memory_settings(
    ctx: typer.Context, backend: str | None, user: str | None, app_name: str | None, soft: bool | None = None
) -> Any:
    parent = (ctx.find_root().obj or {}) if ctx else {}
    return _settings(
        memory=backend or parent.get("memory"),
        user=user or parent.get("user"),
        app=app_name or parent.get("app"),
        soft_delete=soft,
        env_file=parent.get("env_file"),
    )


@memory_app.command("list")
def list_memories(
    ctx: typer.Context,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many (0: all).")] = 0,
    deleted: Annotated[bool, typer.Option("--deleted", help="Include soft-deleted memories.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List memories, newest first."""
    settings = _memory_settings(ctx, backend, user, app_name)
    _print_entries(_run(settings, lambda svc, key: svc.read(key, limit, include_deleted=deleted)), as_json)


@memory_app.command("search")
def search_memories(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many results.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Search memories by keywords (English and Chinese)."""
    from memchat.engine import SearchOptions

    settings = _memory_settings(ctx, backend, user, app_name)
    options = SearchOptions(max_results=limit)
    _print_entries(_run(settings, lambda svc, key: svc.search(key, query, options)), as_json)


@memory_app.command("add")
def add_memory(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The memory, e.g. 'Likes green tea'.")],
    topic: Annotated[
        list[str] | None, typer.Option("--topic", "-t", help="A topic tag (repeatable).")
    ] = None,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
) -> None:
    """Add a memory (adding the same text again just refreshes it)."""
    settings = _memory_settings(ctx, backend, user, app_name)
    entry = _run(settings, lambda svc, key: svc.add(key, text, topics=topic or []))
    typer.echo(f"Added {entry.id}")


@memory_app.command("delete")
def delete_memory(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="Memory ID or a unique prefix of it.")],
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    soft: Annotated[
        bool, typer.Option("--soft-delete/--hard-delete", help="Keep a restorable tombstone (default).")
    ] = True,
) -> None:
    """Delete one memory (restorable unless --hard-delete)."""

    async def action(svc: Any, key: Any) -> str:
        full = await _resolve(svc, key, memory_id)
        await svc.delete(key, full)
        return full

    full = _run(_memory_settings(ctx, backend, user, app_name, soft), action)
    typer.echo(f"Deleted {full}" + ("" if soft else " for good"))


@memory_app.command("restore")
def restore_memory(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="Memory ID or a unique prefix of it.")],
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
) -> None:
    """Bring back a soft-deleted memory."""

    async def action(svc: Any, key: Any) -> Any:
        return await svc.restore(key, await _resolve(svc, key, memory_id))

    entry = _run(_memory_settings(ctx, backend, user, app_name, True), action)
    typer.echo(f"Restored {entry.id}: {entry.memory.text}")


@memory_app.command("clear")
def clear_memories(
    ctx: typer.Context,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    soft: Annotated[
        bool, typer.Option("--soft-delete/--hard-delete", help="Keep restorable tombstones (default).")
    ] = True,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete all of one user's memories."""
    settings = _memory_settings(ctx, backend, user, app_name, soft)
    if not yes and not typer.confirm(
        f"Delete every memory of user {settings.user!r} in app {settings.app!r}?"
    ):
        raise typer.Exit(1)
    typer.echo(f"Cleared {_run(settings, lambda svc, key: svc.clear(key))} memories")


@memory_app.command("count")
def count_memories(
    ctx: typer.Context,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
) -> None:
    """How many memories the user has."""
    typer.echo(str(_run(_memory_settings(ctx, backend, user, app_name), lambda svc, key: svc.count(key))))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
