"""The offline model: deterministic memory behaviour in English and Chinese."""

from __future__ import annotations

import json

import pytest

from backends import create
from memchat.agent.events import TextDelta, ToolCallsRequested, ToolFinished, TurnDone
from memchat.agent.offline import OfflineModel, extract_facts
from memchat.agent.runner import Runner
from memchat.engine import MemoryService
from memchat.engine.tools import ToolSettings


async def turn(runner: Runner, text: str) -> tuple[str, list]:
    calls, deltas = [], []
    async for event in runner.run(text):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        elif isinstance(event, ToolCallsRequested):
            calls += [(c.name, json.loads(c.arguments)) for c in event.calls]
        elif isinstance(event, ToolFinished):
            assert not event.is_error, event.content
        elif isinstance(event, TurnDone):
            assert event.text == "".join(deltas)
    return "".join(deltas), calls


@pytest.fixture
async def runner():
    svc = MemoryService(create("inmemory"), tool_settings=ToolSettings(enabled={"memory_delete": True}))
    yield Runner(OfflineModel(), svc)
    await svc.close()


@pytest.mark.parametrize(
    ("text", "memories"),
    [
        ("你好，我是张三，我喜欢 Go 语言编程", ["张三喜欢 Go 语言编程"]),
        ("I'm Zhang San and I like Go", ["User's name is Zhang San", "Zhang San likes Go"]),
        (
            "I live in Berlin. My favorite color is blue",
            ["User lives in Berlin", "User's favorite color is blue"],
        ),
        ("I love hiking and I work at ACME", ["User likes hiking", "User works at ACME"]),
        ("我住在北京", ["用户住在北京"]),
        ("我叫李雷", ["用户名叫李雷"]),
        ("how is the weather today", []),
    ],
)
def test_statements_about_the_user(text, memories) -> None:
    assert [m for m, _ in extract_facts(text).memories] == memories


def test_programming_topics_match_the_seed_demo() -> None:
    [(_, topics)] = extract_facts("我喜欢 Go 语言编程").memories
    assert topics == ["programming", "go", "interests", "technology"]


async def test_the_seed_demo_remembers_and_recalls_across_sessions(runner) -> None:
    _, calls = await turn(runner, "你好，我是张三，我喜欢 Go 语言编程")
    assert calls == [
        (
            "memory_add",
            {"memory": "张三喜欢 Go 语言编程", "topics": ["programming", "go", "interests", "technology"]},
        )
    ]
    runner.new_session()
    text, calls = await turn(runner, "我喜欢什么?")
    assert calls == [("memory_search", {"query": "喜欢"})]
    assert "张三喜欢 Go 语言编程" in text


async def test_english_questions_find_the_right_memory(runner) -> None:
    await turn(runner, "I'm Zhang San and I like Go")
    await turn(runner, "I live in Berlin")
    runner.new_session()
    text, calls = await turn(runner, "What do I like?")
    assert calls == [("memory_search", {"query": "likes"})] and "Zhang San likes Go" in text
    text, _ = await turn(runner, "what's my name?")
    assert "Zhang San" in text
    text, _ = await turn(runner, "where do I live?")
    assert "Berlin" in text
    text, calls = await turn(runner, "show what you remember about me")
    assert calls == [("memory_load", {"limit": 10})]
    assert "Berlin" in text and "Zhang San likes Go" in text


async def test_remember_that_stores_a_third_person_fact(runner) -> None:
    _, calls = await turn(runner, "Remember that my sister is called Ana")
    assert calls == [("memory_add", {"memory": "User's sister is called Ana", "topics": ["family", "notes"]})]


async def test_forget_searches_then_deletes(runner) -> None:
    await turn(runner, "I live in Berlin")
    text, calls = await turn(runner, "forget Berlin")
    assert [c[0] for c in calls] == ["memory_search", "memory_delete"]
    assert "User lives in Berlin" in text
    assert await runner.service.read(runner.key) == []


async def test_forget_without_the_delete_tool_explains_how_to_enable_it() -> None:
    svc = MemoryService(create("inmemory"))
    text, calls = await turn(Runner(OfflineModel(), svc), "forget Berlin")
    assert calls == [] and "--enable-tool memory_delete" in text


async def test_anything_else_explains_the_offline_model(runner) -> None:
    text, calls = await turn(runner, "Explain quantum computing")
    assert calls == [] and "OPENAI_API_KEY" in text


async def test_replies_stream_in_pieces_and_non_streaming_gives_one_piece(runner) -> None:
    model = OfflineModel()
    messages = [{"role": "user", "content": "hello there"}]
    streamed = [e async for e in model.stream(messages, [], streaming=True)]
    whole = [e async for e in model.stream(messages, [], streaming=False)]
    assert len(streamed) > 5
    assert len(whole) == 2
    assert streamed[-1] == whole[-1]
    assert "".join(e.text for e in streamed[:-1]) == whole[0].text


async def test_in_auto_mode_the_offline_model_says_memories_are_saved_in_the_background() -> None:
    from memchat.agent.runner import AUTO_SYSTEM_PROMPT

    svc = MemoryService(create("inmemory"), auto_mode=True)
    runner = Runner(OfflineModel(), svc, system_prompt=AUTO_SYSTEM_PROMPT)
    assert "memory_add" not in runner.tools
    text, calls = await turn(runner, "I live in Berlin")
    assert calls == [] and "background" in text


async def test_the_runner_tells_the_offline_model_the_memory_mode_whatever_the_prompt() -> None:
    """Auto mode is passed explicitly, not guessed from the system prompt's wording."""
    from memchat.agent.runner import AUTO_SYSTEM_PROMPT

    auto = MemoryService(create("inmemory"), auto_mode=True)
    text, calls = await turn(Runner(OfflineModel(), auto, system_prompt="Be brief."), "I live in Berlin")
    assert calls == [] and "background" in text
    await auto.close()

    no_add = ToolSettings(enabled={"memory_add": False})
    agentic = MemoryService(create("inmemory"), tool_settings=no_add)
    runner = Runner(OfflineModel(), agentic, system_prompt=AUTO_SYSTEM_PROMPT)
    text, calls = await turn(runner, "I live in Berlin")
    assert calls == [] and "memory_add tool is disabled" in text
    await agentic.close()


@pytest.mark.parametrize(
    ("question", "query"),
    [
        ("What's my job?", "job works"),  # plus the words memories about jobs use
        ("What do I like?", "likes"),  # as memories say it: "Zhang San likes Go"
        ("where do I live?", "lives"),
        ("What pets do I have?", "pets has"),
        ("Do you remember my favorite color?", "favorite color"),
        ("我喜欢什么?", "喜欢"),
        ("我住在哪里？", "住在"),
        ("我在哪里工作？", "工作 职业"),
        ("我的工作是什么？", "工作 职业"),
        ("你记得我的生日吗？", "生日"),
        ("我有什么宠物?", "宠物 养 猫 狗"),
        ("Who am I?", ""),  # "" = memory_load: everything recent
        ("我是谁", ""),
        ("how is the weather today", None),  # not a question about the user
    ],
)
def test_the_search_query_is_the_question_minus_filler(question, query) -> None:
    """Not one guessed keyword: the content of the question, so search by meaning gets it whole."""
    from memchat.agent.offline import question_query as _question

    assert _question(question) == query


async def test_a_question_in_other_words_finds_the_memory(runner) -> None:
    await turn(runner, "I work as a nurse in Berlin")
    runner.new_session()
    text, calls = await turn(runner, "What's my job?")
    assert calls == [("memory_search", {"query": "job works"})]
    assert "User works as a nurse in Berlin" in text
