"""``memchat mcp``: serve the memory tools to other agents, and manage HTTP tokens.

Registered on the main Typer app by ``memchat/cli.py``; the options are the
chat's own (``--memory``, ``--user``, ``--enable-tool``…: the settings declared
for ``mcp`` in memchat/settings.py) and resolve through the same Settings.
The SDK is imported only when a server starts.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

import typer

from memchat.cli import SHARED, AppOpt, _fail, _parent_options, _pick, _settings, _utf8
from memchat.cli_options import takes_settings
from memchat.engine.model import MemchatError
from memchat.safe_text import one_line
from memchat.settings_spec import MCP

mcp_app: typer.Typer = typer.Typer(
    help="Serve your memories to other agents over the Model Context Protocol (stdio, or HTTP with tokens).",
)
token_app = typer.Typer(help="Bearer tokens for `memchat mcp --http`.", no_args_is_help=True)
mcp_app.add_typer(token_app, name="token")


@mcp_app.callback(invoke_without_command=True)
@takes_settings(MCP)
def serve(
    ctx: typer.Context,
    flags: dict[str, Any],
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            help="Serve streamable HTTP on HOST:PORT (a bare PORT is 127.0.0.1:PORT) instead of stdio; "
            "each request then needs a token from `memchat mcp token create`.",
            show_default=False,
            metavar="HOST:PORT",
            callback=_utf8("--http"),
        ),
    ] = None,
) -> None:
    """Start the MCP server (stdio by default, for desktop clients: they start this command)."""
    if ctx.invoked_subcommand is not None:
        return
    # `memchat --memory redis mcp` = `memchat mcp --memory redis`; the option after `mcp` wins.
    flags.update({name: _pick(ctx, flags[name], name) for name in SHARED})
    if http is not None and (flags["user"] is not None or flags["app"] is not None):
        _fail(
            "over HTTP each request's token says who is calling: drop --user/--app, and create a "
            "token per user with `memchat mcp token create --user NAME`"
        )
    settings = _settings(**flags, env_file=_parent_options(ctx).get("env_file"))
    from .run import configure_logging, require_sdk, run_http, run_stdio

    configure_logging()
    try:
        require_sdk()
        if http is None:
            if sys.stdin.isatty():
                typer.echo(
                    "memchat mcp: waiting for an MCP client on stdin; this command is meant to be started "
                    "by an MCP client (see the README), ctrl+c stops it",
                    err=True,
                )
            asyncio.run(run_stdio(settings))
        else:
            from .http import parse_address

            host, port = parse_address(http)
            asyncio.run(run_http(settings, host, port, _tokens(settings)))
    except MemchatError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _tokens(settings: Any) -> Any:
    from .tokens import TokenStore

    return TokenStore(settings.mcp_tokens or None)


def _token_store(ctx: typer.Context) -> Any:
    return _tokens(_settings(env_file=_parent_options(ctx).get("env_file")))


@token_app.command("create")
def create_token(
    ctx: typer.Context,
    user: Annotated[
        str,
        typer.Option(
            "--user", "-u", help="The user whose memories the token opens.", callback=_utf8("--user")
        ),
    ],
    app_name: AppOpt = None,
) -> None:
    """Create a token for one user (printed once, on stdout; only its hash is kept)."""
    from memchat.engine import UserKey

    settings = _settings(
        user=user, app=_pick(ctx, app_name, "app"), env_file=_parent_options(ctx).get("env_file")
    )
    store = _tokens(settings)
    try:
        token, record = store.create(UserKey(settings.app, settings.user))
    except MemchatError as exc:
        _fail(str(exc))
    typer.echo(
        f"memchat mcp: token {record.id} for user {one_line(record.user)!r} in app {one_line(record.app)!r} "
        f"(shown only now: keep it secret; `memchat mcp token revoke {record.id}` ends it):",
        err=True,
    )
    typer.echo(token)


@token_app.command("list")
def list_tokens(ctx: typer.Context) -> None:
    """List the tokens: id, user, app and when each was made (never the token)."""
    try:
        records = _token_store(ctx).records()
    except MemchatError as exc:
        _fail(str(exc))
    if not records:
        typer.echo("No MCP tokens: create one with `memchat mcp token create --user NAME`.")
        return
    for r in records:
        typer.echo(f"{r.id}  {r.created}  user {one_line(r.user)!r}  app {one_line(r.app)!r}")


@token_app.command("revoke")
def revoke_token(
    ctx: typer.Context,
    token_id: Annotated[str, typer.Argument(help="The token's id as `token list` shows it (or the token).")],
) -> None:
    """Revoke a token: a running server refuses it from the next request on."""
    try:
        record = _token_store(ctx).revoke(token_id)
    except MemchatError as exc:
        _fail(str(exc))
    typer.echo(f"Revoked token {record.id} of user {one_line(record.user)!r} in app {one_line(record.app)!r}")
