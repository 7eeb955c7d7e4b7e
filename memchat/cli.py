"""Command line: ``memchat`` (the chat), ``memchat ask``, and ``memchat memory …``
to inspect and edit stored memories.

The settings' options come from their declarations (memchat/settings.py,
through memchat/cli_options.py). Heavy modules (the engine, backends' drivers,
Textual) are imported only inside the commands, so ``memchat --help`` stays
instant and the TUI's first frame waits for nothing it does not need.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
import sys
import textwrap
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, TypeVar

import typer

from .cli_help import HELP_OPTIONS, PlainHelpCommand, PlainHelpGroup, show_version
from .cli_options import fail as _fail
from .cli_options import setting_option, takes_settings
from .cli_options import utf8 as _utf8
from .engine.model import MemchatError
from .safe_text import one_line, printable
from .settings import SPECS
from .settings_spec import ASK, BACKEND_VARIABLES, CHAT

T = TypeVar("T")

#: The subcommand groups (`memchat memory …`, `sessions …`, `mcp …`), filled in below:
#: each a function importing the group's module (the chat needs none of them).
SUBGROUPS: dict[str, Callable[[], typer.Typer]] = {}


class MemchatGroup(PlainHelpGroup):
    """The root command: a subcommand group is imported and turned into click commands when
    it is named (or listed by --help), not on every start: importing and building all of
    them took ~30 ms of each `memchat` start (the chat runs none of them)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(name for name in SUBGROUPS if name not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in SUBGROUPS and cmd_name not in self.commands:
            # Built exactly as `app.add_typer(group, name=…)` would build it.
            holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
            holder.add_typer(SUBGROUPS[cmd_name](), name=cmd_name)
            self.add_command(typer.main.get_command(holder).commands[cmd_name], cmd_name)  # type: ignore[attr-defined]
        return super().get_command(ctx, cmd_name)


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
    cls=MemchatGroup,
)
memory_app = typer.Typer(
    help="Inspect and edit stored memories without the chat.",
    no_args_is_help=True,
    context_settings=HELP_OPTIONS,
    cls=PlainHelpGroup,
)


def _memory_group() -> typer.Typer:
    # `memchat memory list | search | add | delete | restore | clear | count`, and
    # `memchat memory export | import | migrate`: registered on memory_app when imported.
    from . import cli_memory, cli_portability  # noqa: F401

    return memory_app


SUBGROUPS["memory"] = _memory_group


def _backend_epilog() -> str:
    """The variables without a flag of their own, from the declarations."""
    # "\b" keeps click from re-wrapping the block.
    lines = ["\b", "Backend variables (environment, .env, or [env] in memchat.toml):"]
    for backend, names in BACKEND_VARIABLES.items():
        lines.append(f"  {backend}: {', '.join(names)}")
    lines.append("Model: OPENAI_API_KEY, OPENAI_BASE_URL, MEMCHAT_MODEL (or MODEL_NAME).")
    unflagged = [
        spec.env for spec in SPECS.values() if spec.env and not spec.flag and spec.env.startswith("MEMCHAT_")
    ]
    lines.append("Settings without a flag (config/.env.example describes each):")
    lines.extend(textwrap.wrap(", ".join(unflagged), 100, initial_indent="  ", subsequent_indent="  "))
    lines.append("MEMCHAT_CONFIG: a memchat.toml to read (config/memchat.toml shows every key).")
    return "\n".join(lines)


#: The settings' options (memchat/settings.py declares them) that other commands reuse.
if TYPE_CHECKING:  # what the options hold, for the type checker
    BackendOpt: TypeAlias = str | None
    UserOpt: TypeAlias = str | None
    AppOpt: TypeAlias = str | None
    TimeoutOpt: TypeAlias = str | None
    SearchOpt: TypeAlias = str | None
    SoftOpt: TypeAlias = bool | None
else:
    BackendOpt, UserOpt, AppOpt, TimeoutOpt, SearchOpt, SoftOpt = map(
        setting_option, ("memory", "user", "app", "timeout", "search", "soft_delete")
    )
YesOpt = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Do not ask for confirmation (required when stdin is not a terminal)."),
]
EnvFileOpt = Annotated[
    Path | None,
    typer.Option("--env-file", help="Read variables from this file instead of ./.env.", metavar="PATH"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def _stdin_is_terminal() -> bool:
    """Whether a person can answer a question (tests replace this)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


def _refuse_unless_terminal(doing: str) -> None:
    """Before asking: with no one to answer (a script, a pipe) refuse to go on,
    so that deleting for good always takes a person's "yes" or an explicit --yes."""
    if not _stdin_is_terminal():
        _fail(f"refusing to {doing} without confirmation (stdin is not a terminal): add --yes to confirm")


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


def _run_async(main: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine to the end; every expected failure (MemchatError) becomes
    one line on stderr with exit code 2."""
    try:
        return asyncio.run(main)
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

    return _run_async(main())


#: Options of the chat that later commands (`memchat --user alice memory list`) inherit.
SHARED = ("memory", "user", "app", "timeout", "search")


@app.callback(invoke_without_command=True, epilog=_backend_epilog())
@takes_settings(CHAT)
def chat(
    ctx: typer.Context,
    flags: dict[str, Any],
    env_file: EnvFileOpt = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print memchat's version and exit.", is_eager=True, callback=show_version
        ),
    ] = False,
) -> None:
    """Chat with long-term memory."""
    # `memchat --memory redis memory list` means the same as `memchat memory list --memory redis`.
    flags["env_file"] = env_file
    ctx.obj = {"env_file": env_file, **{name: flags[name] for name in SHARED}, "chat": flags}
    if ctx.invoked_subcommand is not None:
        return
    settings = _settings(**flags)
    _say_offline_fallback(settings)
    if not settings.plain and sys.stdin.isatty() and sys.stdout.isatty():
        from .tui import run_tui  # Textual is imported only here

        raise typer.Exit(run_tui(settings))
    from .console import run_console

    raise typer.Exit(_run_async(run_console(settings)))


def _say_offline_fallback(settings: Any) -> None:
    """A model was asked for, but there is no key: say on stderr that the offline model answers."""
    if not settings.offline_fallback:
        return  # the agent (and with it the engine) is imported only when there is something to say
    from .agent.factory import offline_notice

    notice = offline_notice(settings)
    if notice:
        typer.echo(notice, err=True)


@app.command("ask", cls=PlainHelpCommand)
@takes_settings(ASK)
def ask(
    ctx: typer.Context,
    flags: dict[str, Any],
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
) -> None:
    """Ask once and print only the answer (stdout), like `llm`: memchat ask "what do I like?" or
    echo "what do I like?" | memchat ask. Same memory, tools and settings as the chat; the chat's
    options before `ask` apply too (memchat --preload 5 ask …)."""
    parent = _parent_options(ctx).get("chat", {})
    flags = {**parent, **{k: v for k, v in flags.items() if v is not None}}
    if question is None:
        if _stdin_is_terminal():
            _fail('give a question: memchat ask "what do I like?", or pipe it in: echo … | memchat ask')
        question = sys.stdin.read()
    if not question.strip():
        _fail('the question is empty: memchat ask "what do I like?"')
    settings = _settings(**flags)
    _say_offline_fallback(settings)
    from .console import ask as ask_once

    answered = ask_once(settings, question.strip(), stdout=sys.stdout, stderr=sys.stderr, verbose=verbose)
    raise typer.Exit(_run_async(answered))


def _parent_options(ctx: typer.Context | None) -> dict[str, Any]:
    """The options given before the subcommand (`memchat --user alice memory list`):
    chat() keeps them on the root context."""
    return (ctx.find_root().obj or {}) if ctx else {}


def _pick(ctx: typer.Context | None, value: Any, name: str) -> Any:
    """A subcommand's own option, else the same option given before the subcommand: the one
    after wins. Only None is "not given" (an empty --user is an empty user, an error later)."""
    return value if value is not None else _parent_options(ctx).get(name)


@dataclass(frozen=True)
class StoreScope:
    """The store and the user a `memory` or `sessions` command works on, each picked
    by :func:`_pick` (so `memchat --user alice memory list` = `memchat memory list --user alice`)."""

    memory: str | None
    user: str | None
    app: str | None
    timeout: str | None
    parent: dict[str, Any]

    @classmethod
    def of(
        cls,
        ctx: typer.Context | None,
        backend: str | None,
        user: str | None,
        app_name: str | None,
        timeout: str | None,
    ) -> StoreScope:
        return cls(
            memory=_pick(ctx, backend, "memory"),
            user=_pick(ctx, user, "user"),
            app=_pick(ctx, app_name, "app"),
            timeout=_pick(ctx, timeout, "timeout"),
            parent=_parent_options(ctx),
        )

    def settings(self, soft: bool | None = None, search: str | None = None) -> Any:
        return _settings(
            memory=self.memory,
            user=self.user,
            app=self.app,
            timeout=self.timeout,
            search=search if search is not None else self.parent.get("search"),
            soft_delete=soft,
            env_file=self.parent.get("env_file"),
        )


#: The options that choose the store and the user: (parameter, setting).
_STORE_OPTIONS = (("backend", "memory"), ("user", "user"), ("app_name", "app"), ("timeout", "timeout"))


def store_options(func: Callable[..., None]) -> Callable[..., None]:
    """Give a command --memory, --user, --app and --timeout where its ``scope: StoreScope``
    parameter stands (so its help lists them in the same place), and hand them to it as one
    StoreScope: the `memory` and `sessions` commands all take these four, and all read them the
    same way. The command builds its settings when it is ready to (``delete`` checks its ID first)."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
    for own in inspect.signature(func, eval_str=True).parameters.values():
        if own.name != "scope":
            parameters.append(own.replace(kind=keyword))
            continue
        parameters += [
            inspect.Parameter(name, keyword, default=None, annotation=setting_option(setting))
            for name, setting in _STORE_OPTIONS
        ]

    @functools.wraps(func)
    def command(ctx: typer.Context, **kwargs: Any) -> None:
        given = [kwargs.pop(name) for name, _ in _STORE_OPTIONS]
        func(scope=StoreScope.of(ctx, *given), **kwargs)

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    return command


def _scope(settings: Any) -> str:
    return f"user {one_line(settings.user)!r} in app {one_line(settings.app)!r}"


def _sessions_group() -> typer.Typer:
    from .cli_sessions import sessions_app  # it uses the helpers above

    return sessions_app


def _mcp_group() -> typer.Typer:
    # `memchat mcp …` lives in its own module, which takes its options from this one.
    from .mcp.commands import mcp_app

    return mcp_app


SUBGROUPS["sessions"] = _sessions_group
SUBGROUPS["mcp"] = _mcp_group


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
