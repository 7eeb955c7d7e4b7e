"""Property tests of ``memchat memory …`` (in process, SQLite in a temporary folder).

Whatever the IDs, users, apps, text and topics on the command line:
- the exit code is 0, 1 or 2, and no exception or traceback escapes;
- an error (exit 2) is one line on stderr, ``memchat: …``;
- a blank or unusable --user/--app, or an ID prefix shorter than 6 hex
  characters, is refused (exit 2) and changes nothing;
- ``clear`` and ``delete --hard-delete`` without --yes (stdin is not a
  terminal here) change nothing;
- nothing printed holds a raw control character (ESC, BEL, CR, C1…), however
  hostile the stored text is;
- user B, seeded first, is byte-identical afterwards.
"""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from backends import create
from memchat.cli import app
from memchat.engine import MemoryService, UserKey

from .helpers import OtherUser, entry_view, seed_other_user
from .strategies import (
    any_key_part,
    any_text,
    given_settings,
    good_key_part,
    good_text,
    id_strategy,
    valid_key_part,
)

#: Variables that would otherwise leak from the caller's environment into Settings.
CLEARED = [
    "MEMCHAT_MEMORY",
    "MEMCHAT_USER",
    "MEMCHAT_APP",
    "MEMCHAT_SOFT_DELETE",
    "MEMCHAT_MEMORY_LIMIT",
    "MEMCHAT_TIMEOUT",
    "MEMCHAT_CONFIG",
    "MEMCHAT_DEBUG",
    "SQLITE_MEMORY_DSN",
]


def raw_controls(text: str) -> list[str]:
    """Control characters a terminal would act on (newline and tab are fine)."""
    return sorted({c for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"})


class Cli:
    """Runs the CLI and the engine on one SQLite file."""

    def __init__(self, tmp_path: Path) -> None:
        self.dsn = f"sqlite:///{tmp_path / 'cli.db'}"
        config = tmp_path / "memchat.toml"
        config.write_text("", encoding="utf-8")
        self.env: dict[str, str | None] = dict.fromkeys(CLEARED)
        self.env |= {"MEMCHAT_MEMORY": "sqlite", "SQLITE_MEMORY_DSN": self.dsn, "MEMCHAT_CONFIG": str(config)}
        self.runner = CliRunner()

    def engine(self, work: Callable[[MemoryService], Any]) -> Any:
        async def main() -> Any:
            async with MemoryService(create("sqlite", dsn=self.dsn), soft_delete=True) as svc:
                return await work(svc)

        return asyncio.run(main())

    def snapshot(self, key: UserKey) -> dict[str, Any] | None:
        """Everything the engine holds for ``key`` (None if the key is unusable)."""
        if not (valid_key_part(key.app) and valid_key_part(key.user)):
            return None
        entries = self.engine(lambda svc: svc.read(key, include_deleted=True))
        return {e.id: entry_view(e) for e in entries}

    def invoke(self, args: list[str]) -> Any:
        result = self.runner.invoke(app, args, env=self.env, catch_exceptions=True)
        shown = (
            f"memchat {args!r}\nexit {result.exit_code}\nstdout {result.stdout!r}\nstderr {result.stderr!r}"
        )
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{type(result.exception).__name__} escaped: {result.exception!r}\n{shown}"
        )
        assert result.exit_code in (0, 1, 2), shown
        assert "Traceback" not in result.output, shown
        for stream in (result.stdout, result.stderr):
            assert not raw_controls(stream), f"raw control characters {raw_controls(stream)} printed\n{shown}"
        if result.exit_code == 2:
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("memchat: "), f"not one error line\n{shown}"
        return result


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.chdir(tmp_path)  # no ./.env or ./memchat.toml from elsewhere
    return Cli(tmp_path)


@pytest.fixture
def other(cli: Cli) -> OtherUser:
    return cli.engine(seed_other_user)


def scope(key: UserKey) -> list[str]:
    return [f"--user={key.user}", f"--app={key.app}"]


def test_any_command_line_exits_cleanly_and_leaves_others_alone(cli: Cli) -> None:
    hostile_texts = st.one_of(good_text, any_text, st.sampled_from(["\x1b]0;pwned\x07", "a\x9b2J\rb"]))

    def keys(other: OtherUser) -> st.SearchStrategy[UserKey]:
        return st.one_of(
            st.builds(UserKey, st.just("hard-cli"), good_key_part),
            st.builds(UserKey, st.just(other.key.app), good_key_part),
            other.keys(any_key_part),
        )

    def command(other: OtherUser) -> st.SearchStrategy[tuple[str, list[str]]]:
        ids = id_strategy(other.ids_strategy())
        return st.one_of(
            st.tuples(
                st.just("add"),
                st.builds(
                    lambda topics, text: [*(f"--topic={t}" for t in topics), "--", text],
                    st.lists(any_text.filter(lambda t: len(t) < 200), max_size=2),
                    hostile_texts,
                ),
            ),
            st.tuples(
                st.just("list"), st.sampled_from([[], ["--json"], ["--deleted"], ["--deleted", "--json"]])
            ),
            st.tuples(
                st.just("search"),
                st.builds(lambda j, q: [*j, "--", q], st.sampled_from([[], ["--json"]]), hostile_texts),
            ),
            st.tuples(
                st.just("delete"),
                st.builds(
                    lambda hard, yes, i: [*hard, *yes, "--", i],
                    st.sampled_from([[], ["--hard-delete"], ["--soft-delete"]]),
                    st.sampled_from([[], ["--yes"]]),
                    ids,
                ),
            ),
            st.tuples(st.just("restore"), ids.map(lambda i: ["--", i])),
            st.tuples(
                st.just("clear"),
                st.builds(
                    lambda hard, yes: [*hard, *yes],
                    st.sampled_from([[], ["--hard-delete"]]),
                    st.sampled_from([[], ["--yes"]]),
                ),
            ),
            st.tuples(st.just("count"), st.just([])),
        )

    @given_settings(weight=1.5)
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        other = cli.engine(seed_other_user)
        key = data.draw(keys(other), label="key")
        good_key = valid_key_part(key.app) and valid_key_part(key.user)
        if good_key:  # something for the commands to show, find and delete
            cli.engine(lambda svc: svc.add(key, "seeded \x1b[2J\x07\x9b memory"))
        for _ in range(data.draw(st.integers(1, 3), label="commands")):
            name, rest = data.draw(command(other), label="command")
            destructive = name in ("delete", "restore", "clear")
            before = cli.snapshot(key) if destructive else None
            result = cli.invoke(["memory", name, *scope(key), *rest])
            after = cli.snapshot(key) if destructive else None
            if not good_key:
                assert result.exit_code == 2, f"{name} for the unusable key {key!r} gave {result.exit_code}"
            if name in ("delete", "restore"):
                given_id = rest[-1].strip()
                if len(given_id) < 6 or any(c not in "0123456789abcdefABCDEF" for c in given_id):
                    assert result.exit_code == 2, f"{name} accepted the ID {rest[-1]!r}"
                    assert after == before, f"{name} {rest[-1]!r} changed {key}'s memories"
            if name == "clear" and "--yes" not in rest:
                assert result.exit_code != 0 and after == before, "clear without --yes deleted memories"
            if name == "delete" and "--hard-delete" in rest and "--yes" not in rest:
                assert result.exit_code != 0 and after == before, "delete --hard-delete without --yes deleted"
        cli.engine(other.check)

    check()


def test_stored_text_is_shown_without_raw_control_characters(cli: Cli, other: OtherUser) -> None:
    key = UserKey("hard-cli", "display")

    @given_settings(weight=0.75)
    @given(text=st.one_of(good_text, st.sampled_from(["\x1b]0;pwned\x07", "x\x9b2J\x85\u202eevil\rok"])))
    def check(text: str) -> None:
        entry = cli.engine(lambda svc: svc.add(key, text, topics=[text[:50]]))
        searches = (["search", "--", text[:50]], ["search", "--json", "--", text])
        for args in (["list"], ["list", "--json"], *searches):
            cli.invoke(["memory", args[0], *scope(key), *args[1:]])
        cli.invoke(["memory", "delete", *scope(key), "--", entry.id[:12]])
        cli.invoke(["memory", "restore", *scope(key), "--", entry.id])
        cli.engine(other.check)

    check()


@pytest.mark.parametrize("option", ["--user", "--app"])
@pytest.mark.parametrize("value", ["", " ", "\t", "a\x1bb", "\x00", "x" * 256])
def test_an_unusable_user_or_app_is_one_error_line(
    cli: Cli, other: OtherUser, option: str, value: str
) -> None:
    for args in (["count"], ["add", "--", "text"], ["list"], ["clear", "--yes"]):
        result = cli.invoke(["memory", args[0], f"{option}={value}", *args[1:]])
        assert result.exit_code == 2 and result.stdout == ""
    cli.engine(other.check)


def test_no_near_miss_user_or_app_reaches_another_user(cli: Cli, other: OtherUser) -> None:
    """--user/--app that differ from B's only by case, padding, wildcards or
    key-scheme syntax never list, delete or clear B's memories."""
    for key in other.near_key_list():
        listed = cli.invoke(["memory", "list", "--deleted", "--json", *scope(key)])
        assert not any(i in listed.stdout for i in other.ids), f"{key!r} listed user B's memories"
        for memory_id in other.ids:
            for args in (["delete", "--hard-delete", "--yes"], ["restore"]):
                cli.invoke(["memory", args[0], *scope(key), *args[1:], "--", memory_id[:12]])
        cli.invoke(["memory", "clear", "--hard-delete", "--yes", *scope(key)])
        try:
            cli.engine(other.check)
        except AssertionError as exc:
            raise AssertionError(f"the CLI with {key!r} changed user B") from exc
