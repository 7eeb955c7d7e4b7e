"""Command line: ``memchat memory …`` inspects and edits stored memories.

Heavy modules (backends' drivers) are imported only inside the commands, so
``memchat --help`` stays instant.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from .cli_help import HELP_OPTIONS, PlainHelpCommand, PlainHelpGroup, show_version
from .engine.model import MemchatError
from .safe_text import one_line, printable

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


from .cli_sessions import sessions_app  # noqa: E402 - it uses the helpers above

app.add_typer(sessions_app, name="sessions")

# `memchat mcp …` lives in its own module, which takes its options from this one.
from .mcp.commands import mcp_app  # noqa: E402

app.add_typer(mcp_app, name="mcp")

# `memchat memory list | search | add | delete | restore | clear | count`, and
# `memchat memory export | import | migrate` (registered on memory_app when imported).
from . import cli_memory, cli_portability  # noqa: E402, F401


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
