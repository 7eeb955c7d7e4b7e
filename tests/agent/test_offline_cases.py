"""Every case of offline_cases.py through the real Runner, OfflineModel and
MemoryService (in memory, with the offline embedder): the tool calls it makes,
what it answers and what is stored afterwards."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends import create
from memchat.agent.events import TextDelta, ToolCallsRequested, ToolFinished
from memchat.agent.offline import OfflineModel, topics_for
from memchat.agent.runner import Runner
from memchat.engine import MemoryService
from memchat.engine.tools import ToolSettings

from .offline_cases import CASES, CHINESE, ENGLISH, Case

TUNED = [c for c in CASES if not c.held_out]
HELD_OUT = [c for c in CASES if c.held_out]
#: The share of held-out cases that must pass (they are reported, not tuned on).
HELD_OUT_FLOOR = 0.6


async def run_case(case: Case) -> list[str]:
    """What went wrong with ``case`` ([] when nothing)."""
    tools = ToolSettings(enabled={"memory_delete": True, "memory_clear": True})
    service = MemoryService(create("inmemory"), tool_settings=tools)
    try:
        runner = Runner(OfflineModel(), service)
        for memory in case.setup:
            await service.add(runner.key, memory, topics=topics_for(memory, []))
        calls: list[tuple[str, dict[str, Any]]] = []
        text: list[str] = []
        problems: list[str] = []
        async for event in runner.run(case.text):
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, ToolCallsRequested):
                calls += [(c.name, json.loads(c.arguments)) for c in event.calls]
            elif isinstance(event, ToolFinished) and event.is_error:
                problems.append(f"tool error {event.content}")
        stored = [e.memory.text for e in await service.read(runner.key)]
    finally:
        await service.close()
    answer = "".join(text)
    names = [name for name, _ in calls]
    if names != [name for name, _ in case.calls]:
        problems.append(f"calls {calls} != {list(case.calls)}")
    else:
        for (name, args), (_, fragment) in zip(calls, case.calls, strict=True):
            main = str(args.get("query", args.get("memory", "")))
            if fragment.lower() not in main.lower():
                problems.append(f"{name} argument {main!r} lacks {fragment!r}")
    problems += [f"answer lacks {f!r}: {answer!r}" for f in case.recalls if f not in answer]
    problems += [f"answer has {f!r}: {answer!r}" for f in case.excludes if f in answer]
    problems += [f"none stored has {f!r}: {stored}" for f in case.stored if all(f not in m for m in stored)]
    problems += [f"a memory still has {f!r}: {stored}" for f in case.gone if any(f in m for m in stored)]
    return problems


def test_the_set_covers_both_languages() -> None:
    assert len(ENGLISH) >= 100 and len(CHINESE) >= 50
    assert all(c.chinese for c in CHINESE) and not any(c.chinese for c in ENGLISH)


@pytest.mark.parametrize("case", TUNED, ids=[c.text for c in TUNED])
async def test_offline_model_case(case: Case) -> None:
    problems = await run_case(case)
    assert not problems, problems


async def test_held_out_cases(capsys) -> None:
    """Cases written before the rules and never tuned on: most pass (the count is printed)."""
    failures = {c.text: p for c in HELD_OUT if (p := await run_case(c))}
    passed = len(HELD_OUT) - len(failures)
    with capsys.disabled():
        print(f"\nheld-out offline cases: {passed}/{len(HELD_OUT)} pass")
        for text, problems in failures.items():
            print(f"  {text}: {problems}")
    assert passed >= HELD_OUT_FLOOR * len(HELD_OUT), failures
