"""``memchat sessions …``: the saved conversations without the chat — list
(and search), show, export to Markdown or JSON, rename, delete."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from .cli import (
    JsonOpt,
    StoreScope,
    YesOpt,
    _confirm,
    _fail,
    _refuse_unless_terminal,
    _run_async,
    _scope,
    _utf8,
    store_options,
)
from .engine.model import MemchatError
from .safe_text import one_line, printable, safe_json

T = TypeVar("T")

sessions_app = typer.Typer(
    help="List, show, export and delete saved conversations (kept beside the memories).",
    no_args_is_help=True,
)

SessionArg = Annotated[
    str,
    typer.Argument(
        help="Session id as `memchat sessions list` prints it (or the end of it).",
        callback=_utf8("the session id"),
    ),
]


def _run(settings: Any, action: Callable[[Any, Any], Awaitable[T]]) -> T:
    """Open the session store of the chosen backend (not the memory service:
    no embedder loads), run ``action(recorder, key)``, close; expected
    failures are one line on stderr, exit code 2."""
    from memchat.engine import UserKey
    from memchat.sessions.factory import create_session_store
    from memchat.sessions.recorder import SessionRecorder

    async def main() -> T:
        key = UserKey(settings.app, settings.user)
        store = create_session_store(settings)
        recorder = SessionRecorder(store, key)
        try:
            await store.open()
            return await action(recorder, key)
        finally:
            await recorder.close()

    return _run_async(main())


async def _find(recorder: Any, session_id: str) -> Any:
    from .agent.sessions import find_session

    return await find_session(recorder, session_id)


async def _find_with_records(recorder: Any, key: Any, session_id: str) -> tuple[Any, Any]:
    """The session (as :func:`_find` finds it) and everything recorded in it: what show and export print."""
    info = await _find(recorder, session_id)
    return info, await recorder.store.records(key, info.id)


@sessions_app.command("list")
@store_options
def list_sessions(
    *,
    query: Annotated[
        str | None,
        typer.Option(
            "--search",
            "-s",
            help="Only sessions whose title or messages hold this text.",
            callback=_utf8("--search"),
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many (0: all).")] = 0,
    scope: StoreScope,
    as_json: JsonOpt = False,
) -> None:
    """Saved sessions, most recently active first."""
    from .sessions_text import session_row

    settings = scope.settings()
    sessions = _run(settings, lambda rec, key: rec.store.list(key, query=query or "", limit=max(0, limit)))
    if as_json:
        typer.echo(safe_json([s.to_dict() for s in sessions], indent=2))
    elif not sessions:
        typer.echo("No saved sessions." if not query else f"No saved session holds {one_line(query)!r}.")
        if settings.memory == "inmemory":
            typer.echo("(The inmemory backend keeps sessions only while memchat runs.)")
    else:
        for info in sessions:
            typer.echo(session_row(info).removeprefix("  "))


@sessions_app.command("show")
@store_options
def show_session(
    *,
    session_id: SessionArg,
    scope: StoreScope,
    as_json: JsonOpt = False,
) -> None:
    """One session: its details and the conversation."""
    from .sessions.export import to_json
    from .sessions_text import conversation_lines, when

    settings = scope.settings()
    info, records = _run(settings, lambda recorder, key: _find_with_records(recorder, key, session_id))
    if as_json:
        typer.echo(printable(to_json(info, records)).rstrip("\n"))
        return
    typer.echo(f"{info.id}: {one_line(info.title)}")
    typer.echo(
        f"{info.message_count} messages · started {when(info.created_at)} · last {when(info.updated_at)} · "
        f"model {one_line(info.model or '?')} · backend {one_line(info.backend or '?')}"
    )
    typer.echo("")
    for line in conversation_lines(records):
        typer.echo(line)


@sessions_app.command("export")
@store_options
def export_session(
    *,
    session_id: SessionArg,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="markdown (md, the default) or json; else from --output's extension.",
            callback=_utf8("--format"),
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file (default: print it).")
    ] = None,
    scope: StoreScope,
) -> None:
    """A session as Markdown (to read or share) or JSON (everything, to process)."""
    from .sessions.export import export, format_for

    try:
        chosen = format_for(str(output or ""), fmt)
    except MemchatError as exc:
        _fail(str(exc))
    settings = scope.settings()
    info, records = _run(settings, lambda recorder, key: _find_with_records(recorder, key, session_id))
    text = export(info, records, chosen)
    if output is None:
        typer.echo(printable(text).rstrip("\n"))
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {output}: {exc.strerror or exc}; give another --output")
    typer.echo(f"Exported {info.id} ({info.message_count} messages) to {output}")


@sessions_app.command("rename")
@store_options
def rename_session(
    *,
    session_id: SessionArg,
    title: Annotated[str, typer.Argument(help="The new title.", callback=_utf8("the title"))],
    scope: StoreScope,
) -> None:
    """Give a session another title."""
    settings = scope.settings()

    async def action(recorder: Any, key: Any) -> Any:
        info = await _find(recorder, session_id)
        return await recorder.store.rename(key, info.id, title)

    info = _run(settings, action)
    typer.echo(f"Renamed {info.id}: {one_line(info.title)}")


@sessions_app.command("delete")
@store_options
def delete_session(
    *,
    session_id: SessionArg,
    scope: StoreScope,
    yes: YesOpt = False,
) -> None:
    """Delete a saved session for good (asks first; --yes does not). Memories are kept."""
    settings = scope.settings()
    info = _run(settings, lambda recorder, key: _find(recorder, session_id))
    if not yes:
        _refuse_unless_terminal(f"delete session {info.id}")
        _confirm(
            f"Session {info.id} of {_scope(settings)}: {one_line(info.title)} "
            f"({info.message_count} messages)\n"
            "Delete it for good (memories are kept)?"
        )
    _run(settings, lambda recorder, key: recorder.store.delete(key, info.id))
    typer.echo(f"Deleted session {info.id}")
