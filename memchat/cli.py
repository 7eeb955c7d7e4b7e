"""Command line: ``memchat memory …`` inspects and edits stored memories.

Heavy modules (backends' drivers) are imported only inside the commands, so
``memchat --help`` stays instant.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer

from .engine.model import MemchatError

T = TypeVar("T")

DEFAULT_APP = "memory-chat"
DEFAULT_USER = "user"

app = typer.Typer(
    name="memchat",
    help="memchat: a terminal chat with long-term memory, and the memory engine behind it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
memory_app = typer.Typer(help="Inspect and edit stored memories without the chat.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")

BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--memory",
        "-m",
        help="Storage backend (default: $MEMCHAT_MEMORY, else sqlite in the user data folder).",
        show_default=False,
    ),
]
UserOpt = Annotated[str, typer.Option("--user", "-u", envvar="MEMCHAT_USER", help="User id.")]
AppOpt = Annotated[str, typer.Option("--app", envvar="MEMCHAT_APP", help="App name.")]
SoftOpt = Annotated[
    bool, typer.Option("--soft-delete/--hard-delete", help="Keep deleted memories as restorable tombstones.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"memchat: {message}", err=True)
    raise typer.Exit(code)


def _run(
    backend: str | None,
    user: str,
    app_name: str,
    soft: bool,
    action: Callable[[Any, Any], Awaitable[T]],
) -> T:
    """Open the chosen backend, run ``action(service, key)``, close, and turn
    every expected failure into one line on stderr with exit code 2."""
    from backends import create
    from memchat.engine import MemoryService, UserKey

    name = backend or os.environ.get("MEMCHAT_MEMORY") or "sqlite"

    async def main() -> T:
        async with MemoryService(create(name), soft_delete=soft) as svc:
            return await action(svc, UserKey(app_name, user))

    try:
        return asyncio.run(main())
    except MemchatError as exc:
        _fail(str(exc))
    raise AssertionError("unreachable")


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


@memory_app.command("list")
def list_memories(
    backend: BackendOpt = None,
    user: UserOpt = DEFAULT_USER,
    app_name: AppOpt = DEFAULT_APP,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many (0: all).")] = 0,
    deleted: Annotated[bool, typer.Option("--deleted", help="Include soft-deleted memories.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List memories, newest first."""
    entries = _run(
        backend, user, app_name, False, lambda svc, key: svc.read(key, limit, include_deleted=deleted)
    )
    _print_entries(entries, as_json)


@memory_app.command("search")
def search_memories(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    backend: BackendOpt = None,
    user: UserOpt = DEFAULT_USER,
    app_name: AppOpt = DEFAULT_APP,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many results.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Search memories by keywords (English and Chinese)."""
    from memchat.engine import SearchOptions

    entries = _run(
        backend,
        user,
        app_name,
        False,
        lambda svc, key: svc.search(key, query, SearchOptions(max_results=limit)),
    )
    _print_entries(entries, as_json)


@memory_app.command("add")
def add_memory(
    text: Annotated[str, typer.Argument(help="The memory, e.g. 'Likes green tea'.")],
    topic: Annotated[
        list[str] | None, typer.Option("--topic", "-t", help="A topic tag (repeatable).")
    ] = None,
    backend: BackendOpt = None,
    user: UserOpt = DEFAULT_USER,
    app_name: AppOpt = DEFAULT_APP,
) -> None:
    """Add a memory (adding the same text again just refreshes it)."""
    entry = _run(backend, user, app_name, False, lambda svc, key: svc.add(key, text, topics=topic or []))
    typer.echo(f"Added {entry.id}")


@memory_app.command("delete")
def delete_memory(
    memory_id: Annotated[str, typer.Argument(help="Memory ID or a unique prefix of it.")],
    backend: BackendOpt = None,
    user: UserOpt = DEFAULT_USER,
    app_name: AppOpt = DEFAULT_APP,
    soft: SoftOpt = True,
) -> None:
    """Delete one memory (restorable unless --hard-delete)."""

    async def action(svc: Any, key: Any) -> str:
        full = await _resolve(svc, key, memory_id)
        await svc.delete(key, full)
        return full

    full = _run(backend, user, app_name, soft, action)
    typer.echo(f"Deleted {full}" + ("" if soft else " for good"))


@memory_app.command("restore")
def restore_memory(
    memory_id: Annotated[str, typer.Argument(help="Memory ID or a unique prefix of it.")],
    backend: BackendOpt = None,
    user: UserOpt = DEFAULT_USER,
    app_name: AppOpt = DEFAULT_APP,
) -> None:
    """Bring back a soft-deleted memory."""

    async def action(svc: Any, key: Any) -> Any:
        return await svc.restore(key, await _resolve(svc, key, memory_id))

    entry = _run(backend, user, app_name, True, action)
    typer.echo(f"Restored {entry.id}: {entry.memory.text}")


@memory_app.command("clear")
def clear_memories(
    backend: BackendOpt = None,
    user: UserOpt = DEFAULT_USER,
    app_name: AppOpt = DEFAULT_APP,
    soft: SoftOpt = True,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete all of one user's memories."""
    if not yes and not typer.confirm(f"Delete every memory of user {user!r} in app {app_name!r}?"):
        raise typer.Exit(1)
    count = _run(backend, user, app_name, soft, lambda svc, key: svc.clear(key))
    typer.echo(f"Cleared {count} memories")


@memory_app.command("count")
def count_memories(
    backend: BackendOpt = None,
    user: UserOpt = DEFAULT_USER,
    app_name: AppOpt = DEFAULT_APP,
) -> None:
    """How many memories the user has."""
    typer.echo(str(_run(backend, user, app_name, False, lambda svc, key: svc.count(key))))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
