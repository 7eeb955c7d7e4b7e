"""The command line's options for the settings, derived from their declarations
in memchat/settings.py: flag, short flag, metavar, help (with the default and
the variable and config key that set it too) and type.

``@takes_settings(command)`` adds to a Typer command one option per setting
declared for that command, and hands the function only what was given, as
``flags``, ready for ``Settings.load``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from .safe_text import printable
from .settings import DEFAULTS, KINDS, SPECS
from .settings_spec import cli_help

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr and the exit code (2: bad input)."""
    typer.echo(f"memchat: {printable(message)}", err=True)
    raise typer.Exit(code)


def check_utf8(value: Any, what: str) -> None:
    """Arguments that were not UTF-8 reach Python as surrogate escapes
    (``\\udcff`` for the byte 0xff): refuse them with one sentence."""
    for item in value if isinstance(value, list | tuple) else (value,):
        if not isinstance(item, str):
            continue
        bad = next((ch for ch in item if "\ud800" <= ch <= "\udfff"), None)
        if bad is not None:
            byte = f" (byte 0x{ord(bad) - 0xDC00:02x})" if "\udc80" <= bad <= "\udcff" else ""
            fail(f"{what} is not valid UTF-8 text{byte}: check your terminal's encoding")


def utf8(what: str) -> Callable[[Any], Any]:
    """A Typer parameter callback that rejects text that is not UTF-8."""

    def check(value: Any) -> Any:
        check_utf8(value, what)
        return value

    return check


#: The Python type Typer parses each declared type from (durations stay text: settings parse them).
_TYPES: dict[str, Any] = {"str": str | None, "float": str | None, "int": int | None,
                          "tuple[str, ...]": list[str] | None}  # fmt: skip


def _is_switch(name: str) -> bool:
    """A boolean flag without a negative form (``--plain``): absent means not given."""
    return KINDS[name] == "bool" and "/" not in SPECS[name].flag


def setting_option(name: str) -> Any:
    """The annotated Typer type of a setting's option."""
    spec = SPECS[name]
    decls = [spec.flag, spec.short] if spec.short else [spec.flag]
    options: dict[str, Any] = {"help": cli_help(spec, DEFAULTS[name]), "show_default": False}
    if spec.metavar:
        options["metavar"] = spec.metavar
    if KINDS[name] == "bool":
        kind: Any = bool if _is_switch(name) else bool | None
    else:
        kind = _TYPES[KINDS[name]]
        if KINDS[name] != "int":
            options["callback"] = utf8(spec.flag)
    return Annotated[kind, typer.Option(*decls, **options)]


def not_given(name: str) -> Any:
    """The option's value when it is left out."""
    return False if _is_switch(name) else None


def _given(name: str, value: Any) -> Any:
    """What the option's value means for Settings.load: None is "not given"."""
    if KINDS[name] == "tuple[str, ...]":
        return tuple(value or ())
    if _is_switch(name):
        return value or None
    return value


def takes_settings(command: str) -> Callable[[F], F]:
    """Give the decorated Typer command an option per setting declared for
    ``command``; it receives them as ``flags`` (name → value, None when not given).
    Its own parameters come after them (``ctx`` first), keyword-only."""
    names = [name for name, spec in SPECS.items() if spec.flag and command in spec.commands]

    def decorate(func: F) -> F:
        own = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != "flags"]
        context = [p for p in own if p.annotation is typer.Context]
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p not in context]
        keyword = inspect.Parameter.KEYWORD_ONLY
        declared = [
            inspect.Parameter(name, keyword, default=not_given(name), annotation=setting_option(name))
            for name in names
        ]

        @functools.wraps(func)
        def command_function(*args: Any, **kwargs: Any) -> Any:
            flags = {name: _given(name, kwargs.pop(name, None)) for name in names}
            return func(*args, flags=flags, **kwargs)

        parameters = [*context, *declared, *rest]
        command_function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command_function.__annotations__ = {p.name: p.annotation for p in parameters}
        return command_function  # type: ignore[return-value]

    return decorate
