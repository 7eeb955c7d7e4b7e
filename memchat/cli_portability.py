"""``memchat memory export | import | migrate``: the CLI side of engine/portability.py.

Only option parsing, files and what is printed live here; the format, the
conflict rules and the verification are the engine's. Registered on the
``memchat memory`` group by ``memchat.cli``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from .cli import (
    BackendOpt,
    StoreScope,
    TimeoutOpt,
    _fail,
    _parent_options,
    _run,
    _run_async,
    _settings,
    _utf8,
    memory_app,
    store_options,
)
from .engine.model import MemchatError
from .safe_text import printable

FORMATS = ("jsonl",)
#: Where a DSN given on the command line goes: each backend's first variable (settings.py).
NO_DSN = ("inmemory",)

FormatOpt = Annotated[
    str, typer.Option("--format", help="File format: jsonl (one JSON object per line).", metavar="<format>")
]


def _check_format(value: str) -> None:
    if value.strip().lower() not in FORMATS:
        _fail(f"unknown format {value!r}: the only format is jsonl")


def _count(n: int, noun: str) -> str:
    """``1 memory``, ``2 memories``, ``3 users``."""
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n:,} {noun if n == 1 else plural}"


@memory_app.command("export")
@store_options
def export_memories(
    *,
    scope: StoreScope,
    file_format: FormatOpt = "jsonl",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
    vectors: Annotated[
        bool,
        typer.Option("--vectors", help="Include each memory's embedding (about 2 KB a memory)."),
    ] = False,
) -> None:
    """Write memories to a file (every user's; --user or --app for fewer), tombstones
    included: `memchat memory export > memories.jsonl`."""
    from memchat.engine import UserKey
    from memchat.engine.portability import ExportSummary, export_lines

    _check_format(file_format)
    settings = scope.settings()
    summary = ExportSummary()

    async def action(svc: Any) -> str:
        store = svc.store
        users = None  # neither --user nor --app given (here or before `memory`): every user's
        if scope.user is not None:
            users = [UserKey(settings.app, settings.user)]
        elif scope.app is not None:
            users = [k for k in await store.users() if k.app == settings.app]
        if output is None:
            await _write(export_lines(store, users=users, with_vectors=vectors, summary=summary), sys.stdout)
        else:
            partial = output.with_name(output.name + ".partial")
            try:
                with partial.open("w", encoding="utf-8", errors="surrogateescape", newline="\n") as f:
                    await _write(export_lines(store, users=users, with_vectors=vectors, summary=summary), f)
                partial.replace(output)  # a failed export leaves no half file under the real name
            except OSError as exc:
                raise MemchatError(f"cannot write {output}: {exc.strerror or exc}: check the path") from None
            finally:
                with contextlib.suppress(OSError):
                    partial.unlink()
        return store.describe()

    where = _run_reading(settings, action)
    typer.echo(
        f"Exported {_count(summary.count, 'memory')} of {_count(summary.users, 'user')} from "
        f"{printable(where)} ({summary.checksum})",
        err=True,
    )


async def _write(lines: Any, stream: TextIO) -> None:
    async for line in lines:
        stream.write(line + "\n")


def _run_reading(settings: Any, action: Any) -> Any:
    """``_run`` for a command that only reads: the store is opened without filling in
    missing vectors (no model loads, nothing is written; vectors are exported as stored)."""
    from .agent.factory import create_service

    async def main() -> Any:
        service = create_service(settings)
        service.backfill = False
        async with service:
            return await action(service)

    return _run_async(main())


@memory_app.command("import")
def import_memories(
    ctx: typer.Context,
    file: Annotated[
        str, typer.Argument(help="The export to read, or - for stdin.", callback=_utf8("the file name"))
    ],
    backend: BackendOpt = None,
    timeout: TimeoutOpt = None,
    file_format: FormatOpt = "jsonl",
) -> None:
    """Read memories from an export, keeping their IDs, times and tombstones. Running it
    twice changes nothing; a memory stored in both goes to whichever copy changed last."""
    from memchat.engine.portability import import_lines

    _check_format(file_format)
    settings = StoreScope.of(ctx, backend, None, None, timeout).settings()
    if file == "-":
        stream: TextIO = sys.stdin
        name = "stdin"
    else:
        try:
            stream = open(file, encoding="utf-8", errors="surrogateescape", newline="")  # noqa: SIM115
        except OSError as exc:
            _fail(f"cannot read {file}: {exc.strerror or exc}: check the path")
        name = file
    with stream:
        report = _run(settings, lambda svc, key: import_lines(svc, stream))
    for number, problem in report.errors:
        typer.echo(f"memchat: line {number} skipped: {printable(problem)}", err=True)
    for warning in report.warnings:
        typer.echo(f"memchat: warning: {printable(warning)}", err=True)
    skipped = f"{report.skipped:,} skipped"
    if report.skipped:
        skipped += f" ({report.unchanged:,} already there, {report.kept:,} newer there and kept)"
    typer.echo(f"Imported {printable(name)}: {report.added:,} added, {report.updated:,} updated, {skipped}")
    if report.unembedded:
        typer.echo(
            f"{_count(report.unembedded, 'memory')} without a vector yet: filled in the next time "
            "memchat opens this backend with an embedder",
            err=True,
        )
    if report.errors:
        _fail(f"{_count(len(report.errors), 'line')} could not be imported (listed above)", code=1)


@memory_app.command("migrate")
def migrate_memories(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Option(
            "--from", help="The backend to copy from, read only (a --memory name).", callback=_utf8("--from")
        ),
    ],
    target: Annotated[
        str, typer.Option("--to", help="The backend to copy into (a --memory name).", callback=_utf8("--to"))
    ],
    from_dsn: Annotated[
        str | None,
        typer.Option(
            "--from-dsn",
            help="Where the source is (default: its variable, e.g. SQLITE_MEMORY_DSN).",
            callback=_utf8("--from-dsn"),
        ),
    ] = None,
    to_dsn: Annotated[
        str | None,
        typer.Option(
            "--to-dsn",
            help="Where the target is (default: its variable, e.g. REDIS_URL).",
            callback=_utf8("--to-dsn"),
        ),
    ] = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Copy every user's memories (tombstones included) from one backend to another, then
    verify count and checksum. The source is never changed; vectors are copied when both
    use the same embedder, else made again."""
    from backends import create
    from memchat.engine.portability import migrate

    from .agent.factory import create_service
    from .console import ProgressPrinter

    parent = _parent_options(ctx)
    base = _settings(timeout=timeout or parent.get("timeout"), env_file=parent.get("env_file"))
    src = _side(base, source, from_dsn, "--from")
    dst = _side(base, target, to_dsn, "--to")
    source_store = create(src.memory, env=src.env, timeout=src.timeout)
    service = create_service(dst, progress=ProgressPrinter(sys.stderr))
    if source_store.describe() == service.store.describe():
        _fail(
            f"the source and the target are the same store ({printable(source_store.describe())}): "
            "point --to-dsn (or --from-dsn) at another one"
        )
    bar = MigrationBar(sys.stderr, f"{src.memory} → {dst.memory}")

    async def main() -> Any:
        try:
            async with service:
                return await migrate(source_store, service, progress=bar)
        finally:
            await source_store.close()

    started = time.perf_counter()
    try:
        report = asyncio.run(main())
    except MemchatError as exc:
        bar.finish()
        _fail(
            f"{exc}; the source is unchanged, and the same command continues where this one "
            "stopped (memories already copied are skipped)"
        )
    seconds = time.perf_counter() - started
    bar.finish()
    if report.source_count == 0:
        _fail(
            f"the source {printable(source_store.describe())} holds no memories, so nothing was copied: "
            "check --from and --from-dsn (or its variable)",
            code=1,
        )
    copy = report.copy
    if report.vectors_copied:
        how = "vectors copied"
    elif service.has_embedder and service.is_vector_store:
        how = "vectors made by the target's embedder"
    else:
        how = "no vectors yet (made when memchat next opens the target with an embedder)"
    typer.echo(
        f"Migrated {_count(report.source_count, 'memory')} of {_count(report.users, 'user')} from "
        f"{printable(source_store.describe())} to {printable(service.store.describe())} in {seconds:.1f} s: "
        f"{copy.added:,} added, {copy.updated:,} updated, {copy.skipped:,} skipped; {how}"
    )
    if report.verified:
        typer.echo(
            f"Verified: the target holds all {report.source_count:,}, "
            f"checksum {report.source_checksum} matches"
        )
        return
    why = f" ({_count(copy.kept, 'memory')} changed later in the target and kept)" if copy.kept else ""
    _fail(
        f"verification failed: the target holds {report.target_count:,} of the source's "
        f"{report.source_count:,} memories, checksum {report.target_checksum} instead of "
        f"{report.source_checksum}{why}; the source is unchanged",
        code=1,
    )


def _side(base: Any, name: str, dsn: str | None, flag: str) -> Any:
    """The settings of one side: its backend, and its DSN put in the backend's own variable."""
    from backends import check_name

    from .settings import BACKEND_VARIABLES

    try:
        name = check_name(name)
    except MemchatError as exc:
        _fail(f"{flag}: {exc}")
    env = dict(base.env)
    if dsn is not None:
        if name in NO_DSN:
            _fail(f"{flag}-dsn: the {name} backend has no location (it lives in this process only)")
        env[BACKEND_VARIABLES[name][0]] = dsn
    return replace(base, memory=name, env=env)


class MigrationBar:
    """``Migrating sqlite → redis [#####-----] 50% 50,000/100,000 memories, 12 s`` on
    stderr, rewritten in place on a terminal, else a line at every tenth."""

    WIDTH = 30

    def __init__(self, stream: TextIO, what: str) -> None:
        self.stream, self.what = stream, what
        try:
            self.live = stream.isatty()
        except (AttributeError, ValueError):
            self.live = False
        self.started = time.perf_counter()
        self._last = -1
        self._open = False

    def __call__(self, state: Any) -> None:
        if state.total <= 0:
            return  # nothing to copy: the summary says so
        percent = state.percent
        step = percent if self.live else percent // 10 * 10
        if step == self._last:
            return
        self._last = step
        filled = self.WIDTH * percent // 100
        line = (
            f"Migrating {self.what} [{'#' * filled}{'-' * (self.WIDTH - filled)}] {percent}% "
            f"{state.done:,}/{state.total:,} memories, {time.perf_counter() - self.started:.0f} s"
        )
        self.stream.write(("\r" + line) if self.live else line + "\n")
        self._open = self.live
        with contextlib.suppress(ValueError, OSError):
            self.stream.flush()

    def finish(self) -> None:
        if self._open:
            self.stream.write("\n")
            self._open = False
