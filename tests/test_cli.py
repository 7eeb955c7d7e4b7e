"""The command line: `memchat memory …` in process (typer's CliRunner) over
SQLite in tmp_path, and real `memchat` processes for what only bytes show
(argv that is not UTF-8, escape sequences reaching a pipe)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from itertools import count
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memchat import cli
from memchat.engine import ConfigError, Entry, UserKey, memory_id
from memchat.settings import Settings
from tests.support import clean_cli_environment

MEMCHAT = Path(sys.executable).with_name("memchat")

#: A memory a model could write: window title (OSC … BEL), clear screen (CSI),
#: C1 CSI, markup-looking text, and the install hint that markup used to eat.
HOSTILE = "\x1b]0;pwned\x07 cleared\x1b[2J \x9b31mred [bold]x[/bold] pip install 'memchat[redis]'"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what a terminal acts on


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict[str, str]:
    """A clean environment: SQLite in tmp_path, no config file, no MEMCHAT_* variables."""
    return clean_cli_environment(tmp_path, monkeypatch)


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli.app, list(args), input=input)


def entries(user: str = "user", app: str = "memory-chat") -> list[Entry]:
    """What the store holds (tombstones included), read with the library."""
    from memchat.agent.factory import create_service

    async def read() -> list[Entry]:
        async with create_service(Settings.load({})) as svc:
            return await svc.read(UserKey(app, user), include_deleted=True)

    return asyncio.run(read())


def add(text: str, *args: str) -> str:
    result = run("memory", "add", text, *args)
    assert result.exit_code == 0, result.output
    return result.stdout.split()[-1]


def one_error_line(result, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("memchat: ")
    return lines[0]


# -- empty user, app and ID: never a silent default --------------------------------


def test_the_issue_command_deletes_nothing(env) -> None:
    mid = add("User likes green tea")
    result = run("memory", "delete", "", "--user", "", "--hard-delete")
    assert "empty" in one_error_line(result)
    assert [e.id for e in entries()] == [mid] and not entries()[0].is_deleted


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["memory", "list", "--user", ""], "--user is empty: give a user ID such as --user alice"),
        (["memory", "list", "--user", "   "], "--user is empty"),
        (["memory", "count", "--app", ""], "--app is empty: give an app name such as --app my-app"),
        (["--user", "", "memory", "list"], "--user is empty"),
        (["--app", " ", "memory", "clear", "--yes"], "--app is empty"),
        (["memory", "add", "x", "-u", ""], "--user is empty"),
        (["--user", "", "--plain"], "--user is empty"),
    ],
)
def test_an_empty_or_blank_user_or_app_is_an_error(env, args, needle) -> None:
    add("User likes green tea")
    assert needle in one_error_line(run(*args))
    assert len(entries()) == 1 and not entries()[0].is_deleted


def test_an_empty_option_after_memory_overrides_one_before(env) -> None:
    assert "--user is empty" in one_error_line(run("--user", "bob", "memory", "list", "--user", ""))


def test_a_blank_user_in_the_config_file_is_an_error(env, tmp_path) -> None:
    (tmp_path / "memchat.toml").write_text('[session]\nuser = ""\n')
    line = one_error_line(run("memory", "count"))
    assert "[session] user in the config file is empty" in line


def test_an_empty_environment_variable_means_unset(env, monkeypatch) -> None:
    add("User likes green tea")
    monkeypatch.setenv("MEMCHAT_USER", "")
    monkeypatch.setenv("MEMCHAT_APP", "")
    result = run("memory", "count")
    assert result.exit_code == 0 and result.stdout.strip() == "1"


def test_a_blank_environment_variable_is_an_error(env, monkeypatch) -> None:
    monkeypatch.setenv("MEMCHAT_USER", "  ")
    assert "MEMCHAT_USER is empty" in one_error_line(run("memory", "count"))


@pytest.mark.parametrize(
    ("flags", "environ", "config", "needle"),
    [
        ({"user": ""}, {}, "", "--user is empty: give a user ID such as --user alice"),
        ({"app": " \t"}, {}, "", "--app is empty: give an app name"),
        ({}, {"MEMCHAT_APP": "  "}, "", "MEMCHAT_APP is empty: set it to an app name or unset it"),
        ({}, {}, '[session]\napp = ""\n', "[session] app in the config file is empty"),
    ],
)
def test_settings_refuse_an_empty_scope(tmp_path, flags, environ, config, needle) -> None:
    """Settings.validated() is where the chat, the console and the TUI get the rule too."""
    (tmp_path / "memchat.toml").write_text(config)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        Settings.load(flags, environ=environ, cwd=tmp_path)
    with pytest.raises(ConfigError, match="user is empty"):
        Settings(user="").validated()
    loaded = Settings.load({}, environ={"MEMCHAT_USER": "", "MEMCHAT_APP": ""}, cwd=tmp_path / "none")
    assert (loaded.user, loaded.app) == ("user", "memory-chat")  # an empty variable means unset


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ("", "the memory ID is empty: give at least 6 characters of the ID as `memchat memory list`"),
        ("   ", "the memory ID is empty"),
        ("abc12", "ID prefix 'abc12' is too short: give at least 6 characters of the ID"),
        ("xyz-123", "'xyz-123' is not a memory ID: IDs are hexadecimal"),
        ("a" * 65, "but a memory ID has 64"),
    ],
)
@pytest.mark.parametrize("command", [["delete", "--yes", "--hard-delete"], ["delete"], ["restore"]])
def test_bad_ids_are_refused_before_anything_changes(env, given, needle, command) -> None:
    mid = add("User likes green tea")
    line = one_error_line(run("memory", command[0], given, *command[1:]))
    assert needle in line
    assert [(e.id, e.is_deleted) for e in entries()] == [(mid, False)]


def test_a_six_character_prefix_and_a_full_id_both_work(env) -> None:
    first, second = add("User likes green tea"), add("User lives in Berlin")
    result = run("memory", "delete", first[:6].upper())
    assert result.exit_code == 0 and result.stdout.strip() == f"Deleted {first}"
    result = run("memory", "delete", second, "--hard-delete", "--yes")
    assert result.exit_code == 0 and result.stdout.strip() == f"Deleted {second} for good"
    assert [(e.id, e.is_deleted) for e in entries()] == [(first, True)]


def test_an_ambiguous_prefix_is_refused(env) -> None:
    seen: dict[str, str] = {}
    for i in count():  # two texts whose IDs share their first 6 characters (a few thousand tries)
        text = f"User likes tea number {i}"
        prefix = memory_id(text, "memory-chat", "user")[:6]
        if prefix in seen:
            break
        seen[prefix] = text
    add(seen[prefix])
    add(text)
    line = one_error_line(run("memory", "delete", prefix, "--hard-delete", "--yes"))
    assert f"ID prefix {prefix!r} matches 2 memories: give more characters" in line
    assert len(entries()) == 2


def test_an_unknown_prefix_is_not_found(env) -> None:
    add("User likes green tea")
    line = one_error_line(run("memory", "delete", "000000", "--hard-delete", "--yes"))
    assert "000000" in line
    assert len(entries()) == 1


# -- destructive commands ask on a terminal and need --yes otherwise ---------------


@pytest.fixture
def terminal(monkeypatch):
    monkeypatch.setattr(cli, "_stdin_is_terminal", lambda: True)


def test_hard_delete_without_a_terminal_needs_yes(env) -> None:
    mid = add("User likes green tea")
    line = one_error_line(run("memory", "delete", mid[:12], "--hard-delete"))
    assert "without confirmation" in line and line.endswith("add --yes to confirm")
    assert [(e.id, e.is_deleted) for e in entries()] == [(mid, False)]
    result = run("memory", "delete", mid[:12], "--hard-delete", "-y")
    assert result.exit_code == 0 and entries() == []


def test_soft_delete_does_not_ask(env) -> None:
    mid = add("User likes green tea")
    result = run("memory", "delete", mid[:12])
    assert result.exit_code == 0, result.output
    assert [(e.id, e.is_deleted) for e in entries()] == [(mid, True)]
    result = run("memory", "restore", mid[:12])
    assert result.exit_code == 0 and result.stdout.strip() == f"Restored {mid}: User likes green tea"


def test_hard_delete_on_a_terminal_shows_the_memory_and_no_keeps_it(env, terminal) -> None:
    mid = add("User likes green tea")
    result = run("memory", "delete", mid[:8], "--hard-delete", input="n\n")
    assert result.exit_code == 1
    assert f"Memory {mid[:12]} of user 'user' in app 'memory-chat': User likes green tea" in result.stderr
    assert "Delete it for good" in result.stderr
    assert "nothing was deleted" in result.stderr
    assert [(e.id, e.is_deleted) for e in entries()] == [(mid, False)]
    result = run("memory", "delete", mid[:8], "--hard-delete", input="y\n")
    # (CliRunner echoes the answer to stdout, as a terminal would.)
    assert result.exit_code == 0 and result.stdout.strip().endswith(f"Deleted {mid} for good")
    assert entries() == []


@pytest.mark.parametrize("mode", [[], ["--soft-delete"], ["--hard-delete"]])
def test_clear_without_a_terminal_needs_yes(env, mode) -> None:
    add("User likes green tea")
    add("User lives in Berlin")
    line = one_error_line(run("memory", "clear", *mode))
    assert "every memory of user 'user' in app 'memory-chat'" in line
    assert line.endswith("add --yes to confirm")
    assert [e.is_deleted for e in entries()] == [False, False]
    result = run("memory", "clear", *mode, "--yes")
    assert result.exit_code == 0 and result.stdout.strip() == "Cleared 2 memories"
    assert all(e.is_deleted for e in entries()) if mode != ["--hard-delete"] else entries() == []


@pytest.mark.parametrize("mode", [[], ["--hard-delete"]])
def test_clear_on_a_terminal_shows_count_user_and_app(env, terminal, mode) -> None:
    add("User likes green tea", "--user", "alice", "--app", "diary")
    add("User lives in Berlin", "--user", "alice", "--app", "diary")
    result = run("memory", "clear", "-u", "alice", "--app", "diary", *mode, input="n\n")
    assert result.exit_code == 1
    assert "Delete all 2 memories of user 'alice' in app 'diary'" in result.stderr
    assert [e.is_deleted for e in entries("alice", "diary")] == [False, False]
    result = run("--user", "alice", "memory", "clear", "--app", "diary", *mode, input="y\n")
    assert result.exit_code == 0 and result.stdout.strip().endswith("Cleared 2 memories")
    left = entries("alice", "diary")
    assert all(e.is_deleted for e in left) if not mode else left == []


# -- memory text never drives the terminal -------------------------------------------


def test_list_shows_escape_sequences_as_visible_characters(env) -> None:
    add(HOSTILE, "--topic", "\x1b[31mred")
    result = run("memory", "list")
    assert result.exit_code == 0
    assert not RAW.search(result.stdout.replace("\n", "")), repr(result.stdout)
    line = result.stdout.strip()
    assert "␛]0;pwned␇" in line and "␛[2J" in line and "\\x9b31m" in line
    assert "[bold]x[/bold]" in line and "pip install 'memchat[redis]'" in line
    assert "[␛[31mred]" in line


def test_json_output_is_faithful_and_has_no_raw_controls(env) -> None:
    add(HOSTILE + "\nsecond line \u2028 \u202e")
    result = run("memory", "list", "--json")
    assert result.exit_code == 0
    assert not RAW.search(result.stdout.replace("\n", ""))
    assert "\u2028" not in result.stdout and "\u202e" not in result.stdout
    assert json.loads(result.stdout)[0]["memory"]["memory"] == HOSTILE + "\nsecond line \u2028 \u202e"
    search = run("memory", "search", "pwned", "--json")
    assert not RAW.search(search.stdout.replace("\n", ""))


def test_multi_line_memories_stay_on_one_row(env) -> None:
    add("first line\nsecond line")
    rows = run("memory", "list").stdout.strip().splitlines()
    assert len(rows) == 1 and "first line⏎second line" in rows[0]


# -- --timeout, before or after `memory` ---------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--timeout", "500ms", "--plain"],
        ["--timeout", "500ms", "memory", "count"],
        ["memory", "count", "--timeout", "500ms"],
        ["--timeout", "9s", "memory", "list", "--timeout", "0.5"],
    ],
)
def test_timeout_is_passed_to_the_settings(env, monkeypatch, args) -> None:
    seen: list[float] = []
    real = cli._settings

    def spy(**flags):
        settings = real(**flags)
        seen.append(settings.timeout)
        return settings

    monkeypatch.setattr(cli, "_settings", spy)
    result = run(*args, input="/exit\n")
    assert result.exit_code == 0, result.output
    assert seen == [0.5]


def test_a_bad_timeout_is_one_line(env) -> None:
    assert "timeout" in one_error_line(run("memory", "count", "--timeout", "soon")).lower()


def test_every_memory_command_and_the_chat_offer_timeout(env) -> None:
    for args in (["--help"], *(["memory", name, "--help"] for name in cli_commands())):
        result = run(*args)
        assert "--timeout" in result.stdout, args
        assert "Give up on a backend operation" in result.stdout


def cli_commands() -> list[str]:
    return [command.name or command.callback.__name__ for command in cli.memory_app.registered_commands]


# -- main(): one line, never a traceback ---------------------------------------------


def test_main_turns_an_unexpected_error_into_one_line(monkeypatch, capsys) -> None:
    def broken() -> None:
        raise RuntimeError("boom \x1b[2J")

    monkeypatch.setattr(cli, "app", broken)
    monkeypatch.delenv("MEMCHAT_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError: boom ␛[2J" in err and "MEMCHAT_DEBUG=1" in err
    monkeypatch.setenv("MEMCHAT_DEBUG", "1")
    with pytest.raises(RuntimeError):
        cli.main()


def test_main_reports_a_memchat_error_in_one_line(monkeypatch, capsys) -> None:
    from memchat.engine.model import BackendError

    def failing() -> None:
        raise BackendError("the server went away")

    monkeypatch.setattr(cli, "app", failing)
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "memchat: the server went away\n"


# -- real processes: bytes --------------------------------------------------------------


def memchat(args: list[bytes | str], env: dict[str, str], stdin: bytes = b"") -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMCHAT_"))}
    return subprocess.run(
        [str(MEMCHAT), *args], input=stdin, capture_output=True, timeout=60, env={**clean, **env}
    )


@pytest.mark.parametrize(
    ("args", "what"),
    [
        ([b"memory", b"add", b"I like \xff tea"], "the memory text"),
        ([b"memory", b"search", b"\xfftea"], "the search query"),
        ([b"memory", b"list", b"--user", b"\xe9"], "--user"),
        ([b"--app", b"caf\xe9", b"memory", b"list"], "--app"),
        ([b"memory", b"add", b"tea", b"--topic", b"\xff"], "--topic"),
        ([b"memory", b"delete", b"\xff\xfe"], "the memory ID"),
    ],
)
def test_argv_that_is_not_utf8_is_one_sentence(env, args, what) -> None:
    done = memchat(args, env)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    sentence = (
        rf"{re.escape(what)} is not valid UTF-8 text \(byte 0x[ef][0-9a-f]\): check your terminal's encoding"
    )
    assert re.search(sentence, err), err
    assert memchat(["memory", "count"], env).stdout == b"0\n"


def test_list_through_a_pipe_carries_no_escape_bytes(env) -> None:
    assert memchat(["memory", "add", HOSTILE], env).returncode == 0
    for args in (["memory", "list"], ["memory", "list", "--json"], ["memory", "search", "pwned"]):
        done = memchat(args, env)
        assert done.returncode == 0, done.stderr
        for byte in (b"\x1b", b"\x07", b"\xc2\x9b"):
            assert byte not in done.stdout, (args, done.stdout)
        assert b"[bold]x[/bold]" in done.stdout and b"memchat[redis]" in done.stdout


# -- search: the tool's ranking, by meaning and keywords ---------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "sqlitevec"])
def test_search_finds_by_meaning_as_the_tool_does(env, tmp_path, monkeypatch, backend) -> None:
    """The issue: `memchat memory search --memory sqlitevec kitten` printed "No memories"
    while the memory_search tool ranked the cat first. Both go through svc.search now."""
    monkeypatch.setenv("SQLITEVEC_MEMORY_DSN", str(tmp_path / "vec.db"))
    add("Alice has a cat named Tom", "--memory", backend)
    add("Alice works as a nurse in Berlin", "--memory", backend)
    result = run("memory", "search", "--memory", backend, "kitten")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "has a cat" in lines[0], result.stdout
    score = float(re.search(r"\((\d\.\d{3})\)$", lines[0]).group(1))
    assert 0 < score <= 1  # a 0-1 relevance
    # The tool ranks the same memory first, with the same score.
    tool = tool_search(backend, "kitten")
    assert tool["results"][0]["memory"] == "Alice has a cat named Tom"
    assert round(tool["results"][0]["score"], 3) == score
    job = run("memory", "search", "--memory", backend, "What's my job?")
    assert "nurse" in job.stdout.splitlines()[0], job.stdout


def tool_search(backend: str, query: str) -> dict:
    from memchat.agent.factory import create_service

    async def call() -> dict:
        async with create_service(Settings.load({"memory": backend})) as svc:
            [tool] = [t for t in svc.tools() if t.name == "memory_search"]
            return json.loads(await tool.call({"query": query}, UserKey("memory-chat", "user")))

    return asyncio.run(call())


def test_search_keyword_mode_is_the_references_ranking(env) -> None:
    add("Alice has a cat named Tom")
    assert "No memories." in run("memory", "search", "--search", "keyword", "kitten").stdout
    assert "has a cat" in run("memory", "search", "--search", "keyword", "cat").stdout
    # Before `memory` too, and from the environment.
    assert "No memories." in run("--search", "keyword", "memory", "search", "kitten").stdout


def test_search_without_an_embedder_says_so_once_and_uses_keywords(env, monkeypatch) -> None:
    monkeypatch.setenv("MEMCHAT_EMBEDDER", "none")
    add("Alice has a cat named Tom")
    result = run("memory", "search", "kitten")
    assert result.exit_code == 0 and "No memories." in result.stdout
    assert result.stderr.splitlines() == [
        "memchat: semantic search is off (MEMCHAT_EMBEDDER=none): memories are found by keywords only"
    ]
    assert "has a cat" in run("memory", "search", "cat").stdout


def test_a_bad_search_mode_is_one_line(env, monkeypatch) -> None:
    line = one_error_line(run("memory", "search", "--search", "fuzzy", "x"))
    assert line == (
        "memchat: --search is 'fuzzy', which is not a search mode: choose hybrid (the default), "
        "semantic or keyword"
    )
    monkeypatch.setenv("MEMCHAT_SEARCH", "vector")
    assert "MEMCHAT_SEARCH is 'vector'" in one_error_line(run("memory", "search", "x"))


def test_the_chat_offers_search(env) -> None:
    assert "--search" in run("--help").stdout
    assert "MEMCHAT_SEARCH" in run("--help").stdout
