"""`memchat mcp token …` and the server's options, through the real CLI (CliRunner)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from typer.testing import CliRunner

from memchat import cli
from memchat.mcp.http import parse_address
from memchat.mcp.tokens import TokenStore


@pytest.fixture
def env(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("MEMCHAT_", "OPENAI_", "SQLITE")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SQLITE_MEMORY_DSN", str(tmp_path / "memories.db"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(cli.app, list(args))


def test_a_token_is_printed_once_and_kept_only_as_a_salted_hash(env) -> None:
    created = run("mcp", "token", "create", "--user", "alice")
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert token.startswith("mcm_") and len(token) > 40
    assert "shown only now" in created.stderr and token not in created.stderr

    path = env / "data" / "memchat" / "mcp-tokens.json"  # beside the default SQLite database
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    # mcm_<hex id>_<secret>: the secret is URL-safe base 64 and may hold "_" itself.
    secret = token.split("_", 2)[2]
    assert len(secret) >= 40
    assert secret not in text and token not in text
    (record,) = json.loads(text)["tokens"]
    assert (record["user"], record["app"]) == ("alice", "memory-chat")
    assert record["salt"] and len(record["sha256"]) == 64

    listed = run("mcp", "token", "list")
    assert record["id"] in listed.stdout and "'alice'" in listed.stdout
    assert secret not in listed.stdout and record["sha256"] not in listed.stdout

    key = TokenStore(path).verify(token).key
    assert (key.app, key.user) == ("memory-chat", "alice")


def test_two_tokens_of_one_user_differ_and_revoking_one_keeps_the_other(env) -> None:
    first = run("mcp", "token", "create", "--user", "bob", "--app", "notes").stdout.strip()
    second = run("mcp", "token", "create", "--user", "bob", "--app", "notes").stdout.strip()
    assert first != second
    store = TokenStore()
    first_id = store.verify(first).id
    revoked = run("mcp", "token", "revoke", first_id)
    assert revoked.exit_code == 0 and "Revoked token" in revoked.stdout
    assert store.verify(first) is None and store.verify(second).key.app == "notes"
    again = run("mcp", "token", "revoke", first_id)
    assert again.exit_code == 2 and "no MCP token has the id" in again.stderr


def test_the_token_file_can_be_chosen(env, monkeypatch) -> None:
    chosen = env / "elsewhere" / "tokens.json"
    monkeypatch.setenv("MEMCHAT_MCP_TOKENS", str(chosen))
    token = run("mcp", "token", "create", "--user", "carol").stdout.strip()
    assert TokenStore(chosen).verify(token) is not None
    assert not (env / "data" / "memchat" / "mcp-tokens.json").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("mcp", "token", "create", "--user", " "), "--user is empty"),
        (("mcp", "token", "create", "--user", "a\x1bb"), "--user is not usable"),
        (("mcp", "token", "revoke", "nope"), "no MCP token has the id 'nope'"),
        (("mcp", "--http", "127.0.0.1:99999"), "--http '127.0.0.1:99999' is not an address"),
        (("mcp", "--http", "8765", "--user", "alice"), "each request's token says who is calling"),
        (("--user", "alice", "mcp", "--http", "8765"), "each request's token says who is calling"),
        (("mcp", "--enable-tool", "memory_nuke"), "unknown tool 'memory_nuke'"),
        (("mcp", "--memory", "mongodb"), "mongodb"),
    ],
)
def test_bad_options_are_one_line(env, args, needle) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert result.stdout == ""


def test_a_damaged_token_file_is_one_line(env, monkeypatch) -> None:
    path = env / "tokens.json"
    path.write_text("{not json")
    monkeypatch.setenv("MEMCHAT_MCP_TOKENS", str(path))
    result = run("mcp", "token", "list")
    assert result.exit_code == 2 and "is damaged" in result.stderr
    assert TokenStore(path).verify("mcm_00000000_" + "a" * 43) is None  # admits nobody


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("8765", ("127.0.0.1", 8765)),
        (":8765", ("127.0.0.1", 8765)),
        ("localhost:9000", ("localhost", 9000)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::1]:8765", ("::1", 8765)),
    ],
)
def test_http_addresses_default_to_loopback(given, expected) -> None:
    assert parse_address(given) == expected


def test_without_the_sdk_the_server_says_which_install_fixes_it(env, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "mcp", None)  # as if `memchat[mcp]` were not installed
    monkeypatch.setitem(sys.modules, "mcp.server", None)
    result = run("mcp")
    assert result.exit_code == 2
    assert result.stderr.strip() == "memchat: memchat mcp needs the MCP SDK: pip install 'memchat[mcp]'"
    # Tokens need no SDK.
    assert run("mcp", "token", "create", "--user", "alice").exit_code == 0
