"""Help and version conventions of the command line: `-h` as `--help`, metavar
names instead of Typer's type placeholders, `--version`."""

from __future__ import annotations

import re
from typing import Any

import typer
import typer.core

#: `-h` as well as `--help`, on every command.
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
#: Typer's type placeholders (" <str>", " <list[str]>", " <int>") after a name in help: the
#: options and arguments have metavars (TEXT, NAME, N) that say more.
_TYPE_PLACEHOLDER = re.compile(r" <[a-z_|,\[\] ]+>")


def without_placeholders(text: str) -> str:
    return _TYPE_PLACEHOLDER.sub("", text)


class PlainHelpGroup(typer.core.TyperGroup):
    """A command group whose help has no type placeholders."""

    def get_help(self, ctx: Any) -> str:
        return without_placeholders(super().get_help(ctx))


class PlainHelpCommand(typer.core.TyperCommand):
    """A command whose help has no type placeholders."""

    def get_help(self, ctx: Any) -> str:
        return without_placeholders(super().get_help(ctx))


def show_version(value: bool) -> None:
    """The --version callback: print the installed version and exit."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"memchat {version('memchat')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("memchat (not installed: version unknown)")
        raise typer.Exit()
