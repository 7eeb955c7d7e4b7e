"""Tests of the six memory tools, their selection rules and time parsing
(reference §3, acceptance items of §9.2 and §9.3)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memchat.engine.ids import build_memory, memory_id_for, patch_memory
from memchat.engine.jsonsafe import JSONInputError, load_json
from memchat.engine.model import (
    ConfigError,
    Entry,
    Memory,
    MemoryNotFoundError,
    SearchOptions,
    UpdateResult,
    UserKey,
)
from memchat.engine.timeparse import end_of_period, format_rfc3339, parse_flexible_time
from memchat.engine.tools import (
    ADD,
    ALL_TOOLS,
    CLEAR,
    DELETE,
    LOAD,
    SEARCH,
    UPDATE,
    Tool,
    ToolError,
    ToolResult,
    ToolSettings,
    build_tools,
    enabled_tool_names,
    entry_to_result,
    new_add_tool,
    parse_arguments,
    select_tool_names,
)

ALICE = UserKey("app", "alice")
BOB = UserKey("app", "bob")
T0 = datetime(2025, 1, 28, 12, 30, 0, 123000, tzinfo=UTC)


class FakeService:
    """The MemoryService API, in memory, just enough for the tools."""

    max_text_length = 10_000

    def __init__(self) -> None:
        self.data: dict[UserKey, dict[str, Entry]] = {}
        self.last_options: SearchOptions | None = None
        self.last_limit: int | None = None
        self.fail: dict[str, Exception] = {}

    def _check(self, op: str) -> None:
        if op in self.fail:
            raise self.fail[op]

    async def add(self, key, text, topics=None, metadata=None):
        self._check("add")
        memory = build_memory(text, topics, metadata)
        entry = Entry(memory_id_for(memory, key.app, key.user), key.app, key.user, memory, T0, T0)
        self.data.setdefault(key, {})[entry.id] = entry
        return entry

    async def update(self, key, memory_id, text, topics=None, metadata=None):
        self._check("update")
        current = self.data.get(key, {}).pop(memory_id, None)
        if current is None:
            raise MemoryNotFoundError(memory_id)
        memory = patch_memory(current.memory, text, topics, metadata)
        new_id = memory_id_for(memory, key.app, key.user)
        self.data[key][new_id] = Entry(new_id, key.app, key.user, memory, current.created_at, T0)
        return UpdateResult(new_id)

    async def delete(self, key, memory_id):
        self._check("delete")
        if self.data.get(key, {}).pop(memory_id, None) is None:
            raise MemoryNotFoundError(memory_id)

    async def clear(self, key):
        self._check("clear")
        return len(self.data.pop(key, {}))

    async def search(self, key, query, options=None):
        self._check("search")
        self.last_options = options
        hits = [e for e in self.data.get(key, {}).values() if query.lower() in e.memory.text.lower()]
        return [e.with_score(0.123456) for e in hits]

    async def read(self, key, limit=0):
        self._check("read")
        self.last_limit = limit
        entries = list(self.data.get(key, {}).values())
        return entries[:limit] if limit > 0 else entries

    def texts(self, key=ALICE):
        return sorted(e.memory.text for e in self.data.get(key, {}).values())


@pytest.fixture
def svc() -> FakeService:
    return FakeService()


@pytest.fixture
def tools(svc) -> dict[str, Tool]:
    every = ToolSettings(enabled={name: True for name in ALL_TOOLS})
    return {t.name: t for t in build_tools(svc, every, auto_mode=False)}


def ok(result: ToolResult) -> dict:
    assert not result.is_error, result.content
    return json.loads(result.content)


def err(result: ToolResult) -> str:
    assert result.is_error, result.content
    payload = json.loads(result.content)
    assert set(payload) == {"error"}
    assert isinstance(payload["error"], str) and payload["error"]
    return payload["error"]


# -- §3.5 / §3.6 / §9.2: which tools -----------------------------------------


def test_agentic_defaults():
    assert select_tool_names(ToolSettings(), auto_mode=False) == [ADD, LOAD, SEARCH, UPDATE]
    enabled = ToolSettings(enabled={DELETE: True, CLEAR: True})
    assert select_tool_names(enabled, auto_mode=False) == list(ALL_TOOLS)
    assert select_tool_names(ToolSettings(exposed={LOAD: False}), auto_mode=False) == [ADD, SEARCH, UPDATE]
    assert select_tool_names(ToolSettings(enabled={ADD: False}), auto_mode=False) == [LOAD, SEARCH, UPDATE]


def test_auto_mode_no_options_exposes_only_search():
    assert select_tool_names(ToolSettings(), auto_mode=True) == [SEARCH]
    assert enabled_tool_names(ToolSettings(), auto_mode=True) == {ADD, UPDATE, DELETE, SEARCH}


def test_auto_mode_enabling_load_exposes_it():
    assert select_tool_names(ToolSettings(enabled={LOAD: True}), auto_mode=True) == [LOAD, SEARCH]


def test_auto_mode_exposing_add():
    assert select_tool_names(ToolSettings(exposed={ADD: True}), auto_mode=True) == [ADD, SEARCH]


def test_auto_mode_disabling_search_gives_empty_list():
    settings = ToolSettings(enabled={SEARCH: False})
    assert select_tool_names(settings, auto_mode=True) == []
    assert SEARCH not in enabled_tool_names(settings, auto_mode=True)


def test_auto_mode_custom_clear_tool_exposed(svc):
    calls = []

    def creator(service):
        calls.append(service)
        return Tool(CLEAR, "custom clear", {"type": "object", "properties": {}, "required": []}, None)

    settings = ToolSettings(custom={CLEAR: creator}, exposed={CLEAR: True})
    assert CLEAR in select_tool_names(settings, auto_mode=True)
    assert CLEAR in enabled_tool_names(settings, auto_mode=True)
    tools = build_tools(svc, settings, auto_mode=True)
    assert [t.name for t in tools] == [CLEAR, SEARCH]
    assert tools[0].description == "custom clear"
    assert calls == [svc]


def test_auto_mode_exposing_disabled_tool_does_nothing():
    assert select_tool_names(ToolSettings(exposed={CLEAR: True}), auto_mode=True) == [SEARCH]


def test_explicit_settings_win_over_auto_defaults_in_any_order():
    a = ToolSettings(enabled={DELETE: False, LOAD: True}, exposed={UPDATE: True, ADD: True})
    b = ToolSettings(exposed={ADD: True, UPDATE: True}, enabled={LOAD: True, DELETE: False})
    assert select_tool_names(a, True) == select_tool_names(b, True) == [ADD, LOAD, SEARCH, UPDATE]
    assert enabled_tool_names(a, True) == {ADD, UPDATE, SEARCH, LOAD}


def test_unknown_tool_names_are_rejected():
    for settings in (
        ToolSettings(enabled={"memory_nuke": True}),
        ToolSettings(exposed={"search": True}),
        ToolSettings(custom={"bogus": new_add_tool}),
    ):
        with pytest.raises(ConfigError) as info:
            select_tool_names(settings, auto_mode=False)
        assert "memory_search" in str(info.value)  # lists the valid names
    with pytest.raises(ConfigError):
        select_tool_names(ToolSettings(enabled={ADD: "no"}), auto_mode=False)


def test_build_tools_sorted_and_schemas(svc):
    tools = build_tools(svc, ToolSettings(), auto_mode=False)
    assert [t.name for t in tools] == [ADD, LOAD, SEARCH, UPDATE]
    for tool in tools:
        schema = tool.schema
        assert schema["type"] == "function"
        assert schema["function"]["name"] == tool.name
        assert schema["function"]["parameters"]["type"] == "object"
        assert isinstance(schema["function"]["parameters"]["properties"], dict)
        json.dumps(schema)


def test_parameter_schemas(tools):
    add = tools[ADD].parameters
    assert add["required"] == ["memory"]
    assert add["properties"]["topics"]["type"] == "array"
    assert add["properties"]["topics"]["items"] == {"type": "string"}
    assert add["properties"]["participants"]["items"] == {"type": "string"}
    assert add["properties"]["memory_kind"]["enum"] == ["fact", "episode"]
    assert set(add["properties"]) == {
        "memory",
        "topics",
        "memory_kind",
        "event_time",
        "participants",
        "location",
    }
    assert tools[UPDATE].parameters["required"] == ["memory_id", "memory"]
    assert tools[DELETE].parameters["required"] == ["memory_id"]
    assert set(tools[CLEAR].parameters["properties"]) == {"reason"}
    search = tools[SEARCH].parameters
    assert search["required"] == ["query"]
    assert search["properties"]["kind"]["enum"] == ["fact", "episode"]
    assert search["properties"]["order_by_event_time"]["type"] == "boolean"
    assert set(search["properties"]) == {"query", "kind", "time_after", "time_before", "order_by_event_time"}
    assert tools[LOAD].parameters["properties"]["limit"]["type"] == "integer"


def test_descriptions_carry_guidance(tools):
    for tool in tools.values():
        assert "current user" in tool.description
    assert "without asking" in tools[ADD].description
    assert "sensitive" in tools[ADD].description
    assert "explicitly asks" in tools[DELETE].description
    assert "explicitly asks" in tools[CLEAR].description
    search = tools[SEARCH].description
    for phrase in ("keyword", "separately", "participants", "time_after", "order_by_event_time", "omit it"):
        assert phrase in search


# -- §3.4 / §3.3: time parsing -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-07T10:11:12Z", datetime(2024, 5, 7, 10, 11, 12, tzinfo=UTC)),
        ("2024-05-07T10:11:12+08:00", datetime(2024, 5, 7, 2, 11, 12, tzinfo=UTC)),
        ("2024-05-07T10:11:12.5-01:30", datetime(2024, 5, 7, 11, 41, 12, 500000, tzinfo=UTC)),
        ("2024-05-07T10:11:12.123456789Z", datetime(2024, 5, 7, 10, 11, 12, 123456, tzinfo=UTC)),
        ("2024-05-07T10:11:12", datetime(2024, 5, 7, 10, 11, 12, tzinfo=UTC)),
        ("2024-05-07 10:11:12", datetime(2024, 5, 7, 10, 11, 12, tzinfo=UTC)),
        ("2024-05-07", datetime(2024, 5, 7, tzinfo=UTC)),
        ("7 May 2023", datetime(2023, 5, 7, tzinfo=UTC)),
        ("May 7, 2023", datetime(2023, 5, 7, tzinfo=UTC)),
        ("Sep 7, 2023", datetime(2023, 9, 7, tzinfo=UTC)),
        ("7 Sep 2023", datetime(2023, 9, 7, tzinfo=UTC)),
        ("May 2024", datetime(2024, 5, 1, tzinfo=UTC)),
        ("September 2024", datetime(2024, 9, 1, tzinfo=UTC)),
        ("Sep 2024", datetime(2024, 9, 1, tzinfo=UTC)),
        ("2024-05", datetime(2024, 5, 1, tzinfo=UTC)),
        ("2024", datetime(2024, 1, 1, tzinfo=UTC)),
        ("  2024-05-07  ", datetime(2024, 5, 7, tzinfo=UTC)),
        ("january 2, 2006", datetime(2006, 1, 2, tzinfo=UTC)),
    ],
)
def test_parse_flexible_time_layouts(text, expected):
    parsed = parse_flexible_time(text)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "   ",
        "yesterday",
        "last Tuesday",
        "2024-02-30",
        "2024-13",
        "Sept 2024",
        "24",
        "2024/05/07",
        "12345",
    ],
)
def test_parse_flexible_time_rejects(text):
    assert parse_flexible_time(text) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("May 2024", datetime(2024, 5, 31, 23, 59, 59, tzinfo=UTC)),
        ("2024", datetime(2024, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("2024-02", datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)),
        ("2023-02", datetime(2023, 2, 28, 23, 59, 59, tzinfo=UTC)),
        ("Dec 2024", datetime(2024, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("2024-05-07", datetime(2024, 5, 7, 23, 59, 59, tzinfo=UTC)),
        ("7 May 2024", datetime(2024, 5, 7, 23, 59, 59, tzinfo=UTC)),
        ("2024-05-07T10:00:00Z", datetime(2024, 5, 7, 23, 59, 59, tzinfo=UTC)),
        # The end of the day in the zone the text was written in.
        ("2024-05-07T10:00:00+08:00", datetime(2024, 5, 7, 15, 59, 59, tzinfo=UTC)),
    ],
)
def test_end_of_period(raw, expected):
    assert end_of_period(raw, parse_flexible_time(raw)) == expected


def test_format_rfc3339():
    assert format_rfc3339(datetime(2024, 5, 7, 1, 2, 3, tzinfo=UTC)) == "2024-05-07T01:02:03Z"
    assert format_rfc3339(T0, fractional=True) == "2025-01-28T12:30:00.123Z"
    plus8 = timezone(timedelta(hours=8))
    assert format_rfc3339(datetime(2024, 5, 7, 1, 2, 3, tzinfo=plus8)) == "2024-05-07T01:02:03+08:00"


# -- §3.2 / §9.3: the tools --------------------------------------------------


@pytest.mark.asyncio
async def test_add_without_topics_returns_empty_topics(svc, tools):
    result = await tools[ADD].run('{"memory": "Alice likes green tea"}', ALICE)
    assert (
        result.content
        == '{"message":"Memory added successfully","memory":"Alice likes green tea","topics":[]}'
    )
    assert svc.texts() == ["Alice likes green tea"]


@pytest.mark.asyncio
async def test_add_with_topics_and_episode_metadata(svc, tools):
    args = {
        "memory": "Alice hiked Mont Blanc with Bob",
        "topics": ["travel", "sport"],
        "memory_kind": "episode",
        "event_time": "7 May 2023",
        "participants": ["Bob", "Alice"],
        "location": "Chamonix",
    }
    body = ok(await tools[ADD].run(json.dumps(args), ALICE))
    assert body == {
        "message": "Memory added successfully",
        "memory": args["memory"],
        "topics": ["travel", "sport"],
    }
    (entry,) = svc.data[ALICE].values()
    assert entry.memory.kind == "episode"
    assert entry.memory.event_time == datetime(2023, 5, 7, tzinfo=UTC)
    assert entry.memory.participants == ("Alice", "Bob")
    assert entry.memory.location == "Chamonix"


@pytest.mark.asyncio
async def test_add_unparsable_event_time_keeps_kind(svc, tools):
    ok(
        await tools[ADD].run(
            {"memory": "Alice ran a marathon", "memory_kind": "episode", "event_time": "yesterday"}, ALICE
        )
    )
    (entry,) = svc.data[ALICE].values()
    assert entry.memory.kind == "episode"
    assert entry.memory.event_time is None


@pytest.mark.asyncio
async def test_add_lenient_topics_string(svc, tools):
    body = ok(await tools[ADD].run({"memory": "Alice likes jazz", "topics": "music"}, ALICE))
    assert body["topics"] == ["music"]
    (entry,) = svc.data[ALICE].values()
    assert entry.memory.topics == ("music",)


@pytest.mark.asyncio
async def test_add_empty_memory_errors(svc, tools):
    message = err(await tools[ADD].run({"memory": ""}, ALICE))
    assert message == "memory add tool: memory content is required for app app and user alice"
    assert svc.data == {}


@pytest.mark.asyncio
async def test_add_service_error(svc, tools):
    svc.fail["add"] = MemoryNotFoundError("x")  # any MemchatError
    message = err(await tools[ADD].run({"memory": "Alice likes tea"}, ALICE))
    assert message == "failed to add memory: memory with id x not found"


@pytest.mark.asyncio
async def test_update_returns_rotated_id(svc, tools):
    entry = await svc.add(ALICE, "Alice likes tea", ["drinks"])
    body = ok(await tools[UPDATE].run({"memory_id": entry.id, "memory": "Alice likes coffee"}, ALICE))
    new_id = memory_id_for(Memory("Alice likes coffee"), "app", "alice")
    assert new_id != entry.id
    assert body == {
        "message": "Memory updated successfully",
        "memory_id": new_id,
        "memory": "Alice likes coffee",
        "topics": [],
    }
    assert list(svc.data[ALICE]) == [new_id]
    assert svc.data[ALICE][new_id].memory.topics == ()  # replaced, not merged


@pytest.mark.asyncio
async def test_update_errors(svc, tools):
    assert err(await tools[UPDATE].run({"memory": "x"}, ALICE)) == (
        "memory update tool: memory ID is required for app app and user alice"
    )
    assert err(await tools[UPDATE].run({"memory_id": "abc"}, ALICE)) == (
        "memory update tool: memory content is required for app app and user alice"
    )
    message = err(await tools[UPDATE].run({"memory_id": "nope", "memory": "x"}, ALICE))
    assert message.startswith("failed to update memory: ")
    assert "not found" in message


@pytest.mark.asyncio
async def test_delete(svc, tools):
    entry = await svc.add(ALICE, "Alice likes tea")
    result = await tools[DELETE].run({"memory_id": entry.id}, ALICE)
    assert result.content == json.dumps(
        {"message": "Memory deleted successfully", "memory_id": entry.id}, separators=(",", ":")
    )
    assert svc.texts() == []
    assert err(await tools[DELETE].run({"memory_id": entry.id}, ALICE)).startswith(
        "failed to delete memory: "
    )
    assert err(await tools[DELETE].run({}, ALICE)) == (
        "memory delete tool: memory ID is required for app app and user alice"
    )


@pytest.mark.asyncio
async def test_clear(svc, tools):
    await svc.add(ALICE, "Alice likes tea")
    await svc.add(BOB, "Bob likes coffee")
    result = await tools[CLEAR].run(None, ALICE)
    assert result == ToolResult('{"message":"All memories cleared successfully"}', False)
    assert svc.texts() == [] and svc.texts(BOB) == ["Bob likes coffee"]
    svc.fail["clear"] = RuntimeError("disk full")
    assert err(await tools[CLEAR].run({"reason": "reset"}, ALICE)) == (
        "memory clear tool: failed to clear memories: RuntimeError: disk full"
    )


@pytest.mark.asyncio
async def test_search_empty_query(svc, tools):
    await svc.add(ALICE, "Alice likes tea")
    assert (await tools[SEARCH].run({"query": ""}, ALICE)).content == '{"query":"","results":[],"count":0}'
    assert ok(await tools[SEARCH].run({}, ALICE)) == {"query": "", "results": [], "count": 0}
    assert svc.last_options is None  # the service was not asked


@pytest.mark.asyncio
async def test_search_results_and_options(svc, tools):
    await svc.add(ALICE, "Alice likes tea", ["drinks"])
    args = {"query": "tea", "kind": "episode", "time_after": "2024", "time_before": "May 2024"}
    body = ok(await tools[SEARCH].run(args, ALICE))
    assert body["query"] == "tea" and body["count"] == 1
    (result,) = body["results"]
    assert result["memory"] == "Alice likes tea"
    assert result["topics"] == ["drinks"]
    assert result["kind"] == "fact"
    assert result["score"] == 0.1235
    assert result["created"] == "2025-01-28T12:30:00.123Z"
    assert "event_time" not in result and "participants" not in result and "location" not in result
    opts = svc.last_options
    # The tool ranks in the service's default mode (hybrid unless configured otherwise).
    assert opts.deduplicate and opts.kind_fallback and opts.mode == "" and not opts.hybrid_search
    assert opts.kind == "episode"
    assert opts.time_after == datetime(2024, 1, 1, tzinfo=UTC)
    assert opts.time_before == datetime(2024, 5, 31, 23, 59, 59, tzinfo=UTC)
    assert opts.max_results == 0 and opts.similarity_threshold == 0
    assert not opts.order_by_event_time


@pytest.mark.asyncio
async def test_search_options_defaults_and_unparsable_time(svc, tools):
    args = {"query": "tea", "time_after": "last week", "time_before": "2024-02", "order_by_event_time": True}
    ok(await tools[SEARCH].run(args, ALICE))
    opts = svc.last_options
    assert opts.kind == "" and not opts.kind_fallback
    assert opts.deduplicate and opts.mode == ""
    assert opts.time_after is None  # silently ignored
    assert opts.time_before == datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)
    assert opts.order_by_event_time


@pytest.mark.asyncio
async def test_search_error(svc, tools):
    svc.fail["search"] = RuntimeError("index gone")
    assert err(await tools[SEARCH].run({"query": "tea"}, ALICE)) == (
        "failed to search memories: RuntimeError: index gone"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (None, 10),
        ("", 10),
        ({}, 10),
        ({"limit": 0}, 10),
        ({"limit": -5}, 10),
        ({"limit": 3}, 3),
        ({"limit": "5"}, 5),
        ({"limit": 5.0}, 5),
        ({"limit": 1000}, 100),
    ],
)
@pytest.mark.asyncio
async def test_load_limit(svc, tools, args, expected):
    for i in range(12):
        await svc.add(ALICE, f"Alice fact {i}")
    body = ok(await tools[LOAD].run(args, ALICE))
    assert body["limit"] == expected
    assert svc.last_limit == expected
    assert body["count"] == len(body["results"]) == min(expected, 12)


@pytest.mark.asyncio
async def test_load_rejects_bad_limit(svc, tools):
    for bad in ("lots", True, 2.5, [3]):
        assert "limit" in err(await tools[LOAD].run({"limit": bad}, ALICE))
    assert svc.last_limit is None


def test_entry_to_result_maps_episode_fields():
    memory = Memory(
        "Alice met Bob in Paris",
        ("travel",),
        kind="episode",
        event_time=datetime(2024, 5, 7, 18, 30, 5, 999, tzinfo=UTC),
        participants=("Alice", "Bob"),
        location="Paris",
    )
    entry = Entry("id1", "app", "alice", memory, T0, T0)
    assert entry_to_result(entry) == {
        "id": "id1",
        "memory": "Alice met Bob in Paris",
        "topics": ["travel"],
        "created": "2025-01-28T12:30:00.123Z",
        "kind": "episode",
        "event_time": "2024-05-07T18:30:05Z",
        "participants": ["Alice", "Bob"],
        "location": "Paris",
    }
    assert entry_to_result(entry.with_score(0.5))["score"] == 0.5


# -- malformed input never raises and never stores ---------------------------

MALFORMED_ADD = [
    ('{"memory": "Alice likes tea"', "not valid JSON"),
    ('["Alice likes tea"]', "JSON object"),
    ("42", "JSON object"),
    ('{"memory": "Alice likes tea", "topics": 7}', '"topics" must be an array of strings'),
    ('{"memory": "Alice likes tea", "topics": ["ok", 3]}', '"topics" must be an array of strings'),
    ('{"memory": 12345}', '"memory" must be a string'),
    ('{"topics": ["x"]}', "memory content is required"),
    ('{"memory": "   "}', "memory content is required"),
    ('{"memory": "Alice likes tea", "memory_kind": "preference"}', '"fact" or "episode"'),
    ('{"memory": "Alice likes tea", "participants": {"a": 1}}', '"participants" must be an array'),
    ('{"memory": "Alice likes tea", "event_time": 2024}', '"event_time" must be a string'),
    ('{"memory": "Alice likes tea", "location": ["x"]}', '"location" must be a string'),
    ("[" * 100_000, "not valid JSON (nesting is deeper than 64 levels)"),
]


@pytest.mark.parametrize(("arguments", "fragment"), MALFORMED_ADD)
@pytest.mark.asyncio
async def test_add_malformed_arguments(svc, tools, arguments, fragment):
    message = err(await tools[ADD].run(arguments, ALICE))
    assert fragment in message
    assert svc.data == {}


@pytest.mark.asyncio
async def test_add_one_megabyte_memory_is_rejected(svc, tools):
    huge = "x" * 1_000_000
    message = err(await tools[ADD].run(json.dumps({"memory": huge}), ALICE))
    assert "1000000" in message and "10000" in message
    assert len(message) < 500
    assert svc.data == {}
    message = err(await tools[UPDATE].run({"memory_id": "abc", "memory": huge}, ALICE))
    assert "1000000" in message
    assert "1000000" in err(await tools[SEARCH].run({"query": huge}, ALICE))
    assert len(err(await tools[DELETE].run({"memory_id": huge}, ALICE))) < 500


@pytest.mark.asyncio
async def test_update_and_search_malformed_arguments(svc, tools):
    entry = await svc.add(ALICE, "Alice likes tea")
    assert '"memory_id" must be a string' in err(
        await tools[UPDATE].run({"memory_id": 1, "memory": "x"}, ALICE)
    )
    bad_kind = {"memory_id": entry.id, "memory": "x", "memory_kind": "habit"}
    assert '"fact" or "episode"' in err(await tools[UPDATE].run(bad_kind, ALICE))
    assert '"query" must be a string' in err(await tools[SEARCH].run({"query": ["tea"]}, ALICE))
    assert '"fact" or "episode"' in err(await tools[SEARCH].run({"query": "tea", "kind": "x"}, ALICE))
    assert "order_by_event_time" in err(
        await tools[SEARCH].run({"query": "tea", "order_by_event_time": 3}, ALICE)
    )
    assert svc.texts() == ["Alice likes tea"]
    assert list(svc.data[ALICE]) == [entry.id]


@pytest.mark.asyncio
async def test_empty_arguments_mean_empty_object(svc, tools):
    for arguments in (None, "", "  ", "null", {}):
        assert "memory content is required" in err(await tools[ADD].run(arguments, ALICE))
        assert ok(await tools[LOAD].run(arguments, ALICE))["limit"] == 10


@pytest.mark.asyncio
async def test_scope_comes_only_from_key(svc, tools):
    args = {"memory": "Likes chess", "user_id": "bob", "app_name": "other", "userID": "bob", "appName": "x"}
    ok(await tools[ADD].run(args, ALICE))
    assert svc.texts(ALICE) == ["Likes chess"]
    assert set(svc.data) == {ALICE}
    await svc.add(BOB, "Bob secret")
    body = ok(await tools[LOAD].run({"user_id": "bob", "app_name": "app"}, ALICE))
    assert [r["memory"] for r in body["results"]] == ["Likes chess"]
    body = ok(await tools[SEARCH].run({"query": "secret", "user_id": "bob"}, ALICE))
    assert body["count"] == 0


@pytest.mark.asyncio
async def test_missing_scope_is_an_error(svc, tools):
    message = err(await tools[ADD].run({"memory": "x"}, UserKey("app", "")))
    assert "missing appName or userID" in message
    assert svc.data == {}


@pytest.mark.parametrize("op", ["add", "update", "delete", "clear", "search", "read"])
@pytest.mark.asyncio
async def test_unexpected_backend_exception_becomes_error_result(svc, tools, op):
    entry = await svc.add(ALICE, "Alice likes tea")
    svc.fail[op] = RuntimeError("boom")
    calls = {
        "add": (ADD, {"memory": "Alice likes coffee"}),
        "update": (UPDATE, {"memory_id": entry.id, "memory": "Alice likes coffee"}),
        "delete": (DELETE, {"memory_id": entry.id}),
        "clear": (CLEAR, {}),
        "search": (SEARCH, {"query": "tea"}),
        "read": (LOAD, {}),
    }
    name, args = calls[op]
    message = err(await tools[name].run(args, ALICE))
    assert "boom" in message
    assert svc.texts() == ["Alice likes tea"]


@pytest.mark.asyncio
async def test_handler_exception_and_call(svc, tools):
    async def explode(args, key):
        raise RuntimeError("boom")

    tool = Tool("custom", "d", {"type": "object", "properties": {}, "required": []}, explode)
    assert "boom" in err(await tool.run({}, ALICE))
    content = await tools[ADD].call('{"memory": "Alice likes tea", "topics": ["drinks"]}', ALICE)
    assert content == '{"message":"Memory added successfully","memory":"Alice likes tea","topics":["drinks"]}'


@pytest.mark.asyncio
async def test_non_ascii_is_kept(svc, tools):
    content = await tools[ADD].call({"memory": "爱丽丝喜欢绿茶"}, ALICE)
    assert "爱丽丝喜欢绿茶" in content


# -- issue 10: a bounded parser, blank scopes, nothing raises out of a tool ----


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("[" * 100_000, "nesting is deeper than 64 levels"),
        ('{"memory": ' + "[" * 65 + "]" * 65 + "}", "nesting is deeper than 64 levels"),
        ('{"memory": "x", "limit": ' + "9" * 5000 + "}", "a number has more than 4300 digits"),
        ('{"memory": "' + "x" * (2 << 20) + '"}', "the text is over 1048576 bytes"),
        (b'{"memory": "' + b"x" * (2 << 20) + b'"}', "the text is over 1048576 bytes"),
        (b'{"memory": "\xff"}', "the text is not valid UTF-8"),
        ('{"memory": NaN}', "NaN is not valid JSON: use a number or null"),
        ('{"memory": "x",}', "Expecting property name enclosed in double quotes: line 1 column 16 (char 15)"),
    ],
    ids=["deep", "65-levels", "5000-digits", "huge", "huge-bytes", "bad-utf8", "nan", "syntax"],
)
def test_parse_arguments_is_bounded_and_says_what_is_wrong(arguments, reason):
    with pytest.raises(ToolError) as info:
        parse_arguments(ADD, arguments)
    assert str(info.value) == (
        f"invalid arguments for {ADD}: arguments are not valid JSON ({reason}); "
        "send a single JSON object with the documented parameters"
    )


def test_parse_arguments_ignores_brackets_inside_strings_and_allows_64_levels():
    text = "[" * 500 + '\\"{[' + "]" * 10
    assert parse_arguments(ADD, json.dumps({"memory": text})) == {"memory": text}
    nested = '{"memory": "x", "topics": ' + "[" * 63 + "]" * 63 + "}"
    assert parse_arguments(ADD, nested)["memory"] == "x"


def test_load_json_bounds_and_reasons():
    assert load_json('{"a": [1, {"b": "[[["}]}', max_bytes=100) == {"a": [1, {"b": "[[["}]}
    cases = [
        ("[" * 10 + "]" * 10, {"max_bytes": 100, "max_depth": 9}, "nesting is deeper than 9 levels"),
        ('"' + "\u00e9" * 30 + '"', {"max_bytes": 50}, "the text is over 50 bytes"),  # 62 bytes
        ("1" * 4301, {"max_bytes": 10_000}, "a number has more than 4300 digits"),
        ("[Infinity]", {"max_bytes": 100}, "Infinity is not valid JSON: use a number or null"),
        ('"unterminated [[[[', {"max_bytes": 100, "max_depth": 2}, "Unterminated string starting at"),
    ]
    for text, bounds, reason in cases:
        with pytest.raises(JSONInputError) as info:
            load_json(text, **bounds)
        assert info.value.reason.startswith(reason), info.value.reason


@pytest.fixture
async def real_tools():
    from backends import create
    from memchat.engine import MemoryService

    service = MemoryService(create("inmemory"))
    tools = {
        t.name: t for t in build_tools(service, ToolSettings(enabled={n: True for n in ALL_TOOLS}), False)
    }
    yield service, tools
    await service.close()


def _hostile_calls(entry_id: str) -> list[tuple[str, object]]:
    """What a model might send: broken, bounded-breaking and invalid-character arguments."""
    calls: list[tuple[str, object]] = [
        (ADD, "[" * 100_000),
        (ADD, '{"memory": ' + "[" * 100_000),
        (ADD, '{"memory": "x", "topics": ' + "1" * 5000 + "}"),
        (ADD, '{"memory": "' + "x" * (3 << 20) + '"}'),
        (ADD, b"\xff\xfe"),
        (ADD, '{"memory": NaN}'),
        (ADD, 12345),
        (ADD, ["memory"]),
        (ADD, '{"memory": "x"} trailing'),
        (UPDATE, '{"memory_id": "   ", "memory": "x"}'),
        (UPDATE, {"memory_id": "a\tb", "memory": "x"}),
        (UPDATE, {"memory_id": "a\ud800b", "memory": "x"}),
        (UPDATE, {"memory_id": "a\x00b", "memory": "x"}),
        (UPDATE, {"memory_id": "f" * 300, "memory": "x"}),
        (DELETE, {"memory_id": "\x1b[2J"}),
        (DELETE, {"memory_id": "0" * 64}),
        (LOAD, '{"limit": ' + "9" * 5000 + "}"),
        (LOAD, {"limit": float("nan")}),
        (SEARCH, {"query": "tea", "kind": "fact\x00"}),
    ]
    for bad in ("\\ud800", "\\udfff", "\\u0000"):
        calls += [
            (ADD, '{"memory": "Alice ' + bad + ' likes tea"}'),
            (ADD, '{"memory": "Alice likes tea", "topics": ["' + bad + '"]}'),
            (ADD, '{"memory": "Alice met Bob", "participants": ["Bob' + bad + '"]}'),
            (ADD, '{"memory": "Alice met Bob", "location": "Par' + bad + 'is"}'),
            (UPDATE, '{"memory_id": "' + entry_id + '", "memory": "x' + bad + '"}'),
            (UPDATE, '{"memory_id": "' + entry_id + bad + '", "memory": "x"}'),
            (SEARCH, '{"query": "tea ' + bad + '"}'),
        ]
    return calls


@pytest.mark.asyncio
async def test_nothing_a_model_sends_raises_out_of_a_tool(real_tools):
    service, tools = real_tools
    entry = await service.add(ALICE, "Alice likes tea")
    for name, arguments in _hostile_calls(entry.id):
        content = await tools[name].call(arguments, ALICE)
        content.encode("utf-8")  # always sendable
        payload = json.loads(content)
        assert set(payload) == {"error"} and payload["error"], (name, str(arguments)[:80], content)
        assert len(payload["error"]) < 600
    assert await service.read(ALICE, include_deleted=True) == [entry]


@pytest.mark.asyncio
async def test_invalid_characters_get_the_services_clear_sentence(real_tools):
    service, tools = real_tools
    message = err(await tools[ADD].run('{"memory": "Alice \\ud800 likes tea"}', ALICE))
    assert message == (
        "failed to add memory: the memory text contains an invalid character "
        "(a lone UTF-16 surrogate, U+D800): send valid Unicode text"
    )
    message = err(await tools[ADD].run({"memory": "x", "participants": ["B\x00b"]}, ALICE))
    assert (
        message
        == "failed to add memory: a participant contains a NUL character (U+0000): remove it and try again"
    )
    message = err(await tools[SEARCH].run({"query": "tea \udfff"}, ALICE))
    assert "the search query contains an invalid character (a lone UTF-16 surrogate, U+DFFF)" in message
    message = err(await tools[DELETE].run({"memory_id": "ab\tc"}, ALICE))
    assert message == (
        "failed to delete memory: memoryID contains a control character (U+0009): "
        "use only printable characters (no tabs, newlines or other control characters)"
    )
    # Controls other than NUL are content like any other and come back as given.
    body = ok(await tools[ADD].run({"memory": "Alice \x1b[31mlikes\x07 tea \u200f🙂"}, ALICE))
    assert body["memory"] == "Alice \x1b[31mlikes\x07 tea \u200f🙂"
    [stored] = await service.read(ALICE)
    assert stored.memory.text == "Alice \x1b[31mlikes\x07 tea \u200f🙂"


@pytest.mark.parametrize("blank", ["", " ", "\t", "\u3000 "])
@pytest.mark.asyncio
async def test_a_blank_app_or_user_is_an_error_result(real_tools, blank):
    service, tools = real_tools
    for key in (UserKey(blank, "alice"), UserKey("app", blank)):
        for name, args in ((ADD, {"memory": "x"}), (LOAD, {}), (SEARCH, {"query": "x"}), (CLEAR, {})):
            assert "missing appName or userID" in err(await tools[name].run(args, key))
    assert await service.count(ALICE) == 0


@pytest.mark.asyncio
async def test_an_unusable_session_key_is_an_error_result(real_tools):
    _, tools = real_tools
    message = err(await tools[ADD].run({"memory": "x"}, UserKey("app", "ali\nce")))
    assert message.startswith("memory add tool: the session's userID contains a control character (U+000A)")
    message = err(await tools[LOAD].run({}, UserKey("app\ud800", "alice")))
    assert "appName contains an invalid character (a lone UTF-16 surrogate, U+D800)" in message


@pytest.mark.asyncio
async def test_a_blank_memory_id_is_an_error_result(svc, tools):
    for name in (UPDATE, DELETE):
        for blank in ("", "   ", "\u3000"):
            message = err(await tools[name].run({"memory_id": blank, "memory": "x"}, ALICE))
            assert "memory ID is required" in message


@pytest.mark.asyncio
async def test_a_result_with_a_lone_surrogate_is_still_sendable():
    class Echo:  # a custom service that validates nothing and echoes the model's text
        async def add(self, key, text, topics=None, metadata=None):
            return None

    content = await new_add_tool(Echo()).call({"memory": "Alice \ud800 likes tea"}, ALICE)
    content.encode("utf-8")
    assert json.loads(content)["memory"] == "Alice \ud800 likes tea"


@pytest.mark.asyncio
async def test_every_argument_the_schema_shows_is_checked(svc, tools):
    """The schema and the checks come from one declaration: each argument a tool
    shows the model is refused, by name, when it has the wrong type, and nothing
    is written."""
    entry = await svc.add(ALICE, "Alice likes tea")
    valid = {"memory": "Alice likes green tea", "memory_id": entry.id, "query": "tea"}
    informational = {"reason"}  # memory_clear's reason is shown but deliberately not checked
    checked = 0
    for name, tool in tools.items():
        parameters = tool.schema["function"]["parameters"]
        for argument in parameters["properties"]:
            if argument in informational:
                continue
            arguments = {a: valid[a] for a in parameters["required"]} | {argument: {"not": "this"}}
            message = err(await tool.run(arguments, ALICE))
            assert f'"{argument}"' in message and name in message, message
            checked += 1
    assert checked == 20  # add 6, update 7, delete 1, search 5, load 1
    assert svc.texts() == ["Alice likes tea"]
