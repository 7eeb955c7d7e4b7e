"""The background workers (reference §6.1–§6.2, §9.6): jobs through the scripted
OpenAI-compatible server (add, update, delete, malformed output, timeout, queue
full), the delta scan and watermark, operation execution rules, closing."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from backends import create
from memchat.engine import MemoryService, UserKey
from memchat.engine.extraction import (
    AutoMemory,
    AutoMemoryConfig,
    Operation,
    message_threshold,
    time_interval,
)
from memchat.engine.extraction.types import OperationType
from memchat.engine.extraction.worker import fnv32a
from memchat.engine.tools import ToolSettings
from tests.extraction.helpers import KEY, FakeExtractor, Recorder, auto_service, conversation, model_extractor
from tests.scripted_openai import ScriptedOpenAI

#: No keyword in it matches the stored memories below, so the extractor lists
#: them newest first: [1] Likes coffee, [2] Lives in Berlin.
TIDY = conversation("please tidy up my notes", "Sure, done.")


@pytest.fixture
def server():
    with ScriptedOpenAI() as s:
        yield s


async def seeded(service: MemoryService) -> tuple[str, str]:
    berlin = await service.add(KEY, "Lives in Berlin", ["location"])
    coffee = await service.add(KEY, "Likes coffee", ["food"])
    return berlin.id, coffee.id


async def texts(service: MemoryService) -> list[str]:
    return sorted(e.memory.text for e in await service.read(KEY))


async def test_extraction_adds_updates_and_deletes_by_number(server) -> None:
    service = auto_service(model_extractor(server))
    berlin, coffee = await seeded(service)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    server.reply_tool_calls(
        [
            ("c1", "memory_add", '{"memory": "Writes Go at work", "topics": ["work"]}'),
            ("c2", "memory_update", '{"memory_id": "2", "memory": "Lives in Paris", "topics": ["location"]}'),
            ("c3", "memory_delete", '{"memory_id": "1"}'),
        ]
    )
    assert service.enqueue_auto_memory_job(KEY, "s1", TIDY) == "queued"
    [done] = await recorder.wait_finished()
    assert (done.status, done.summary(), done.skipped, done.errors) == (
        "ok",
        "+1 added, 1 updated, 1 deleted",
        (),
        (),
    )
    assert await texts(service) == ["Lives in Paris", "Writes Go at work"]
    assert done.updated[0][0].id == berlin and done.updated[0][1].memory.text == "Lives in Paris"
    assert done.deleted[0].id == coffee
    started = recorder.events[0]
    assert (started.key, started.session_id, started.messages) == (KEY, "s1", 2)
    # Defaults: the extractor may add, update and delete, not clear.
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == [
        "memory_add",
        "memory_update",
        "memory_delete",
    ]
    await service.close()


async def test_malformed_output_is_skipped_and_never_touches_memories(server, caplog) -> None:
    caplog.set_level(logging.WARNING)
    service = auto_service(model_extractor(server))
    await seeded(service)
    before = await service.read(KEY)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    server.reply_tool_calls(
        [
            ("c1", "memory_update", '{"memory_id": "2", "memory": "Lives in'),  # broken JSON
            ("c2", "memory_delete", '{"memory_id": "9"}'),  # no memory [9]
            ("c3", "memory_wipe", "{}"),  # unknown operation
            ("c4", "memory_delete", '{"memory_id": "' + before[0].id + '"}'),  # a raw ID
            ("c5", "memory_add", '{"memory": ""}'),  # empty
        ]
    )
    service.enqueue_auto_memory_job(KEY, "s1", TIDY)
    [done] = await recorder.wait_finished()
    assert done.status == "ok" and not done.changed and len(done.skipped) == 5
    assert await service.read(KEY) == before
    assert len([r for r in caplog.records if "memory extraction" in r.message]) >= 5
    await service.close()


async def test_a_reply_that_is_not_json_at_all_changes_nothing(server) -> None:
    service = auto_service(model_extractor(server))
    await seeded(service)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    server.reply_text('{"operations": [{"op": "delete", "memory_id": 1},')
    service.enqueue_auto_memory_job(KEY, "s1", TIDY)
    [done] = await recorder.wait_finished()
    assert done.status == "ok" and not done.changed and len(done.skipped) == 1
    assert await texts(service) == ["Likes coffee", "Lives in Berlin"]
    await service.close()


async def test_timeout_keeps_the_messages_pending(server) -> None:
    service = auto_service(model_extractor(server), job_timeout=0.5)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    server.reply_delay(3)
    server.reply_text("too late")
    first = conversation("I like tea", "Noted.")
    service.enqueue_auto_memory_job(KEY, "s1", first)
    [done] = await recorder.wait_finished()
    assert done.status == "timeout" and "timed out after 0.5 s" in done.errors[0]
    assert await service.count(KEY) == 0
    # The next job offers the same messages again, plus the new ones.
    server.reply_tool_calls([("c1", "memory_add", '{"memory": "Likes tea"}')])
    service.enqueue_auto_memory_job(KEY, "s1", [*first, *conversation("and jazz", "Nice.")])
    await recorder.wait_finished(2)
    sent = [m["content"] for m in server.requests[1]["messages"][1:]]
    assert sent[:4] == ["I like tea", "Noted.", "and jazz", "Nice."]
    assert await texts(service) == ["Likes tea"]
    await service.close()


async def test_model_failure_keeps_the_watermark_and_success_advances_it(server) -> None:
    service = auto_service(model_extractor(server))
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    server.reply_error(400, "the model is confused")
    history = conversation("I like tea", "Noted.")
    service.enqueue_auto_memory_job(KEY, "s1", history)
    [failed] = await recorder.wait_finished()
    assert failed.status == "failed" and "model error" in failed.errors[0]
    server.reply_tool_calls([("c1", "memory_add", '{"memory": "Likes tea"}')])
    history += conversation("and jazz", "Nice.")
    service.enqueue_auto_memory_job(KEY, "s1", history)
    await recorder.wait_finished(2)
    server.reply_text("nothing new")
    history += conversation("bye", "Bye!")
    service.enqueue_auto_memory_job(KEY, "s1", history)
    await recorder.wait_finished(3)
    assert len(server.requests[1]["messages"]) == 1 + 4 + 1  # system, 4 pending, trailing user
    assert [m["content"] for m in server.requests[2]["messages"][1:3]] == ["bye", "Bye!"]
    await service.close()


async def test_queue_full_defers_without_blocking_or_dropping(server) -> None:
    service = auto_service(model_extractor(server), workers=1, queue_size=1)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    facts = ["Likes tea", "Plays chess", "Speaks Dutch"]
    for i, fact in enumerate(facts):
        server.reply_delay(0.2)
        server.reply_tool_calls([(f"c{i}", "memory_add", f'{{"memory": "{fact}"}}')])
    statuses = [service.enqueue_auto_memory_job(KEY, f"s{i}", conversation(f"fact {i}")) for i in range(3)]
    assert statuses == ["queued", "deferred", "deferred"]
    # Submitting again while a session waits coalesces into its queued job.
    assert service.enqueue_auto_memory_job(KEY, "s2", conversation("fact 2", "ok", "more")) == "coalesced"
    done = await recorder.wait_finished(3)
    assert [d.session_id for d in done] == ["s0", "s1", "s2"] and all(d.ok for d in done)
    assert await texts(service) == sorted(facts)
    # The deferred job picked up the messages that arrived while it waited.
    assert [m["content"] for m in server.requests[2]["messages"][1:4]] == ["fact 2", "ok", "more"]
    await service.close()


async def test_checkers_hold_messages_until_they_agree(server) -> None:
    extractor = model_extractor(server, checkers=[message_threshold(3)])
    service = auto_service(extractor)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    history = conversation("I like tea", "Noted.")
    assert service.enqueue_auto_memory_job(KEY, "s1", history) == "waiting"
    history += conversation("I play chess", "Cool.")
    server.reply_tool_calls(
        [("a", "memory_add", '{"memory": "Likes tea"}'), ("b", "memory_add", '{"memory": "Plays chess"}')]
    )
    assert service.enqueue_auto_memory_job(KEY, "s1", history) == "queued"
    await recorder.wait_finished()
    assert len(server.requests) == 1 and len(server.requests[0]["messages"]) == 1 + 4 + 1
    assert await texts(service) == ["Likes tea", "Plays chess"]
    # Forced (end of the conversation): the checkers are not asked.
    history += conversation("bye")
    assert service.enqueue_auto_memory_job(KEY, "s1", history) == "waiting"
    server.reply_text("nothing")
    assert service.enqueue_auto_memory_job(KEY, "s1", history, force=True) == "queued"
    await recorder.wait_finished(2)
    await service.close()


async def test_time_interval_uses_the_time_of_the_last_extracted_message() -> None:
    now = [datetime(2024, 5, 7, 12, 0, tzinfo=UTC)]
    extractor = FakeExtractor()
    extractor.checkers = [time_interval(180)]
    extractor.should_extract = lambda c: all(k(c) for k in extractor.checkers)  # type: ignore[method-assign]
    service = MemoryService(create("inmemory"))
    auto = AutoMemory(service, extractor, clock=lambda: now[0])
    recorder = Recorder()
    auto.add_listener(recorder)
    history = conversation("a", "b")
    assert auto.submit(KEY, "s", history) == "queued"  # first extraction: no interval yet
    await recorder.wait_finished()
    history += conversation("c", "d")
    now[0] += timedelta(seconds=180)
    assert auto.submit(KEY, "s", history) == "waiting"
    now[0] += timedelta(seconds=1)
    assert auto.submit(KEY, "s", history) == "queued"
    await recorder.wait_finished(2)
    assert [m["content"] for m in extractor.calls[1][0]] == ["c", "d"]
    await auto.close()


async def test_only_user_and_assistant_text_is_fed() -> None:
    extractor = FakeExtractor()
    service = MemoryService(create("inmemory"), extractor=extractor)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    history = [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "I like tea"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t", "type": "function"}]},
        {"role": "tool", "tool_call_id": "t", "content": '{"message": "ok"}'},
        {"role": "assistant", "content": "   "},
        {"role": "user", "content": [{"type": "text", "text": "and jazz"}, {"type": "image_url"}]},
        {"role": "assistant", "content": "Noted both."},
    ]
    service.enqueue_auto_memory_job(KEY, "s", history)
    await recorder.wait_finished()
    assert extractor.calls[0][0] == [
        {"role": "user", "content": "I like tea"},
        {"role": "user", "content": "and jazz"},
        {"role": "assistant", "content": "Noted both."},
    ]
    # Nothing new, or only tool traffic: no job.
    assert service.enqueue_auto_memory_job(KEY, "s", history) == "nothing new"
    tools_only = [*history, {"role": "tool", "tool_call_id": "u", "content": "{}"}]
    assert service.enqueue_auto_memory_job(KEY, "s", tools_only) == "nothing new"
    assert service.enqueue_auto_memory_job(UserKey("app", ""), "s", history) == "skipped"
    await service.close()


async def test_execution_rules() -> None:
    service = MemoryService(create("inmemory"), soft_delete=True)
    gone = await service.add(KEY, "Old fact")
    await service.delete(KEY, gone.id)
    keep = await service.add(KEY, "Likes tea")
    extractor = FakeExtractor(
        [
            Operation(OperationType.UPDATE, memory="Revived as an add", memory_id=gone.id),  # missing → add
            Operation(OperationType.DELETE, memory_id=gone.id),  # missing → ignored
            Operation(OperationType.UPDATE, memory="Likes green tea", memory_id=keep.id, target=keep),
            # The second update follows the first one's ID rotation.
            Operation(OperationType.UPDATE, memory="Likes green tea a lot", memory_id=keep.id, target=keep),
            Operation(OperationType.ADD, memory="x" * 20_000),  # invalid → error, the rest goes on
            Operation("teleport", memory="?"),  # unknown type → logged
            Operation(OperationType.CLEAR),  # disabled by default → skipped
        ]
    )
    auto = AutoMemory(service, extractor, enabled=frozenset({"memory_add", "memory_update", "memory_delete"}))
    recorder = Recorder()
    auto.add_listener(recorder)
    auto.submit(KEY, "s", conversation("go"))
    [done] = await recorder.wait_finished()
    assert done.status == "ok"
    assert [e.memory.text for e in done.added] == ["Revived as an add"]
    assert [after.memory.text for _, after in done.updated] == ["Likes green tea", "Likes green tea a lot"]
    assert done.deleted == () and done.cleared == 0
    assert len(done.errors) == 1 and done.errors[0].startswith("memory_add:")
    assert sorted(e.memory.text for e in await service.read(KEY)) == [
        "Likes green tea a lot",
        "Revived as an add",
    ]
    await auto.close()


async def test_update_of_a_missing_memory_is_dropped_when_add_is_disabled() -> None:
    service = MemoryService(create("inmemory"))
    extractor = FakeExtractor([Operation(OperationType.UPDATE, memory="x", memory_id="f" * 64)])
    auto = AutoMemory(service, extractor, enabled=frozenset({"memory_update"}))
    recorder = Recorder()
    auto.add_listener(recorder)
    auto.submit(KEY, "s", conversation("go"))
    [done] = await recorder.wait_finished()
    assert done.ok and not done.changed and await service.count(KEY) == 0
    await auto.close()


async def test_enabled_tools_reach_the_extractor_and_clear_needs_enabling() -> None:
    extractor = FakeExtractor([Operation(OperationType.CLEAR)])
    service = MemoryService(
        create("inmemory"),
        extractor=extractor,
        tool_settings=ToolSettings(enabled={"memory_clear": True, "memory_delete": False}),
    )
    await service.add(KEY, "Likes tea")
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    service.enqueue_auto_memory_job(KEY, "s", conversation("forget everything"))
    [done] = await recorder.wait_finished()
    assert done.cleared == 1 and done.summary() == "1 cleared"
    assert extractor.calls[0][2] == frozenset(
        {"memory_add", "memory_update", "memory_clear", "memory_search"}
    )
    await service.close()


async def test_existing_memories_come_from_search_then_recent_and_search_failure_falls_back() -> None:
    class FlakySearch(MemoryService):
        fail = False

        async def search(self, key, query, options=None):
            if self.fail:
                raise RuntimeError("search index is down")
            return await super().search(key, query, options)

    extractor = FakeExtractor()
    # Keyword mode: only "Plays chess" is a hit, so the recent ones must follow it.
    service = FlakySearch(create("inmemory"), extractor=extractor, search_mode="keyword")
    for text in ("Likes tea", "Plays chess", "Lives in Berlin"):
        await service.add(KEY, text)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    service.enqueue_auto_memory_job(KEY, "s1", conversation("chess tonight?"))
    await recorder.wait_finished()
    assert [e.memory.text for e in extractor.calls[0][1]] == ["Plays chess", "Lives in Berlin", "Likes tea"]
    service.fail = True
    service.enqueue_auto_memory_job(KEY, "s2", conversation("chess tonight?"))
    [_, done] = await recorder.wait_finished(2)
    assert done.ok and [e.memory.text for e in extractor.calls[1][1]] == [
        "Lives in Berlin",
        "Plays chess",
        "Likes tea",
    ]
    await service.close()


async def test_a_nul_or_broken_character_in_the_chat_still_finds_existing_memories(caplog) -> None:
    # The search query may not hold NUL or lone surrogates; chat text may. The
    # extractor must still see the related memory first, with no failed search.
    extractor = FakeExtractor()
    service = MemoryService(create("inmemory"), extractor=extractor)
    for text in ("Likes tea", "Plays chess", "Lives in Berlin"):
        await service.add(KEY, text)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    service.enqueue_auto_memory_job(KEY, "s1", conversation("chess\x00 tonight \ud800?"))
    [done] = await recorder.wait_finished()
    assert done.ok and extractor.calls[0][1][0].memory.text == "Plays chess"
    assert "searching existing memories failed" not in caplog.text
    await service.close()


async def test_one_users_jobs_stay_on_one_worker_and_run_one_at_a_time() -> None:
    assert fnv32a("") == 0x811C9DC5 and fnv32a("a") == 0xE40C292C  # FNV-1a test vectors
    extractor = FakeExtractor(delay=0.05)
    service = MemoryService(create("inmemory"), extractor=extractor, auto_memory=AutoMemoryConfig(workers=4))
    auto = service.auto
    assert auto is not None and auto.config.workers == 4
    assert auto.worker_index(KEY) == fnv32a(KEY.app + KEY.user) % 4
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    for i in range(4):
        service.enqueue_auto_memory_job(KEY, f"session-{i}", conversation(f"message {i}"))
    await recorder.wait_finished(4)
    assert extractor.max_active == 1
    await service.close()


async def test_defaults_and_out_of_range_config() -> None:
    assert AutoMemoryConfig(workers=0, queue_size=0, job_timeout=0).normalised() == AutoMemoryConfig()
    assert (AutoMemoryConfig().workers, AutoMemoryConfig().queue_size, AutoMemoryConfig().job_timeout) == (
        1,
        10,
        30,
    )
    assert MemoryService(create("inmemory")).enqueue_auto_memory_job(KEY, "s", conversation("hi")) == "off"


async def test_close_drains_queued_jobs() -> None:
    extractor = FakeExtractor(
        [Operation(OperationType.ADD, memory="Likes tea")],
        [Operation(OperationType.ADD, memory="Plays chess")],
        delay=0.05,
    )
    service = MemoryService(create("inmemory"), extractor=extractor)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    service.enqueue_auto_memory_job(KEY, "a", conversation("tea"))
    service.enqueue_auto_memory_job(KEY, "b", conversation("chess"))
    await service.close()
    assert [d.status for d in recorder.finished] == ["ok", "ok"] and extractor.closed
    assert service.enqueue_auto_memory_job(KEY, "c", conversation("more")) == "closed"
    # The store was closed after the drain; the memories were written before it.
    assert sorted(e.memory.text for d in recorder.finished for e in d.added) == ["Likes tea", "Plays chess"]


async def test_close_cancels_what_does_not_finish_in_time(caplog) -> None:
    extractor = FakeExtractor(delay=30)
    service = MemoryService(
        create("inmemory"), extractor=extractor, auto_memory=AutoMemoryConfig(drain_timeout=0.2)
    )
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    service.enqueue_auto_memory_job(KEY, "a", conversation("one"))
    service.enqueue_auto_memory_job(KEY, "b", conversation("two"))
    await asyncio.sleep(0.05)
    started = asyncio.get_running_loop().time()
    await service.close()
    assert asyncio.get_running_loop().time() - started < 5
    assert [d.status for d in recorder.finished] == ["cancelled"]
    assert "1 queued session(s) were not extracted" in caplog.text


async def test_listener_failures_do_not_break_the_worker() -> None:
    extractor = FakeExtractor([Operation(OperationType.ADD, memory="Likes tea")])
    service = MemoryService(create("inmemory"), extractor=extractor)

    def broken(event):
        raise RuntimeError("UI went away")

    async def async_listener(event):
        seen.append(type(event).__name__)

    seen: list[str] = []
    service.add_extraction_listener(broken)
    remove = service.add_extraction_listener(async_listener)
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    service.enqueue_auto_memory_job(KEY, "a", conversation("tea"))
    await recorder.wait_finished()
    await asyncio.sleep(0)
    assert seen == ["ExtractionStarted", "ExtractionFinished"] and await service.count(KEY) == 1
    remove()
    await service.close()
