"""The model extractor over the real openai SDK against the scripted OpenAI-compatible server:
request layout, number mapping, parsing rules, invalid output and model callbacks."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

from memchat.engine import Entry, Memory
from memchat.engine.extraction import (
    ExtractionError,
    ModelCallbacks,
    ModelRequest,
    ModelResponse,
    ToolCallData,
    parse_operations,
)
from memchat.engine.extraction.prompt import build_system_prompt, format_existing
from memchat.engine.extraction.types import OperationType
from tests.extraction.helpers import conversation, model_extractor
from tests.scripted_openai import ScriptedOpenAI

NOW = datetime(2024, 5, 7, 12, 0, tzinfo=UTC)
REAL_ID_1 = "a" * 64
REAL_ID_2 = "b" * 64


def entry(mid: str, text: str, **memory) -> Entry:
    return Entry(mid, "app", "user", Memory(text, **memory), NOW, NOW)


EXISTING = [entry(REAL_ID_1, "Lives in Berlin", topics=("location",)), entry(REAL_ID_2, "Likes coffee")]
ALL_TOOLS = frozenset({"memory_add", "memory_update", "memory_delete", "memory_clear", "memory_search"})


@pytest.fixture
def server():
    with ScriptedOpenAI() as s:
        yield s


async def test_existing_memories_are_numbered_and_real_ids_never_sent(server) -> None:
    extractor = model_extractor(server)
    server.reply_tool_calls(
        [
            ("c1", "memory_update", '{"memory_id": "1", "memory": "Lives in Paris"}'),
            ("c2", "memory_delete", '{"memory_id": 2}'),
        ]
    )
    result = await extractor.extract(conversation("I moved to Paris", "Nice!"), EXISTING, reference_date=NOW)
    request = server.requests[0]
    system = request["messages"][0]["content"]
    assert "- [1] Lives in Berlin (topics: location; kind=fact)" in system
    assert "- [2] Likes coffee (kind=fact)" in system
    assert REAL_ID_1 not in json.dumps(request) and REAL_ID_2 not in json.dumps(request)
    assert "2024-05-07" in system  # {current_date}
    # The numbers come back as the real IDs, with the entries they refer to.
    update, delete = result.operations
    assert (update.type, update.memory_id, update.memory, update.target) == (
        OperationType.UPDATE,
        REAL_ID_1,
        "Lives in Paris",
        EXISTING[0],
    )
    assert (delete.type, delete.memory_id) == (OperationType.DELETE, REAL_ID_2)
    assert result.warnings == ()
    # Non-streaming, conversation verbatim, a trailing user message after the assistant's.
    assert not request.get("stream")
    roles = [m["role"] for m in request["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert request["messages"][-1]["content"] == "Extract and manage memories from the conversation above."
    await extractor.close()


async def test_the_tools_and_actions_follow_the_enabled_tools(server) -> None:
    extractor = model_extractor(server)
    server.reply_text("nothing to remember")
    server.reply_text("nothing to remember")
    await extractor.extract(conversation("hi"), [], enabled=frozenset({"memory_add", "memory_search"}))
    await extractor.extract(conversation("hi"), [], enabled=frozenset())
    first, second = server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["memory_add"]
    assert "- memory_add:" in first["messages"][0]["content"]
    assert "memory_update" not in first["messages"][0]["content"].split("<available_actions>")[1]
    assert "No actions available." in second["messages"][0]["content"]
    assert "tools" not in second or not second["tools"]
    # The conversation ends with the user: no trailing message is added.
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    await extractor.close()


def test_declarations_describe_memory_id_as_a_number() -> None:
    from memchat.engine.extraction.prompt import tool_declarations

    update = tool_declarations([OperationType.UPDATE])[0]["function"]
    assert update["name"] == "memory_update"
    assert "number of the existing memory" in update["parameters"]["properties"]["memory_id"]["description"]
    assert update["parameters"]["required"] == ["memory_id", "memory"]


def test_existing_memory_line_carries_its_metadata() -> None:
    episode = entry(
        REAL_ID_1,
        "Hiked Mt. Tai",
        topics=("travel", "hiking"),
        kind="episode",
        event_time=datetime(2024, 4, 1, tzinfo=UTC),
        participants=("Ana", "Bo"),
        location="Shandong",
    )
    assert format_existing(3, episode) == (
        "- [3] Hiked Mt. Tai (topics: travel, hiking; kind=episode; event_time=2024-04-01; "
        "participants=Ana,Bo; location=Shandong)"
    )
    prompt = build_system_prompt("Today is {{current_date}} {unknown}", NOW, [], [], "merge_similar")
    assert prompt.startswith("Today is 2024-05-07 {unknown}")


def response(*calls: tuple[str, str]) -> ModelResponse:
    return ModelResponse(tool_calls=tuple(ToolCallData(f"c{i}", n, a) for i, (n, a) in enumerate(calls)))


def test_parsing_rules() -> None:
    result = parse_operations(
        response(
            (
                "memory_add",
                '{"memory": "Went to Tokyo", "memory_kind": "episode", "event_time": "not a date", '
                '"topics": ["travel", 3], "participants": "Ana"}',
            ),
            ("memory_add", '{"memory": "Likes tea", "memory_kind": "opinion"}'),
            ("memory_update", '{"memory_id": "[2]", "memory": "Likes green tea"}'),
            ("memory_clear", ""),
        ),
        EXISTING,
    )
    episode, fact, update, clear = result.operations
    assert (episode.type, episode.kind, episode.event_time, episode.topics, episode.participants) == (
        OperationType.ADD,
        "episode",
        None,
        ("travel",),
        (),
    )
    assert fact.kind == "fact"
    assert (update.memory_id, update.kind) == (REAL_ID_2, "")  # an update without a kind keeps the stored one
    assert clear.type == OperationType.CLEAR
    assert result.warnings == ()


def test_invalid_output_is_skipped_with_a_warning(caplog) -> None:
    caplog.set_level(logging.WARNING)
    result = parse_operations(
        response(
            ("memory_add", '{"memory": "Likes tea"'),  # not JSON
            ("memory_add", '["Likes tea"]'),  # not an object
            ("memory_forget", '{"memory": "x"}'),  # unknown operation
            ("memory_update", '{"memory_id": "7", "memory": "x"}'),  # no memory [7]
            ("memory_delete", f'{{"memory_id": "{REAL_ID_1}"}}'),  # a raw ID is not a number
            ("memory_delete", "{}"),  # no memory_id
            ("memory_add", '{"topics": ["x"]}'),  # no text
            ("memory_add", '{"memory": "Likes jazz"}'),  # fine
        ),
        EXISTING,
    )
    assert [(op.type, op.memory) for op in result.operations] == [(OperationType.ADD, "Likes jazz")]
    assert len(result.warnings) == 7
    assert sum("memory extraction" in r.message for r in caplog.records if r.levelno == logging.WARNING) == 7
    assert any("no existing memory [7]" in w for w in result.warnings)


def test_json_text_reply_is_understood_for_models_without_tool_calls() -> None:
    text = (
        '```json\n[{"op": "add", "memory": "Likes tea"}, {"op": "delete", "memory_id": "1"}, '
        '{"op": "x"}]\n```'
    )
    result = parse_operations(ModelResponse(text=text), EXISTING)
    assert [(op.type, op.memory_id or op.memory) for op in result.operations] == [
        (OperationType.ADD, "Likes tea"),
        (OperationType.DELETE, REAL_ID_1),
    ]
    assert len(result.warnings) == 1
    broken = parse_operations(ModelResponse(text='[{"op": "add", '), EXISTING)
    assert broken.operations == () and len(broken.warnings) == 1
    prose = parse_operations(ModelResponse(text="Nothing worth remembering."), EXISTING)
    assert prose.operations == () and prose.warnings == ()


async def test_operations_the_policy_or_settings_do_not_allow_are_dropped(server) -> None:
    extractor = model_extractor(server)
    server.reply_tool_calls([("c1", "memory_clear", "{}"), ("c2", "memory_add", '{"memory": "Likes tea"}')])
    result = await extractor.extract(
        conversation("forget everything"), EXISTING, enabled=frozenset({"memory_add"})
    )
    assert [op.type for op in result.operations] == [OperationType.ADD]
    assert any("memory_clear" in w for w in result.warnings)
    await extractor.close()


async def test_no_messages_means_no_call_and_no_model_is_an_error(server) -> None:
    extractor = model_extractor(server)
    tool_only = [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "x"}]},
        {"role": "tool", "tool_call_id": "x", "content": "{}"},
    ]
    assert (await extractor.extract(tool_only, EXISTING)).operations == ()
    assert server.requests == []
    extractor.model = None
    with pytest.raises(ExtractionError, match="no model configured"):
        await extractor.extract(conversation("hi"), [])


async def test_model_errors_propagate(server) -> None:
    extractor = model_extractor(server)
    server.reply_error(400, "bad request: context too long")
    with pytest.raises(ExtractionError, match=r"model error: .*context too long"):
        await extractor.extract(conversation("hi"), [])
    await extractor.close()


async def test_before_callback_can_change_the_request(server) -> None:
    seen: list[ModelRequest] = []

    def before(request: ModelRequest) -> ModelRequest:
        seen.append(request)
        request.messages.append({"role": "user", "content": "PS: be brief"})
        return request

    extractor = model_extractor(server, callbacks=ModelCallbacks(before=[before]))
    server.reply_tool_calls([("c1", "memory_add", '{"memory": "Likes tea"}')])
    result = await extractor.extract(conversation("I like tea"), [])
    assert server.requests[0]["messages"][-1] == {"role": "user", "content": "PS: be brief"}
    assert len(seen) == 1 and [op.memory for op in result.operations] == ["Likes tea"]
    await extractor.close()


async def test_before_callback_can_short_circuit_the_model(server) -> None:
    async def before(request: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=(ToolCallData("x", "memory_add", '{"memory": "Canned"}'),))

    after_calls = []
    extractor = model_extractor(
        server, callbacks=ModelCallbacks(before=[before], after=[lambda *a: after_calls.append(a)])
    )
    result = await extractor.extract(conversation("hi"), [])
    assert [op.memory for op in result.operations] == ["Canned"]
    assert server.requests == [] and after_calls == []
    await extractor.close()


async def test_after_callback_sees_the_response_and_can_replace_it(server) -> None:
    seen = []

    def after(request, response, error):
        seen.append((response, error))
        return ModelResponse(tool_calls=(ToolCallData("x", "memory_add", '{"memory": "Replaced"}'),))

    extractor = model_extractor(server, callbacks=ModelCallbacks(after=[after]))
    server.reply_tool_calls([("c1", "memory_add", '{"memory": "Original"}')])
    result = await extractor.extract(conversation("hi"), [])
    assert [op.memory for op in result.operations] == ["Replaced"]
    assert seen[0][0].tool_calls[0].arguments == '{"memory": "Original"}' and seen[0][1] == ""
    await extractor.close()


async def test_after_callback_gets_the_error_and_may_recover(server) -> None:
    errors = []

    def after(request, response, error):
        errors.append(error)
        return ModelResponse()  # recover: nothing to do

    extractor = model_extractor(server, callbacks=ModelCallbacks(after=[after]))
    server.reply_error(400, "nope")
    result = await extractor.extract(conversation("hi"), [])
    assert result.operations == () and errors[0].startswith("ModelError: ")
    await extractor.close()


@pytest.mark.parametrize("where", ["before", "after"])
async def test_a_failing_callback_aborts_extraction(server, where) -> None:
    def boom(*args):
        raise RuntimeError("callback exploded")

    extractor = model_extractor(server, callbacks=ModelCallbacks(**{where: [boom]}))
    server.reply_text("ok")
    with pytest.raises(ExtractionError, match=f"{where} model callback failed: callback exploded"):
        await extractor.extract(conversation("hi"), [])
    await extractor.close()


def test_unknown_policy_is_refused() -> None:
    from memchat.engine.extraction import ModelExtractor

    with pytest.raises(ValueError, match="unknown update policy"):
        ModelExtractor(object(), policy="yolo")


def test_metadata_names_the_model() -> None:
    from memchat.engine.extraction import ModelExtractor

    class Named:
        name = "deepseek-v4-flash"

    assert ModelExtractor(Named()).metadata() == {"model_name": "deepseek-v4-flash", "model_available": True}


# -- issue 10: a bounded parser; invalid output never raises ---------------------


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("[" * 100_000, "nesting is deeper than 64 levels"),
        ('{"memory": "Likes tea", "topics": ' + "[" * 100_000, "nesting is deeper than 64 levels"),
        ('{"memory": "Likes tea", "event_time": ' + "7" * 5000 + "}", "a number has more than 4300 digits"),
        ('{"memory": "' + "x" * (2 << 20) + '"}', "the text is over 1048576 bytes"),
        ('{"memory": "Likes tea", "x": NaN}', "NaN is not valid JSON: use a number or null"),
    ],
    ids=["deep", "deep-inside", "5000-digits", "huge", "nan"],
)
def test_bounded_tool_call_arguments_give_the_precise_reason(arguments, reason) -> None:
    result = parse_operations(
        response(("memory_add", arguments), ("memory_add", '{"memory": "Likes jazz"}')), []
    )
    assert [op.memory for op in result.operations] == ["Likes jazz"]
    [warning] = result.warnings
    assert warning.startswith(f"memory_add with arguments that are not valid JSON ({reason}) was skipped")
    assert len(warning) < 400


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000, "nesting is deeper than 64 levels"),
        ("```json\n" + '{"operations": ' + "[" * 100_000 + "\n```", "nesting is deeper than 64 levels"),
        ('[{"op": "add", "memory": "x", "n": ' + "1" * 5000 + "}]", "a number has more than 4300 digits"),
        ("[" + '"' + "x" * (5 << 20) + '"]', "the text is over 4194304 bytes"),
        ('[{"op": "add", "memory": "' + "é" * (3 << 20) + '"}]', "the text is over 4194304 bytes"),
    ],
    ids=["deep", "deep-fenced", "5000-digits", "huge", "huge-in-bytes"],
)
def test_bounded_json_reply_gives_the_precise_reason(text, reason) -> None:
    result = parse_operations(ModelResponse(text=text), EXISTING)
    assert result.operations == ()
    [warning] = result.warnings
    assert warning.startswith(f"the model's reply is not valid JSON ({reason}) and was skipped")


def test_a_fenced_reply_with_a_long_whitespace_run_parses_in_linear_time() -> None:
    import time

    started = time.perf_counter()
    text = "```json\n[" + " " * 200_000 + '{"op": "add", "memory": "Likes tea"}]\n```'
    result = parse_operations(ModelResponse(text=text), [])
    assert [op.memory for op in result.operations] == ["Likes tea"]
    broken = "```json\n[" + " " * 200_000 + "x``"
    assert parse_operations(ModelResponse(text=broken), []).operations == ()
    assert time.perf_counter() - started < 2.0


def test_unexpected_shapes_become_warnings_never_exceptions() -> None:
    huge = 10**5000  # only reachable from in-process callers: JSON text bounds digits
    result = parse_operations(
        response(("memory_update", {"memory_id": huge, "memory": "x"}), ("memory_add", '{"memory": "ok"}')),
        EXISTING,
    )
    assert [op.memory for op in result.operations] == ["ok"]
    assert len(result.warnings) == 1
    deep_item = '[{"op": "add", "memory": "x"}, ' + "[" * 60 + "]" * 60 + "]"
    result = parse_operations(ModelResponse(text=deep_item), [])
    assert [op.memory for op in result.operations] == ["x"]
    assert len(result.warnings) == 1 and "is not a JSON object" in result.warnings[0]


async def test_a_deep_reply_counts_as_done_and_is_not_sent_again(server) -> None:
    """Invalid output is reported like any invalid output, and the watermark moves
    past those messages: the next job sends only the new ones."""
    from memchat.engine import UserKey
    from tests.extraction.helpers import Recorder, auto_service

    key = UserKey("test-app", "alice")
    service = auto_service(model_extractor(server))
    recorder = Recorder()
    service.add_extraction_listener(recorder)
    server.reply_text("[" * 100_000)
    history = conversation("I like tea", "Noted.")
    service.enqueue_auto_memory_job(key, "s1", history)
    [done] = await recorder.wait_finished()
    assert done.status == "ok" and done.errors == ()
    assert len(done.skipped) == 1 and "nesting is deeper than 64 levels" in done.skipped[0]
    server.reply_tool_calls([("c1", "memory_add", '{"memory": "Likes jazz"}')])
    history += conversation("and jazz", "Nice.")
    service.enqueue_auto_memory_job(key, "s1", history)
    await recorder.wait_finished(2)
    assert [m["content"] for m in server.requests[1]["messages"][1:3]] == ["and jazz", "Nice."]
    assert [e.memory.text for e in await service.read(key)] == ["Likes jazz"]
    await service.close()
