"""Auto mode end to end: the runner hands turns to the background extractor (the
turn finishes first), hybrid tool exposure, the offline rule-based extractor,
settings and CLI flags, and the console's extraction line."""

from __future__ import annotations

import io
import json

import pytest

from backends import create
from memchat.agent.events import ExtractionFinished, ExtractionStarted, TurnDone
from memchat.agent.factory import (
    close_runner,
    create_extractor,
    create_service,
    extraction_checkers,
    extraction_summary,
    open_runner,
)
from memchat.agent.runner import AUTO_SYSTEM_PROMPT, SYSTEM_PROMPT, Runner, tool_summary
from memchat.console import Console, extraction_lines
from memchat.engine import MemoryService, UserKey
from memchat.engine.extraction import ModelExtractor, RuleBasedExtractor
from memchat.engine.model import ConfigError
from memchat.engine.tools import ToolSettings
from memchat.settings import Settings, parse_duration
from tests.agent.test_console import run_memchat
from tests.extraction.helpers import FakeExtractor, Recorder, model_extractor, openai_model
from tests.scripted_openai import ScriptedOpenAI


@pytest.fixture
def chat_server():
    with ScriptedOpenAI() as s:
        yield s


@pytest.fixture
def extract_server():
    with ScriptedOpenAI() as s:
        yield s


def settings(tmp_path, environ=None, **flags) -> Settings:
    return Settings.load(flags, environ=environ or {}, cwd=tmp_path)


# -- the turn finishes first ---------------------------------------------------


async def test_the_chat_turn_finishes_before_the_extraction(chat_server, extract_server) -> None:
    service = MemoryService(create("inmemory"), extractor=model_extractor(extract_server))
    runner = Runner(openai_model(chat_server), service, streaming=True)
    timeline: list[str] = []
    recorder = Recorder()
    runner.add_extraction_listener(lambda e: timeline.append(type(e).__name__))
    runner.add_extraction_listener(recorder)
    chat_server.reply_text("Nice, Go is great.", chunks=3)
    extract_server.reply_delay(0.5)
    extract_server.reply_tool_calls(
        [("c1", "memory_add", '{"memory": "Likes Go", "topics": ["programming"]}')]
    )
    async for event in runner.run("I like Go"):
        if isinstance(event, TurnDone):
            timeline.append("TurnDone")
            assert await service.count(runner.key) == 0  # nothing extracted yet
    [done] = await recorder.wait_finished()
    assert timeline == ["TurnDone", "ExtractionStarted", "ExtractionFinished"]
    assert [e.memory.text for e in done.added] == ["Likes Go"]
    # The agent saw only memory_search and the auto-mode prompt; the extractor saw the turn.
    assert [t["function"]["name"] for t in chat_server.requests[0]["tools"]] == ["memory_search"]
    assert chat_server.requests[0]["messages"][0]["content"] == AUTO_SYSTEM_PROMPT
    sent = extract_server.requests[0]["messages"]
    assert [(m["role"], m["content"]) for m in sent[1:3]] == [
        ("user", "I like Go"),
        ("assistant", "Nice, Go is great."),
    ]
    await close_runner(runner)


async def test_the_extraction_sees_no_tool_traffic_and_new_session_flushes(chat_server) -> None:
    extractor = FakeExtractor()
    service = MemoryService(create("inmemory"), extractor=extractor)
    extractor.answer = False  # the checkers hold everything back
    runner = Runner(openai_model(chat_server), service)
    recorder = Recorder()
    runner.add_extraction_listener(recorder)
    chat_server.reply_tool_calls([("s1", "memory_search", '{"query": "tea"}')])
    chat_server.reply_text("I don't know yet.")
    [e async for e in runner.run("what do I drink?")]
    assert extractor.calls == [] and len(extractor.checks) == 1
    assert [m["role"] for m in extractor.checks[0].messages] == ["user", "assistant"]
    runner.new_session()  # the old conversation is extracted whatever the checkers say
    await recorder.wait_finished()
    assert [m["content"] for m in extractor.calls[0][0]] == ["what do I drink?", "I don't know yet."]
    await close_runner(runner)


async def test_agentic_mode_is_unchanged() -> None:
    service = MemoryService(create("inmemory"))
    runner = Runner(FakeModel(), service)
    assert runner.system_prompt.startswith(SYSTEM_PROMPT) and not runner.auto_extraction
    assert runner.flush_extraction() == "off" and runner.extraction_pending == 0
    assert await runner.drain_extraction() is True
    remove = runner.add_extraction_listener(print)
    remove()
    await service.close()


class FakeModel:
    name = "fake"

    async def close(self) -> None:
        return None


# -- hybrid exposure -------------------------------------------------------------


def names(service: MemoryService) -> list[str]:
    return [t.name for t in service.tools()]


def test_auto_mode_exposes_only_search_by_default_and_exposure_adds_tools() -> None:
    extractor = FakeExtractor()
    assert names(MemoryService(create("inmemory"), extractor=extractor)) == ["memory_search"]
    exposed = ToolSettings(exposed={"memory_add": True})
    assert names(MemoryService(create("inmemory"), extractor=extractor, tool_settings=exposed)) == [
        "memory_add",
        "memory_search",
    ]
    load = ToolSettings(enabled={"memory_load": True})
    assert names(MemoryService(create("inmemory"), extractor=extractor, tool_settings=load)) == [
        "memory_load",
        "memory_search",
    ]
    # Exposing a tool that is not enabled does nothing; disabling search leaves nothing.
    clear = ToolSettings(exposed={"memory_clear": True})
    assert names(MemoryService(create("inmemory"), extractor=extractor, tool_settings=clear)) == [
        "memory_search"
    ]
    off = ToolSettings(enabled={"memory_search": False})
    assert names(MemoryService(create("inmemory"), extractor=extractor, tool_settings=off)) == []


async def test_settings_and_factory_build_hybrid_mode(tmp_path) -> None:
    s = settings(tmp_path, memory="inmemory", extract=True, expose_tools=("memory_add",))
    service = create_service(s)
    assert names(service) == ["memory_add", "memory_search"]
    assert isinstance(service.extractor, RuleBasedExtractor)  # no key
    runner = await open_runner(s)
    enabled, note = tool_summary(runner)
    assert enabled == "memory_add, memory_search"
    assert "memory_update, memory_delete used by the background extractor" in note
    await close_runner(runner)
    await service.close()


# -- offline (no key) ----------------------------------------------------------------


async def test_the_offline_rule_based_extractor_works_without_a_key(tmp_path) -> None:
    s = settings(tmp_path, memory="inmemory", extract=True)
    assert s.extract_offline and s.extraction_model_name == "offline"
    runner = await open_runner(s)
    recorder = Recorder()
    runner.add_extraction_listener(recorder)
    [e async for e in runner.run("Hi, I'm Zhang San and I like Go")]
    [done] = await recorder.wait_finished()
    assert [e.memory.text for e in done.added] == ["User's name is Zhang San", "Zhang San likes Go"]
    [e async for e in runner.run("remember that my sister is Ana")]
    [e async for e in runner.run("我喜欢火锅")]
    await recorder.wait_finished(3)
    texts = sorted(e.memory.text for e in await runner.service.read(runner.key))
    assert texts == sorted(
        ["User's name is Zhang San", "Zhang San likes Go", "User's sister is Ana", "用户喜欢火锅"]
    )
    # "forget …" deletes the best match (memory_delete is enabled for the extractor in auto mode).
    [e async for e in runner.run("forget that my sister is Ana")]
    [*_, done] = await recorder.wait_finished(4)
    assert [e.memory.text for e in done.deleted] == ["User's sister is Ana"]
    # Saying it again is not a new memory (merge_similar drops the repeat).
    [e async for e in runner.run("I like Go")]
    [*_, done] = await recorder.wait_finished(5)
    assert done.ok
    await close_runner(runner)


def test_extractor_choice(tmp_path) -> None:
    keyed = {"OPENAI_API_KEY": "sk-x"}
    assert isinstance(create_extractor(settings(tmp_path, keyed, extract=True)), ModelExtractor)
    offline = settings(tmp_path, keyed, extract=True, extract_model="offline")
    assert isinstance(create_extractor(offline), RuleBasedExtractor)
    chosen = create_extractor(
        settings(tmp_path, keyed, extract=True, extract_model="gpt-x", update_policy="append_only")
    )
    assert chosen.model.name == "gpt-x" and chosen.policy == "append_only" and chosen.owns_model


# -- settings and flags ------------------------------------------------------------------


def test_durations() -> None:
    assert [parse_duration(v) for v in ("3m", "90s", "1h30m", "500ms", "45", 2.5, 7)] == [
        180,
        90,
        5400,
        0.5,
        45,
        2.5,
        7,
    ]
    with pytest.raises(ConfigError, match="duration such as 90s"):
        parse_duration("3 minutes")


def test_settings_from_flags_environment_and_config(tmp_path) -> None:
    s = settings(
        tmp_path,
        extract=True,
        extract_every=4,
        extract_interval="3m",
        workers=2,
        queue_size=5,
        job_timeout="45s",
        expose_tools=("memory_add",),
    )
    assert (s.extract_every, s.extract_interval, s.workers, s.queue_size, s.job_timeout) == (4, 180, 2, 5, 45)
    assert s.tool_settings().exposed == {"memory_add": True}
    env = {
        "MEMCHAT_EXTRACT": "1",
        "MEMCHAT_EXTRACT_INTERVAL": "2m",
        "MEMCHAT_EXPOSE_TOOLS": "memory_add,memory_load",
    }
    s = settings(tmp_path, env)
    assert s.extract and s.extract_interval == 120 and s.expose_tools == ("memory_add", "memory_load")
    (tmp_path / "memchat.toml").write_text(
        '[extraction]\nenabled = true\nevery = 6\ninterval = "1h"\nworkers = 3\n'
        'update_policy = "preserve_history"\n'
        '[tools]\nexpose = ["memory_update"]\n'
    )
    s = settings(tmp_path)
    assert (s.extract, s.extract_every, s.extract_interval, s.workers, s.update_policy, s.expose_tools) == (
        True,
        6,
        3600,
        3,
        "preserve_history",
        ("memory_update",),
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"extract_every": 4}, "--extract-every only applies to auto extraction: add --extract"),
        ({"extract": True, "extract_interval": "soon"}, "duration such as 90s"),
        ({"extract": True, "workers": 0}, "--workers must be 1 or more"),
        ({"extract": True, "queue_size": 0}, "--queue-size must be 1 or more"),
        ({"extract": True, "job_timeout": "0s"}, "--job-timeout must be a positive duration"),
        ({"extract": True, "update_policy": "yolo"}, "unknown update policy 'yolo'"),
        ({"extract": True, "expose_tools": ("memory_nuke",)}, "unknown tool 'memory_nuke' for --expose-tool"),
    ],
)
def test_bad_settings_are_one_sentence(tmp_path, flags, message) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(tmp_path, **flags)


def test_checkers_from_settings(tmp_path) -> None:
    assert extraction_checkers(settings(tmp_path, extract=True)) == []
    [every] = extraction_checkers(settings(tmp_path, extract=True, extract_every=4))
    from memchat.engine.extraction import ExtractionContext

    def ctx(n):
        return ExtractionContext(UserKey("a", "u"), tuple({} for _ in range(n)), None, None)

    assert (every(ctx(3)), every(ctx(4))) == (False, True)  # "every 4": at least 4 new messages
    [both] = extraction_checkers(settings(tmp_path, extract=True, extract_every=4, extract_interval="1m"))
    assert both(ctx(1))  # any: the first extraction has no interval yet
    line = extraction_summary(settings(tmp_path, extract=True, extract_every=4, extract_interval="3m"))
    assert "once 4 new messages or 3m since the last extraction" in line
    assert extraction_summary(settings(tmp_path)) == ""


# -- the console ------------------------------------------------------------------------


def test_extraction_lines() -> None:
    from datetime import UTC, datetime

    from memchat.engine import Entry, Memory

    now = datetime.now(UTC)
    old = Entry("1", "a", "u", Memory("Lives in Berlin"), now, now)
    new = Entry("2", "a", "u", Memory("Lives in Paris"), now, now)
    tea = Entry("3", "a", "u", Memory("Likes tea"), now, now)
    done = ExtractionFinished(
        UserKey("a", "u"), "s", "ok", 2, added=(tea,), updated=((old, new),), deleted=(old,)
    )
    assert extraction_lines(done) == [
        "🧩 Background extraction: +1 added, 1 updated, 1 deleted",
        "   + Likes tea",
        "   ~ Lives in Paris  (was: Lives in Berlin)",
        "   - Lives in Berlin",
    ]
    assert extraction_lines(ExtractionFinished(UserKey("a", "u"), "s", "ok", 2)) == []
    timeout = ExtractionFinished(UserKey("a", "u"), "s", "timeout", 2, errors=("timed out after 30 s",))
    assert extraction_lines(timeout)[0].startswith("🧩 Background extraction timed out: timed out after 30 s")
    skipped = ExtractionFinished(UserKey("a", "u"), "s", "ok", 2, skipped=("bad", "worse"))
    assert extraction_lines(skipped) == [
        "🧩 Background extraction: no changes (2 invalid operations skipped)"
    ]
    assert ExtractionStarted(UserKey("a", "u"), "s", 2).messages == 2


async def test_console_prints_what_the_extraction_changed(tmp_path) -> None:
    runner = await open_runner(settings(tmp_path, memory="inmemory", extract=True))
    out = io.StringIO()
    console = Console(runner, out, echo_input=True, extraction="🧩 Auto extraction: on")
    code = await console.run(io.StringIO("I like tea\n/memory\n/exit\n"))
    await close_runner(runner)
    text = out.getvalue()
    assert code == 0 and "🧩 Auto extraction: on" in text
    assert "🧩 Background extraction: +1 added\n   + User likes tea\n" in text
    assert "📚 Stored memories (1):" in text or "📭 No memories stored yet." in text
    assert text.index("+ User likes tea") < text.index("👋 Goodbye!")


def test_the_cli_runs_auto_mode_offline(tmp_path) -> None:
    result = run_memchat(
        [
            "--plain",
            "--extract",
            "--memory",
            "sqlite",
            "--expose-tool",
            "memory_load",
            "--enable-tool",
            "memory_load",
        ],
        "I live in Berlin\nI like jazz\n/exit\n",
        {"SQLITE_MEMORY_DSN": str(tmp_path / "m.db")},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Available tools: memory_search, memory_load" in out
    assert "🧩 Auto extraction: rule-based (offline) in the background, after every turn" in out
    assert "+ User lives in Berlin" in out and "+ User likes jazz" in out
    listed = run_memchat(
        ["memory", "list", "--memory", "sqlite", "--json"], "", {"SQLITE_MEMORY_DSN": str(tmp_path / "m.db")}
    )
    assert sorted(m["memory"]["memory"] for m in json.loads(listed.stdout)) == [
        "User likes jazz",
        "User lives in Berlin",
    ]


def test_cli_flag_errors_are_one_line(tmp_path) -> None:
    result = run_memchat(["--plain", "--extract-every", "4"], "/exit\n", {})
    assert result.returncode == 2
    assert "--extract-every only applies to auto extraction: add --extract" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
