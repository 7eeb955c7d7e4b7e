"""Shared pieces of the auto-extraction tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from backends import create
from memchat.agent.llm import ModelConfig
from memchat.agent.openai_model import OpenAIChatModel
from memchat.engine import MemoryService, UserKey
from memchat.engine.extraction import (
    AutoMemoryConfig,
    Extraction,
    ExtractionContext,
    ExtractionFinished,
    ModelExtractor,
    Operation,
)

KEY = UserKey("test-app", "alice")


def openai_model(server, *, timeout: float = 10.0) -> OpenAIChatModel:
    """The real openai SDK client, pointed at a ScriptedOpenAI server."""
    model = OpenAIChatModel(
        ModelConfig(
            model="extractor-model",
            api_key="sk-test",
            base_url=server.base_url,
            timeout=timeout,
            max_retries=0,
        )
    )
    model.retry_base_delay = 0.01
    return model


def model_extractor(server, **options: Any) -> ModelExtractor:
    return ModelExtractor(openai_model(server), owns_model=True, **options)


def auto_service(extractor: Any, *, tool_settings: Any = None, **config: Any) -> MemoryService:
    return MemoryService(
        create("inmemory"),
        extractor=extractor,
        auto_memory=AutoMemoryConfig(**config),
        tool_settings=tool_settings,
    )


def conversation(*texts: str) -> list[dict[str, Any]]:
    """Alternating user/assistant messages."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


class Recorder:
    """Collects the listener events of an AutoMemory."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self._finished = asyncio.Event()

    def __call__(self, event: Any) -> None:
        self.events.append(event)
        if isinstance(event, ExtractionFinished):
            self._finished.set()

    @property
    def finished(self) -> list[ExtractionFinished]:
        return [e for e in self.events if isinstance(e, ExtractionFinished)]

    async def wait_finished(self, count: int = 1, timeout: float = 10.0) -> list[ExtractionFinished]:
        async def wait() -> None:
            while len(self.finished) < count:
                self._finished.clear()
                if len(self.finished) >= count:
                    break
                await self._finished.wait()

        await asyncio.wait_for(wait(), timeout)
        return self.finished


class FakeExtractor:
    """An in-process extractor: returns scripted operations, records its calls."""

    policy = "merge_similar"

    def __init__(self, *batches: Sequence[Operation], delay: float = 0.0, fail: int = 0) -> None:
        self.batches = [list(b) for b in batches]
        self.delay = delay
        self.fail = fail
        self.calls: list[tuple[list[dict[str, Any]], list[Any], frozenset[str] | None]] = []
        self.active = 0
        self.max_active = 0
        self.checks: list[ExtractionContext] = []
        self.answer = True
        self.closed = False

    def should_extract(self, context: ExtractionContext) -> bool:
        self.checks.append(context)
        return self.answer

    async def extract(self, messages, existing, *, enabled=None, reference_date=None) -> Extraction:
        self.calls.append(([dict(m) for m in messages], list(existing), enabled))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail:
                self.fail -= 1
                raise RuntimeError("model unavailable")
            return Extraction(tuple(self.batches.pop(0)) if self.batches else ())
        finally:
            self.active -= 1

    async def close(self) -> None:
        self.closed = True
