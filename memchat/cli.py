"""Command line: ``memchat memory …`` inspects and edits stored memories.

Heavy modules (backends' drivers) are imported only inside the commands, so
``memchat --help`` stays instant.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from .cli_help import HELP_OPTIONS, PlainHelpCommand, PlainHelpGroup, show_version
from .engine.model import MemchatError
from .safe_text import one_line, printable, safe_json

T = TypeVar("T")

app = typer.Typer(
    name="memchat",
    help=(
        "memchat: chat with an assistant that remembers you, on any of nine storage backends.\n\n"
        "Without OPENAI_API_KEY an offline rule-based model answers (it remembers and recalls what "
        "you tell it). `memchat memory --help` inspects and edits stored memories; "
        "`memchat sessions --help` lists, shows, exports and deletes saved conversations."
    ),
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=HELP_OPTIONS,
    cls=PlainHelpGroup,
)
memory_app = typer.Typer(
    help="Inspect and edit stored memories without the chat.",
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
    cls=PlainHelpGroup,
)
app.add_typer(memory_app, name="memory")


def _backend_epilog() -> str:
    from .settings import BACKEND_VARIABLES

    # "\b" keeps click from re-wrapping the block.
    lines = ["\b", "Backend variables (environment, .env, or [env] in memchat.toml):"]
    for backend, names in BACKEND_VARIABLES.items():
        lines.append(f"  {backend}: {', '.join(names)}")
    lines.append("Model: OPENAI_API_KEY, OPENAI_BASE_URL, MEMCHAT_MODEL (or MODEL_NAME).")
    lines.append("Defaults: MEMCHAT_MEMORY, MEMCHAT_USER, MEMCHAT_APP, MEMCHAT_PRELOAD, MEMCHAT_STREAMING,")
    lines.append("  MEMCHAT_SOFT_DELETE, MEMCHAT_MEMORY_LIMIT, MEMCHAT_TIMEOUT, MEMCHAT_HISTORY_TOKENS,")
    lines.append("  MEMCHAT_CONFIG (a memchat.toml).")
    lines.append(
        "Search: MEMCHAT_SEARCH (hybrid, semantic, keyword), MEMCHAT_EMBEDDER (default, e5, minilm, "
        "openai, none = keywords only)."
    )
    return "\n".join(lines)


def _check_utf8(value: Any, what: str) -> None:
    """Arguments that were not UTF-8 reach Python as surrogate escapes
    (``\\udcff`` for the byte 0xff): refuse them with one sentence."""
    for item in value if isinstance(value, list | tuple) else (value,):
        if not isinstance(item, str):
            continue
        bad = next((ch for ch in item if "\ud800" <= ch <= "\udfff"), None)
        if bad is not None:
            byte = f" (byte 0x{ord(bad) - 0xDC00:02x})" if "\udc80" <= bad <= "\udcff" else ""
            _fail(f"{what} is not valid UTF-8 text{byte}: check your terminal's encoding")


def _utf8(what: str) -> Callable[[Any], Any]:
    """A Typer parameter callback that rejects text that is not UTF-8."""

    def check(value: Any) -> Any:
        _check_utf8(value, what)
        return value

    return check


BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--memory",
        "-m",
        help="Storage backend: inmemory, sqlite, sqlitevec, redis, mysql, mysqlvec, postgres, pgvector, "
        "chromadb (default: $MEMCHAT_MEMORY, else sqlite in the user data folder).",
        show_default=False,
        callback=_utf8("--memory"),
        metavar="BACKEND",
    ),
]
UserOpt = Annotated[
    str | None,
    typer.Option(
        "--user",
        "-u",
        help="User id (default: user).",
        show_default=False,
        callback=_utf8("--user"),
        metavar="USER",
    ),
]
AppOpt = Annotated[
    str | None,
    typer.Option(
        "--app",
        help="App name (default: memory-chat).",
        show_default=False,
        callback=_utf8("--app"),
        metavar="NAME",
    ),
]
TimeoutOpt = Annotated[
    str | None,
    typer.Option(
        "--timeout",
        help="Give up on a backend operation (connect, query, lock wait) after this long, e.g. 10s "
        "(default 10s).",
        show_default=False,
        callback=_utf8("--timeout"),
        metavar="DURATION",
    ),
]


def _search_help() -> str:
    from .settings import Settings

    return Settings.help_for("search")


SearchOpt = Annotated[
    str | None,
    typer.Option(
        "--search", help=_search_help(), show_default=False, callback=_utf8("--search"), metavar="MODE"
    ),
]
YesOpt = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Do not ask for confirmation (required when stdin is not a terminal)."),
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
    Path | None,
    typer.Option("--env-file", help="Read variables from this file instead of ./.env.", metavar="PATH"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"memchat: {printable(message)}", err=True)
    raise typer.Exit(code)


def _stdin_is_terminal() -> bool:
    """Whether a person can answer a question (tests replace this)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def _confirm(question: str) -> None:
    """Ask on the terminal (on stderr, outside any event loop, so ctrl+c just
    aborts); "no" exits 1 with nothing changed."""
    if not typer.confirm(question, default=False, err=True):
        _fail("nothing was deleted", code=1)


def _settings(**flags: Any) -> Any:
    from .settings import Settings

    env_file = flags.pop("env_file", None)
    try:
        return Settings.load(flags, env_file=env_file)
    except MemchatError as exc:
        _fail(str(exc))


def _run(settings: Any, action: Callable[[Any, Any], Awaitable[T]]) -> T:
    """Open the chosen backend, run ``action(service, key)``, close, and turn
    every expected failure into one line on stderr with exit code 2. Filling in
    missing vectors on open shows a progress line on stderr."""
    from memchat.engine import UserKey

    from .agent.factory import create_service
    from .console import ProgressPrinter

    async def main() -> T:
        async with create_service(settings, progress=ProgressPrinter(sys.stderr)) as svc:
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
            "--model",
            metavar="MODEL",
            help="Chat model (default: deepseek-v4-flash; 'offline' for the offline model).",
            callback=_utf8("--model"),
        ),
    ] = None,
    streaming: Annotated[
        bool | None,
        typer.Option("--streaming/--no-streaming", help="Stream answers token by token (default: on)."),
    ] = None,
    soft_delete: SoftOpt = None,
    preload: Annotated[
        int | None,
        typer.Option(
            "--preload", metavar="N", help="Memories put in the prompt: 0 off (default), N adaptive, -1 all."
        ),
    ] = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    timeout: TimeoutOpt = None,
    search: SearchOpt = None,
    plain: Annotated[
        bool, typer.Option("--plain", help="Line-mode chat (automatic when not on a terminal).")
    ] = False,
    resume: Annotated[
        bool, typer.Option("--resume", "-c", help="Continue the most recent saved session.")
    ] = False,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Continue this saved session: its id or the end of it (`memchat sessions list`).",
            callback=_utf8("--session"),
        ),
    ] = None,
    env_file: EnvFileOpt = None,
    enable_tool: Annotated[
        list[str] | None,
        typer.Option(
            "--enable-tool",
            metavar="TOOL",
            help="Enable a memory tool, e.g. memory_delete (repeatable).",
            callback=_utf8("--enable-tool"),
        ),
    ] = None,
    disable_tool: Annotated[
        list[str] | None,
        typer.Option(
            "--disable-tool",
            metavar="TOOL",
            help="Disable a memory tool (repeatable).",
            callback=_utf8("--disable-tool"),
        ),
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
            metavar="MODEL",
            help="Model of the extractor (default: the chat model; 'offline' for the rule-based one, "
            "also used without OPENAI_API_KEY).",
            show_default=False,
            callback=_utf8("--extract-model"),
        ),
    ] = None,
    extract_every: Annotated[
        int | None,
        typer.Option(
            "--extract-every",
            metavar="N",
            help="Extract once N new messages are pending (a turn is 2: yours and the answer). "
            "Default: after every turn.",
            show_default=False,
        ),
    ] = None,
    extract_interval: Annotated[
        str | None,
        typer.Option(
            "--extract-interval",
            metavar="DURATION",
            help="Extract once this long has passed since the last extraction, e.g. 90s, 3m, 1h "
            "(with --extract-every: whichever comes first).",
            show_default=False,
            callback=_utf8("--extract-interval"),
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", metavar="N", help="Background extraction workers (default: 1).", show_default=False
        ),
    ] = None,
    queue_size: Annotated[
        int | None,
        typer.Option(
            "--queue-size",
            metavar="N",
            help="Extraction jobs waiting per worker (default: 10); when full, jobs wait their turn "
            "without blocking the chat.",
            show_default=False,
        ),
    ] = None,
    job_timeout: Annotated[
        str | None,
        typer.Option(
            "--job-timeout",
            metavar="DURATION",
            help="Time limit of one extraction, e.g. 30s (default).",
            show_default=False,
            callback=_utf8("--job-timeout"),
        ),
    ] = None,
    expose_tool: Annotated[
        list[str] | None,
        typer.Option(
            "--expose-tool",
            metavar="TOOL",
            help="In auto mode, also show this memory tool to the model, e.g. memory_add (repeatable).",
            callback=_utf8("--expose-tool"),
        ),
    ] = None,
    update_policy: Annotated[
        str | None,
        typer.Option(
            "--update-policy",
            metavar="POLICY",
            help="How extracted changes apply: merge_similar (default), preserve_history, append_only.",
            show_default=False,
            callback=_utf8("--update-policy"),
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print memchat's version and exit.", is_eager=True, callback=show_version
        ),
    ] = False,
) -> None:
    """Chat with long-term memory."""
    # `memchat --memory redis memory list` means the same as `memchat memory list --memory redis`.
    flags = dict(
        memory=memory, model=model, streaming=streaming, soft_delete=soft_delete, preload=preload,
        user=user, app=app_name, timeout=timeout, search=search, enable_tools=tuple(enable_tool or ()),
        disable_tools=tuple(disable_tool or ()), env_file=env_file,
        extract=extract, extract_model=extract_model, extract_every=extract_every,
        extract_interval=extract_interval, workers=workers, queue_size=queue_size, job_timeout=job_timeout,
        expose_tools=tuple(expose_tool or ()), update_policy=update_policy,
        resume=resume or None, session=session,
    )  # fmt: skip
    ctx.obj = {
        "env_file": env_file, "memory": memory, "user": user, "app": app_name, "timeout": timeout,
        "search": search, "chat": flags,
    }  # fmt: skip
    if ctx.invoked_subcommand is not None:
        return
    settings = _settings(**flags)
    _say_offline_fallback(settings)
    if not plain and sys.stdin.isatty() and sys.stdout.isatty():
        from .tui import run_tui  # Textual is imported only here

        raise typer.Exit(run_tui(settings))
    from .console import run_console

    try:
        code = asyncio.run(run_console(settings))
    except MemchatError as exc:
        _fail(str(exc))
    raise typer.Exit(code)


def _say_offline_fallback(settings: Any) -> None:
    """A model was asked for, but there is no key: say on stderr that the offline model answers."""
    from .agent.factory import offline_notice

    notice = offline_notice(settings)
    if notice:
        typer.echo(notice, err=True)


@app.command("ask", cls=PlainHelpCommand)
def ask(
    ctx: typer.Context,
    question: Annotated[
        str | None,
        typer.Argument(
            help="The question or message (default: read from stdin).",
            callback=_utf8("the question"),
            metavar="QUESTION",
            show_default=False,
        ),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Also show the banner and the memory tool calls (on stderr)."),
    ] = False,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", metavar="MODEL", help="Chat model (as for the chat).", callback=_utf8("--model")
        ),
    ] = None,
    timeout: TimeoutOpt = None,
    search: SearchOpt = None,
) -> None:
    """Ask once and print only the answer (stdout), like `llm`: memchat ask "what do I like?" or
    echo "what do I like?" | memchat ask. Same memory, tools and settings as the chat; the chat's
    options before `ask` apply too (memchat --preload 5 ask …)."""
    parent = (ctx.find_root().obj or {}).get("chat", {})
    given = {"memory": backend, "user": user, "app": app_name, "model": model, "timeout": timeout,
             "search": search}  # fmt: skip
    flags = {**parent, **{k: v for k, v in given.items() if v is not None}}
    if question is None:
        if _stdin_is_terminal():
            _fail('give a question: memchat ask "what do I like?", or pipe it in: echo … | memchat ask')
        question = sys.stdin.read()
    if not question.strip():
        _fail('the question is empty: memchat ask "what do I like?"')
    settings = _settings(**flags)
    _say_offline_fallback(settings)
    from .console import ask as ask_once

    try:
        code = asyncio.run(ask_once(settings, question.strip(), stdout=sys.stdout, stderr=sys.stderr,
                                    verbose=verbose))  # fmt: skip
    except MemchatError as exc:
        _fail(str(exc))
    raise typer.Exit(code)


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


def _memory_settings(
    ctx: typer.Context,
    backend: str | None,
    user: str | None,
    app_name: str | None,
    timeout: str | None,
    soft: bool | None = None,
    search: str | None = None,
) -> Any:
    # `memchat --user alice memory list` = `memchat memory list --user alice`; the option after
    # `memory` wins. An empty --user is an empty user (an error), not "not given".
    parent = (ctx.find_root().obj or {}) if ctx else {}

    def pick(value: str | None, name: str) -> str | None:
        return value if value is not None else parent.get(name)

    return _settings(
        memory=pick(backend, "memory"),
        user=pick(user, "user"),
        app=pick(app_name, "app"),
        timeout=pick(timeout, "timeout"),
        search=pick(search, "search"),
        soft_delete=soft,
        env_file=parent.get("env_file"),
    )


def _scope(settings: Any) -> str:
    return f"user {one_line(settings.user)!r} in app {one_line(settings.app)!r}"


@memory_app.command("list", cls=PlainHelpCommand)
def list_memories(
    ctx: typer.Context,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    timeout: TimeoutOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="At most this many (0: all).")] = 0,
    deleted: Annotated[bool, typer.Option("--deleted", help="Include soft-deleted memories.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List memories, newest first."""
    settings = _memory_settings(ctx, backend, user, app_name, timeout)
    _print_entries(_run(settings, lambda svc, key: svc.read(key, limit, include_deleted=deleted)), as_json)


@memory_app.command("search", cls=PlainHelpCommand)
def search_memories(
    ctx: typer.Context,
    query: Annotated[
        str, typer.Argument(help="What to look for.", callback=_utf8("the search query"), metavar="QUERY")
    ],
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    timeout: TimeoutOpt = None,
    search: SearchOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", metavar="N", help="At most this many results.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Search memories by meaning and keywords (any language), ranked as the chat's memory_search
    tool ranks them; the score is a 0-1 relevance."""
    from memchat.engine import SearchOptions

    from .agent.factory import embedder_notice

    settings = _memory_settings(ctx, backend, user, app_name, timeout, search=search)
    notice = embedder_notice(settings)
    if notice:
        typer.echo(notice, err=True)
    # The mode is the service's (settings.search): the same path as the tool, preload and the TUI.
    options = SearchOptions(max_results=limit)
    _print_entries(_run(settings, lambda svc, key: svc.search(key, query, options)), as_json)


@memory_app.command("add", cls=PlainHelpCommand)
def add_memory(
    ctx: typer.Context,
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
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Add a memory (adding the same text again just refreshes it)."""
    settings = _memory_settings(ctx, backend, user, app_name, timeout)
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
def delete_memory(
    ctx: typer.Context,
    memory_id: MemoryIdArg,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    timeout: TimeoutOpt = None,
    soft: Annotated[
        bool, typer.Option("--soft-delete/--hard-delete", help="Keep a restorable tombstone (default).")
    ] = True,
    yes: YesOpt = False,
) -> None:
    """Delete one memory (restorable unless --hard-delete, which asks first)."""
    prefix = _checked_id(memory_id)
    settings = _memory_settings(ctx, backend, user, app_name, timeout, soft)
    target = ""
    if not soft and not yes:  # show what goes: look it up, ask, then delete exactly that ID
        if not _stdin_is_terminal():
            _fail(
                f"refusing to delete memory {prefix} for good without confirmation "
                "(stdin is not a terminal): add --yes to confirm"
            )
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
def restore_memory(
    ctx: typer.Context,
    memory_id: MemoryIdArg,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Bring back a soft-deleted memory."""
    prefix = _checked_id(memory_id)

    async def action(svc: Any, key: Any) -> Any:
        return await svc.restore(key, await _resolve(svc, key, prefix))

    entry = _run(_memory_settings(ctx, backend, user, app_name, timeout, True), action)
    typer.echo(f"Restored {entry.id}: {one_line(entry.memory.text)}")


@memory_app.command("clear", cls=PlainHelpCommand)
def clear_memories(
    ctx: typer.Context,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    timeout: TimeoutOpt = None,
    soft: Annotated[
        bool, typer.Option("--soft-delete/--hard-delete", help="Keep restorable tombstones (default).")
    ] = True,
    yes: YesOpt = False,
) -> None:
    """Delete all of one user's memories (asks first; --yes does not)."""
    settings = _memory_settings(ctx, backend, user, app_name, timeout, soft)
    if not yes:
        if not _stdin_is_terminal():
            _fail(
                f"refusing to delete every memory of {_scope(settings)} without confirmation "
                "(stdin is not a terminal): add --yes to confirm"
            )

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
def count_memories(
    ctx: typer.Context,
    backend: BackendOpt = None,
    user: UserOpt = None,
    app_name: AppOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """How many memories the user has."""
    settings = _memory_settings(ctx, backend, user, app_name, timeout)
    typer.echo(str(_run(settings, lambda svc, key: svc.count(key))))


from .cli_sessions import sessions_app  # noqa: E402 - it uses the helpers above

app.add_typer(sessions_app, name="sessions")

# `memchat mcp …` lives in its own module, which takes its options from this one.
from .mcp.commands import mcp_app  # noqa: E402

app.add_typer(mcp_app, name="mcp")

# `memchat memory export | import | migrate` (registered on memory_app when imported).
from . import cli_portability  # noqa: E402, F401


def _tolerate_unencodable_output() -> None:
    """A terminal whose encoding cannot show a character gets "?" instead of a traceback."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a closed or unusual stream
                reconfigure(errors="replace")


def main() -> None:
    """The console script: every expected failure is one line on stderr, never a traceback.
    An unexpected exception (a bug) is one line too, unless MEMCHAT_DEBUG is set."""
    _tolerate_unencodable_output()
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except MemchatError as exc:
        typer.echo(f"memchat: {printable(str(exc))}", err=True)
        sys.exit(2)
    except Exception as exc:
        if os.environ.get("MEMCHAT_DEBUG", "") not in ("", "0"):
            raise
        detail = one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        typer.echo(
            f"memchat: unexpected error ({detail}); this is a bug in memchat: run again with "
            "MEMCHAT_DEBUG=1 to see the traceback, and please report it",
            err=True,
        )
        sys.exit(1)
