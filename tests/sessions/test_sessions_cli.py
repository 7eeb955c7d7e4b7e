"""The command line over saved sessions: `memchat --plain -c` / `--session`
in real processes (the model sees the saved conversation), and `memchat
sessions list|show|export|rename|delete` in process (typer's CliRunner)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memchat import cli
from tests.support import clean_cli_environment


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict[str, str]:
    """SQLite in tmp_path, no config file, no MEMCHAT_* variables, keyword search (no model to load)."""
    return clean_cli_environment(tmp_path, monkeypatch, MEMCHAT_EMBEDDER="none")


def chat(env: dict[str, str], stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMCHAT_"))}
    return subprocess.run(
        [sys.executable, "-m", "memchat", "--plain", *args],
        input=stdin, capture_output=True, text=True, timeout=60, env={**clean, **env}, cwd=home(env),
    )  # fmt: skip


def home(env: dict[str, str]) -> Path:
    """The test's folder (the chat runs there: /export writes there)."""
    return Path(env["SQLITE_MEMORY_DSN"]).parent


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli.app, list(args), input=input)


def session_ids() -> list[str]:
    result = run("sessions", "list", "--json")
    assert result.exit_code == 0, result.output
    return [s["id"] for s in json.loads(result.stdout)]


def test_continue_the_last_session_and_the_model_sees_it(env) -> None:
    first = chat(env, "I like Go\n/exit\n")
    assert first.returncode == 0, first.stderr
    again = chat(env, "What did I just say?\n/exit\n", "-c")
    assert again.returncode == 0, again.stderr
    assert "↩️  Continuing session memory-session-" in again.stdout
    assert "👤 You: I like Go" in again.stdout  # the conversation so far is shown again
    # The offline model answers this from the history it was given, not from memory.
    assert "Earlier in this conversation you said: “I like Go”" in again.stdout
    [only] = session_ids()
    shown = run("sessions", "show", only)
    assert shown.exit_code == 0
    assert shown.stdout.count("👤 You:") == 2 and "What did I just say?" in shown.stdout


def test_new_leaves_the_previous_session_listed_and_session_id_opens_it(env) -> None:
    done = chat(env, "I like Go\n/new\nhello\n/sessions\n/exit\n")
    assert done.returncode == 0, done.stderr
    newest, older = session_ids()
    listing = done.stdout[done.stdout.index("📂 Saved sessions (2)") :]
    assert listing.index(newest) < listing.index(older) and "▶ " + newest in listing
    picked = chat(env, "What did I just say?\n/exit\n", "--session", older[-10:])
    assert "Earlier in this conversation you said: “I like Go”" in picked.stdout
    assert session_ids()[0] == older  # it is the most recently active now


def test_an_unknown_session_is_one_line_and_exit_code_2(env) -> None:
    result = chat(env, "hello\n", "--session", "memory-session-1")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "memchat: no saved session 'memory-session-1' for this user: "
        "`memchat sessions list` shows the saved ones"
    )
    assert run("--resume", "--session", "x").exit_code == 2


def test_list_search_show_rename_export_and_delete(env, tmp_path) -> None:
    assert run("sessions", "list").stdout.strip() == "No saved sessions."
    chat(env, "I like Go\n/new\n我喜欢喝绿茶\n/exit\n")
    tea, go = session_ids()
    listed = run("sessions", "list").stdout.splitlines()
    assert [line.split()[0] for line in listed] == [tea, go]
    assert "2 messages  I like Go" in listed[1]
    assert run("sessions", "list", "--search", "绿茶").stdout.split()[0] == tea
    assert "No saved session holds 'python'." in run("sessions", "list", "-s", "python").stdout

    renamed = run("sessions", "rename", go, "Programming languages")
    assert renamed.exit_code == 0 and "Programming languages" in run("sessions", "list").stdout

    markdown = run("sessions", "export", go)
    assert markdown.exit_code == 0
    text = markdown.stdout
    assert text.startswith("# Programming languages\n") and "## You\n\nI like Go" in text
    assert (
        "🔧 **memory_add**" in text and '"memory": "User likes Go"' in text and "✅ memory_add result" in text
    )
    out = tmp_path / "go.json"
    assert run("sessions", "export", go, "-o", str(out)).exit_code == 0
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["format"] == "memchat-session/1" and document["session"]["id"] == go
    roles = [r["data"].get("role") for r in document["records"] if r["kind"] == "message"]
    assert roles == ["user", "assistant", "tool", "assistant"]
    bad = run("sessions", "export", go, "--format", "pdf")
    assert bad.exit_code == 2 and "unknown export format 'pdf'" in bad.stderr

    refused = run("sessions", "delete", go)
    assert refused.exit_code == 2 and "add --yes" in refused.stderr and len(session_ids()) == 2
    assert run("sessions", "delete", go, "--yes").exit_code == 0
    assert session_ids() == [tea]
    gone = run("sessions", "show", go)
    assert gone.exit_code == 2 and "no saved session" in gone.stderr


def test_delete_on_a_terminal_asks_and_no_keeps_it(env, monkeypatch) -> None:
    from memchat import cli as cli_module

    chat(env, "hello\n/exit\n")
    [only] = session_ids()
    monkeypatch.setattr(cli_module, "_stdin_is_terminal", lambda: True)
    kept = run("sessions", "delete", only, input="n\n")
    assert kept.exit_code == 1 and "Delete it for good" in kept.stderr and session_ids() == [only]
    assert run("sessions", "delete", only, input="y\n").exit_code == 0 and session_ids() == []


def test_slash_export_writes_markdown_and_json_in_the_current_folder(env, tmp_path) -> None:
    done = chat(env, "I like Go\n/export\n/export json\n/export notes/x.md\n/exit\n")
    [only] = session_ids()
    root = home(env)
    assert f"💾 Exported {only} (2 messages) to {root / (only + '.md')}" in done.stdout
    assert (root / f"{only}.md").read_text(encoding="utf-8").startswith("# I like Go")
    assert json.loads((root / f"{only}.json").read_text(encoding="utf-8"))["session"]["id"] == only
    assert "❌ Cannot write" in done.stdout and "give another file name" in done.stdout  # notes/ is missing
