"""CLI conventions (issue 14): --version, -h, help without type placeholders,
one-shot `memchat ask`, and saying so when the offline model stands in for
the model asked for. In process with typer's CliRunner over SQLite in
tmp_path, and as a real process where a pipe matters."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest

from memchat.settings import Settings
from memchat.tui.app import MemchatApp
from tests.test_cli import entries, memchat, one_error_line, run
from tests.test_cli import env as env  # the fixture: SQLite in tmp_path, no MEMCHAT_/OPENAI_ variables
from tests.tui.support import make_settings, ready, runner_factory

COMMANDS = [[], ["ask"], ["memory"], *(["memory", c] for c in
            ("list", "search", "add", "delete", "restore", "clear", "count"))]  # fmt: skip
FALLBACK = re.compile(
    r"^memchat: OPENAI_API_KEY is not set, so the offline model answers instead of gpt-4o: "
    r"set OPENAI_API_KEY \(and OPENAI_BASE_URL\) to use it$"
)


def test_version_prints_the_installed_version(env) -> None:
    result = run("--version")
    assert result.exit_code == 0 and result.stdout == f"memchat {version('memchat')}\n"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "memchat")
def test_dash_h_is_help_and_help_has_no_type_placeholders(env, command) -> None:
    short, long = run(*command, "-h"), run(*command, "--help")
    assert short.exit_code == 0 and long.exit_code == 0
    assert short.stdout == long.stdout and "Usage: memchat" in short.stdout
    assert "-h, --help" in short.stdout
    placeholders = re.findall(r"<[a-z_\[\]|, ]+>", short.stdout)
    assert placeholders == [], placeholders


def test_help_names_values_with_metavars(env) -> None:
    text = run("-h").stdout
    for shown in ("--memory BACKEND", "--model MODEL", "--user USER", "--timeout DURATION",
                  "--enable-tool TOOL", "--preload N", "--env-file PATH"):  # fmt: skip
        assert shown in text
    assert "QUERY  What to look for." in run("memory", "search", "-h").stdout


# -- memchat ask ---------------------------------------------------------------------


def test_ask_prints_only_the_answer_and_shares_the_chats_memory(env) -> None:
    told = run("ask", "I like green tea")
    assert told.exit_code == 0, told.output
    assert told.stdout == "Got it, I'll remember: User likes green tea.\n" and told.stderr == ""
    assert [e.memory.text for e in entries()] == ["User likes green tea"]
    asked = run("ask", input="What do I like?\n")  # the question from stdin
    assert asked.exit_code == 0, asked.output
    assert asked.stdout == "Here's what I remember:\n- User likes green tea\n" and asked.stderr == ""
    chat = run("--plain", input="What do I like?\n/exit\n")  # the chat sees what ask stored
    assert chat.exit_code == 0 and "- User likes green tea" in chat.stdout


def test_ask_verbose_shows_banner_and_tool_calls_on_stderr(env) -> None:
    run("ask", "I live in Berlin")
    result = run("ask", "--verbose", "where do I live?")
    assert result.exit_code == 0
    assert result.stdout == "Here's what I remember:\n- User lives in Berlin\n"
    assert "🧠 Simple Memory Chat" in result.stderr and "🔧 Memory tool calls initiated:" in result.stderr
    assert "memory_search" in result.stderr and "✅ Memory tool response" in result.stderr
    assert "🤖 Let me check my memory." in result.stderr  # said before the tool call: not the answer


def test_ask_takes_the_chats_options_before_it(env) -> None:
    run("--user", "alice", "ask", "I play the cello")
    assert [e.memory.text for e in entries(user="alice")] == ["User plays the cello"]
    assert entries() == []


def test_ask_without_a_question_is_one_line(env, monkeypatch) -> None:
    from memchat import cli

    assert "the question is empty" in one_error_line(run("ask", "  "))
    monkeypatch.setattr(cli, "_stdin_is_terminal", lambda: True)
    assert 'give a question: memchat ask "what do I like?"' in one_error_line(run("ask"))


def test_echo_question_into_a_real_memchat_ask(env) -> None:
    told = memchat(["ask", "I am allergic to peanuts"], env)
    assert told.returncode == 0 and told.stderr == b"", told.stderr
    done = memchat(["ask"], env, stdin=b"what am I allergic to?\n")
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert done.stdout.decode() == "Here's what I remember:\n- User is allergic to peanuts\n"


# -- a model asked for without a key -------------------------------------------------


def test_a_model_without_a_key_says_the_offline_model_answers(env) -> None:
    result = run("--model", "gpt-4o", "ask", "hello")
    assert result.exit_code == 0
    assert [line for line in result.stderr.splitlines() if FALLBACK.match(line)] == result.stderr.splitlines()
    assert len(result.stderr.splitlines()) == 1
    chat = run("--model", "gpt-4o", "--plain", input="/exit\n")
    assert FALLBACK.match(chat.stderr.strip())
    assert "Offline model (gpt-4o needs OPENAI_API_KEY, which is not set)" in chat.stdout
    # The default model without a key is the documented offline mode: no warning.
    assert run("ask", "hello").stderr == "" and run("--model", "offline", "ask", "hello").stderr == ""


async def test_the_tui_header_says_the_offline_model_stands_in() -> None:
    settings = make_settings(model="gpt-4o")
    settings = Settings(**{**settings.__dict__, "sources": {"model": "command line"}})
    app = MemchatApp(settings, runner_factory=runner_factory(), cursor_blink=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        assert app.chat.header.model == "offline (no key for gpt-4o)"
        assert "offline (no key for gpt-4o)" in app.chat.header.render().plain
