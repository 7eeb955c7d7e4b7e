"""``memchat memory list | search | add | delete | restore | clear | count``:
the memory commands, registered on ``memory_app`` when ``cli.py`` imports this
module (the options, settings and error helpers are cli.py's)."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

from .cli import (
    JsonOpt,
    SearchOpt,
    StoreScope,
    YesOpt,
    _confirm,
    _fail,
    _refuse_unless_terminal,
    _run,
    _scope,
    _utf8,
    memory_app,
    store_options,
)
from .cli_help import PlainHelpCommand
from .engine.model import MemchatError
from .safe_text import one_line, safe_json


def _print_entries(entries: list[Any], as_json: bool) -> None:
    # Memory text comes from a model: no control or escape sequence reaches the terminal.
    if as_json:
        typer.echo(safe_json([e.to_dict() for e in entries], indent=2))
        return
    if not entries:
        typer.echo("No memories.")
        return
    for e in entries:
        topics = f"  [{one_line(', '.join(e.memory.topics))}]" if e.memory.topics else ""
        score = f"  ({e.score:.3f})" if e.score else ""
        deleted = "  (deleted)" if e.is_deleted else ""
        stamp = e.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
        typer.echo(f"{e.id[:12]}  {stamp}  {one_line(e.memory.text)}{topics}{score}{deleted}")


#: The shortest ID prefix accepted (``list`` prints 12 characters).
MIN_PREFIX = 6
ID_LENGTH = 64
_HEX = re.compile(r"[0-9a-f]+")


def _checked_id(given: str) -> str:
    """The ID or prefix to look up, or a one-sentence error (before any backend is opened):
    not blank, hexadecimal, at least ``MIN_PREFIX`` characters, at most a full ID."""
    prefix = given.strip().lower()
    if not prefix:
        _fail(
            f"the memory ID is empty: give at least {MIN_PREFIX} characters of the ID "
            "as `memchat memory list` prints it"
        )
    if not _HEX.fullmatch(prefix):
        _fail(
            f"{one_line(given)!r} is not a memory ID: IDs are hexadecimal (0-9 and a-f) "
            "as `memchat memory list` prints them"
        )
    if len(prefix) < MIN_PREFIX:
        _fail(
            f"ID prefix {prefix!r} is too short: give at least {MIN_PREFIX} characters of the ID "
            "as `memchat memory list` prints it"
        )
    if len(prefix) > ID_LENGTH:
        _fail(f"{prefix[:12]}… has {len(prefix)} characters, but a memory ID has {ID_LENGTH}: check it")
    return prefix


async def _lookup(svc: Any, key: Any, prefix: str) -> Any:
    return await svc.get(key, await _resolve(svc, key, prefix), include_deleted=True)


async def _resolve(svc: Any, key: Any, prefix: str) -> str:
    """Accept a unique ID prefix (as ``list`` prints them) as well as a full ID;
    ``prefix`` has passed :func:`_checked_id`."""
    if len(prefix) == ID_LENGTH:
        return prefix
    matches = [e.id for e in await svc.read(key, include_deleted=True) if e.id.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    from memchat.engine import MemoryNotFoundError

    if not matches:
        raise MemoryNotFoundError(prefix)
    raise MemchatError(f"ID prefix {prefix!r} matches {len(matches)} memories: give more characters")


@memory_app.command("list", cls=PlainHelpCommand)
@store_options
def list_memories(
    *,
    scope: StoreScope,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="At most this many (0: all).")] = 0,
    deleted: Annotated[bool, typer.Option("--deleted", help="Include soft-deleted memories.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List memories, newest first."""
    settings = scope.settings()
    _print_entries(_run(settings, lambda svc, key: svc.read(key, limit, include_deleted=deleted)), as_json)


@memory_app.command("search", cls=PlainHelpCommand)
@store_options
def search_memories(
    *,
    query: Annotated[
        str, typer.Argument(help="What to look for.", callback=_utf8("the search query"), metavar="QUERY")
    ],
    scope: StoreScope,
    search: SearchOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="At most this many results.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Search memories by meaning and keywords (any language), ranked as the chat's memory_search
    tool ranks them; the score is a 0-1 relevance."""
    from memchat.engine import SearchOptions

    from .agent.factory import embedder_notice

    settings = scope.settings(search=search)
    notice = embedder_notice(settings)
    if notice:
        typer.echo(notice, err=True)
    # The mode is the service's (settings.search): the same path as the tool, preload and the TUI.
    options = SearchOptions(max_results=limit)
    _print_entries(_run(settings, lambda svc, key: svc.search(key, query, options)), as_json)


@memory_app.command("add", cls=PlainHelpCommand)
@store_options
def add_memory(
    *,
    text: Annotated[
        str,
        typer.Argument(
            help="The memory, e.g. 'Likes green tea'.", callback=_utf8("the memory text"), metavar="TEXT"
        ),
    ],
    topic: Annotated[
        list[str] | None,
        typer.Option(
            "--topic", "-t", metavar="TOPIC", help="A topic tag (repeatable).", callback=_utf8("--topic")
        ),
    ] = None,
    scope: StoreScope,
) -> None:
    """Add a memory (adding the same text again just refreshes it)."""
    settings = scope.settings()
    entry = _run(settings, lambda svc, key: svc.add(key, text, topics=topic or []))
    typer.echo(f"Added {entry.id}")


MemoryIdArg = Annotated[
    str,
    typer.Argument(
        help="Memory ID or a unique prefix of it (at least 6 characters).",
        callback=_utf8("the memory ID"),
        metavar="ID",
    ),
]


@memory_app.command("delete", cls=PlainHelpCommand)
@store_options
def delete_memory(
    *,
    memory_id: MemoryIdArg,
    scope: StoreScope,
    soft: Annotated[
        bool, typer.Option("--soft-delete/--hard-delete", help="Keep a restorable tombstone (default).")
    ] = True,
    yes: YesOpt = False,
) -> None:
    """Delete one memory (restorable unless --hard-delete, which asks first)."""
    prefix = _checked_id(memory_id)
    settings = scope.settings(soft)
    target = ""
    if not soft and not yes:  # show what goes: look it up, ask, then delete exactly that ID
        _refuse_unless_terminal(f"delete memory {prefix} for good")
        entry = _run(settings, lambda svc, key: _lookup(svc, key, prefix))
        _confirm(
            f"Memory {entry.id[:12]} of {_scope(settings)}: {one_line(entry.memory.text)}\n"
            "Delete it for good (it cannot be restored)?"
        )
        target = entry.id

    async def action(svc: Any, key: Any) -> str:
        full = target or await _resolve(svc, key, prefix)
        await svc.delete(key, full)
        return full

    full = _run(settings, action)
    typer.echo(f"Deleted {full}" + ("" if soft else " for good"))


@memory_app.command("restore", cls=PlainHelpCommand)
@store_options
def restore_memory(
    *,
    memory_id: MemoryIdArg,
    scope: StoreScope,
) -> None:
    """Bring back a soft-deleted memory."""
    prefix = _checked_id(memory_id)

    async def action(svc: Any, key: Any) -> Any:
        return await svc.restore(key, await _resolve(svc, key, prefix))

    entry = _run(scope.settings(True), action)
    typer.echo(f"Restored {entry.id}: {one_line(entry.memory.text)}")


@memory_app.command("clear", cls=PlainHelpCommand)
@store_options
def clear_memories(
    *,
    scope: StoreScope,
    soft: Annotated[
        bool, typer.Option("--soft-delete/--hard-delete", help="Keep restorable tombstones (default).")
    ] = True,
    yes: YesOpt = False,
) -> None:
    """Delete all of one user's memories (asks first; --yes does not)."""
    settings = scope.settings(soft)
    if not yes:
        _refuse_unless_terminal(f"delete every memory of {_scope(settings)}")

        async def counts(svc: Any, key: Any) -> tuple[int, int]:
            return await svc.count(key), await svc.count(key, include_deleted=True)

        active, everything = _run(settings, counts)
        what = "the 1 memory" if active == 1 else f"all {active} memories"
        if soft:
            _confirm(f"Delete {what} of {_scope(settings)} (restorable with `memchat memory restore`)?")
        else:
            tombstones = everything - active
            if tombstones:
                what += f" and {tombstones} deleted {'one' if tombstones == 1 else 'ones'}"
            _confirm(f"Delete {what} of {_scope(settings)} for good (they cannot be restored)?")
    cleared = _run(settings, lambda svc, key: svc.clear(key))
    typer.echo(f"Cleared {cleared} memories")


@memory_app.command("count", cls=PlainHelpCommand)
@store_options
def count_memories(
    *,
    scope: StoreScope,
) -> None:
    """How many memories the user has."""
    settings = scope.settings()
    typer.echo(str(_run(settings, lambda svc, key: svc.count(key))))
