"""`memchat memory export | import | migrate` through the real CLI (typer's CliRunner),
over SQLite files in tmp_path, and into the machine's Redis for a migration
between two kinds of backend."""

from __future__ import annotations

import asyncio
import json
import os
import uuid

import pytest

from memchat.engine import UserKey
from memchat.settings import Settings
from tests.support import require
from tests.test_cli import add, entries, env, one_error_line, run  # noqa: F401  (env is a fixture)


@pytest.fixture
def keywords_only(env, monkeypatch):  # noqa: F811
    """No model: these tests are about the file, not about vectors."""
    monkeypatch.setenv("MEMCHAT_EMBEDDER", "none")
    return env


def fill() -> None:
    add("User likes green tea", "--topic", "drinks")
    add("Bob has a cat", "--user", "bob")
    gone = add("User used to smoke")
    assert run("memory", "delete", gone[:12]).exit_code == 0  # a tombstone


def export(*args: str) -> str:
    result = run("memory", "export", *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_export_then_import_elsewhere_gives_the_same_file_and_a_second_import_changes_nothing(
    keywords_only, tmp_path, monkeypatch
) -> None:
    fill()
    first = export()
    header, *records, end = first.splitlines()
    assert json.loads(header)["format"] == "memchat-memories"
    assert {(r["user"], r["deleted_at"] is None) for r in map(json.loads, records)} == {
        ("bob", True),
        ("user", True),
        ("user", False),
    }
    assert json.loads(end)["count"] == 3
    (tmp_path / "backup.jsonl").write_text(first, encoding="utf-8")
    monkeypatch.setenv("SQLITE_MEMORY_DSN", str(tmp_path / "other.db"))
    done = run("memory", "import", str(tmp_path / "backup.jsonl"))
    assert done.exit_code == 0, done.output
    assert done.stdout.strip().endswith("3 added, 0 updated, 0 skipped")
    assert export() == first
    again = run("memory", "import", str(tmp_path / "backup.jsonl"))
    assert "0 added, 0 updated, 3 skipped (3 already there, 0 newer there and kept)" in again.stdout
    assert [e.memory.text for e in entries("bob")] == ["Bob has a cat"]
    # A restored tombstone is a memory again, with its own ID and times.
    [smoke] = [e for e in entries() if e.is_deleted]
    assert run("memory", "restore", smoke.id[:12]).exit_code == 0


def test_import_reads_stdin_and_writes_with_output(keywords_only, tmp_path) -> None:
    fill()
    target = tmp_path / "out" / "memories.jsonl"
    target.parent.mkdir()
    result = run("memory", "export", "-o", str(target))
    assert result.exit_code == 0 and result.stdout == ""
    assert "Exported 3 memories of 2 users from sqlite" in result.stderr
    assert not list(target.parent.glob("*.partial"))
    piped = run("memory", "import", "-", input=target.read_text(encoding="utf-8"))
    assert "0 added, 0 updated, 3 skipped" in piped.stdout


def test_export_of_one_user_only(keywords_only) -> None:
    fill()
    lines = export("--user", "bob").splitlines()
    assert [json.loads(line)["text"] for line in lines[1:-1]] == ["Bob has a cat"]


def test_a_bad_line_is_named_by_number_and_the_rest_is_imported(keywords_only, tmp_path, monkeypatch) -> None:
    fill()
    lines = export().splitlines()
    lines.insert(2, '{"app": "memory-chat", "user": "user", "id": ')
    lines.insert(3, json.dumps(dict(json.loads(lines[1]), id="bad id\t")))
    path = tmp_path / "damaged.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv("SQLITE_MEMORY_DSN", str(tmp_path / "other.db"))
    result = run("memory", "import", str(path))
    assert result.exit_code == 1
    problems = result.stderr.strip().splitlines()
    assert problems[0].startswith("memchat: line 3 skipped: not JSON")
    assert problems[1].startswith("memchat: line 4 skipped: memoryID contains a control character")
    assert problems[-1] == "memchat: 2 lines could not be imported (listed above)"
    assert "3 added" in result.stdout
    assert len(entries()) == 2 and len(entries("bob")) == 1


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "the file is empty"),
        ('{"app": "a"}\n', "this is not a memchat export"),
        ('{"format": "memchat-memories", "version": 9}\n', "upgrade memchat to import it"),
    ],
)
def test_a_file_that_is_not_an_export_is_one_line_and_changes_nothing(
    keywords_only, tmp_path, content, needle
) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(content, encoding="utf-8")
    assert needle in one_error_line(run("memory", "import", str(path)))
    assert entries() == []


def test_missing_file_and_unknown_format_are_one_line(keywords_only, tmp_path) -> None:
    line = one_error_line(run("memory", "import", str(tmp_path / "nope.jsonl")))
    assert "cannot read" in line and "check the path" in line
    assert "the only format is jsonl" in one_error_line(run("memory", "export", "--format", "csv"))


def test_migrate_between_two_files_verifies_and_refuses_the_same_store(keywords_only, tmp_path) -> None:
    fill()
    other = f"sqlite:///{tmp_path / 'copy.db'}"
    result = run("memory", "migrate", "--from", "sqlite", "--to", "sqlite", "--to-dsn", other)
    assert result.exit_code == 0, result.output
    assert "Migrated 3 memories of 2 users" in result.stdout
    assert "Verified: the target holds all 3, checksum sha256:" in result.stdout
    assert "Migrating sqlite → sqlite [" in result.stderr and "100% 3/3 memories" in result.stderr
    empty = run(
        "memory", "migrate", "--from", "sqlite", "--from-dsn", f"sqlite:///{tmp_path / 'empty.db'}",
        "--to", "sqlite", "--to-dsn", other,
    )  # fmt: skip
    assert "holds no memories, so nothing was copied" in one_error_line(empty, code=1)
    same = run("memory", "migrate", "--from", "sqlite", "--to", "sqlite")
    assert "the source and the target are the same store" in one_error_line(same)
    assert "unknown memory backend 'nosuch'" in one_error_line(
        run("memory", "migrate", "--from", "nosuch", "--to", "sqlite")
    )
    assert "has no location" in one_error_line(
        run("memory", "migrate", "--from", "sqlite", "--to", "inmemory", "--to-dsn", "x")
    )


def test_migrate_sqlite_to_redis_copies_vectors_and_search_works_there(env, monkeypatch) -> None:  # noqa: F811
    """The default embedder on both sides: the vectors travel, nothing is embedded again."""
    import redis

    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError):
        require(False, f"Redis is not reachable at {url}: start it or set REDIS_URL")
    prefix = f"memchat-test:{uuid.uuid4().hex}:"
    monkeypatch.setenv("REDIS_URL", url)
    monkeypatch.setenv("REDIS_KEY_PREFIX", prefix)
    try:
        add("Alice has a cat named Tom")
        add("Alice works as a nurse in Berlin")
        before = export("--vectors")
        result = run("memory", "migrate", "--from", "sqlite", "--to", "redis")
        assert result.exit_code == 0, result.output
        assert "2 added, 0 updated, 0 skipped; vectors copied" in result.stdout
        assert "Verified" in result.stdout
        found = run("memory", "search", "--memory", "redis", "kitten")
        assert "has a cat" in found.stdout.splitlines()[0], found.output
        assert export("--vectors", "--memory", "redis") == before
        assert export("--vectors") == before  # the source as it was
        assert len(asyncio.run(_redis_vectors())) == 2
    finally:
        for key in client.scan_iter(match=prefix + "*"):
            client.delete(key)
        client.close()


async def _redis_vectors() -> dict[str, list[float]]:
    from memchat.agent.factory import create_service

    async with create_service(Settings.load({"memory": "redis"})) as svc:
        key = UserKey("memory-chat", "user")
        return await svc.store.vectors(key, [e.id for e in await svc.read(key)])
