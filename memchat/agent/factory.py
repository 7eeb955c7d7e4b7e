"""Build the model, memory service and runner that a Settings object describes.

Shared by the console and the TUI so that both start the same chat.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from memchat.engine import MemoryService

from .llm import ChatModel, ModelConfig
from .runner import Runner

if TYPE_CHECKING:
    from memchat.engine.extraction import Checker, Extractor
    from memchat.settings import Settings

#: Seconds between the offline model's streamed pieces, so streaming is visible.
OFFLINE_STREAM_DELAY = 0.012


def create_model(settings: Settings) -> ChatModel:
    if settings.offline:
        from .offline import OfflineModel

        return OfflineModel(delay=OFFLINE_STREAM_DELAY)
    from .openai_model import OpenAIChatModel

    return OpenAIChatModel(
        ModelConfig(model=settings.model, api_key=settings.api_key, base_url=settings.base_url)
    )


def offline_facts(text: str) -> Iterator[tuple[str, list[str]]]:
    """The statements about the user in one message, as the offline model reads
    them (including "remember that …"): the rule-based extractor's fact finder."""
    from . import offline

    chinese = bool(offline._HAN.search(text))
    remember = (offline._ZH_REMEMBER if chinese else offline._EN_REMEMBER).match(text.strip())
    if remember:
        memory = offline._third_person(remember.group(1), chinese)
        yield memory, offline._topics_for(memory, ["notes"])
        return
    yield from offline.extract_facts(text).memories


def extraction_checkers(settings: Settings) -> list[Checker]:
    """--extract-every N: at least N new messages; --extract-interval: time since the
    last extraction; both: either (or both with extract_match = "all"); none: every turn."""
    from memchat.engine.extraction import all_of, any_of, message_threshold, time_interval

    checkers: list[Checker] = []
    if settings.extract_every > 0:
        checkers.append(message_threshold(settings.extract_every - 1))
    if settings.extract_interval > 0:
        checkers.append(time_interval(settings.extract_interval))
    if len(checkers) > 1:
        return [(all_of if settings.extract_match == "all" else any_of)(*checkers)]
    return checkers


def create_extractor(settings: Settings) -> Extractor:
    """The model extractor (its own client, timing out with the job), or the
    rule-based one when there is no key or ``--extract-model offline``."""
    from memchat.engine.extraction import ModelExtractor, RuleBasedExtractor

    checkers = extraction_checkers(settings)
    if settings.extract_offline:
        return RuleBasedExtractor(offline_facts, checkers=checkers, policy=settings.update_policy)
    from .openai_model import OpenAIChatModel

    config = ModelConfig(
        model=settings.extract_model or settings.model,
        api_key=settings.api_key,
        base_url=settings.base_url,
        timeout=settings.job_timeout,
        max_retries=1,
    )
    return ModelExtractor(
        OpenAIChatModel(config), checkers=checkers, policy=settings.update_policy, owns_model=True
    )


def _seconds(value: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if value >= size and value % size == 0:
            return f"{int(value // size)}{unit}"
    return f"{value:g}s"


def extraction_summary(settings: Settings) -> str:
    """One banner line describing auto mode ("" when it is off), for the console and the TUI."""
    if not settings.extract:
        return ""
    when = []
    if settings.extract_every > 0:
        when.append(f"{settings.extract_every} new messages")
    if settings.extract_interval > 0:
        when.append(f"{_seconds(settings.extract_interval)} since the last extraction")
    joiner = " and " if settings.extract_match == "all" else " or "
    cadence = f"once {joiner.join(when)}" if when else "after every turn"
    workers = f"{settings.workers} worker{'s' if settings.workers != 1 else ''}"
    extractor = "rule-based (offline)" if settings.extract_offline else settings.extraction_model_name
    return (
        f"🧩 Auto extraction: {extractor} in the background, {cadence} "
        f"({workers}, queue {settings.queue_size}, timeout {_seconds(settings.job_timeout)}, "
        f"{settings.update_policy})"
    )


def create_service(settings: Settings) -> MemoryService:
    from backends import create, store_class

    extractor = auto_memory = None
    if settings.extract:
        from memchat.engine.extraction import AutoMemoryConfig

        extractor = create_extractor(settings)
        auto_memory = AutoMemoryConfig(
            workers=settings.workers, queue_size=settings.queue_size, job_timeout=settings.job_timeout
        )
    embedder, store_options = None, {}
    if store_class(settings.memory).capabilities.vector_search:
        from memchat.engine.embedding import LocalEmbedder, create_embedder

        # The reference's per-backend variable (e.g. PGVECTOR_EMBEDDER_MODEL) names a
        # remote embedding model for that backend; OPENAI_EMBEDDING_MODEL for all.
        prefix = {"chromadb": "CHROMA"}.get(settings.memory, settings.memory.upper())
        backend_model = settings.env.get(f"{prefix}_EMBEDDER_MODEL", "").strip()
        if backend_model:
            embedder = create_embedder("openai", env=settings.env, model=backend_model)
        else:
            embedder = create_embedder(env=settings.env)
        if not isinstance(embedder, LocalEmbedder):
            # A remote embedder (OPENAI_EMBEDDING_MODEL) fixes the index dimension.
            store_options["dimension"] = embedder.dimension
    return MemoryService(
        create(settings.memory, env=settings.env, timeout=settings.timeout, **store_options),
        embedder=embedder,
        soft_delete=settings.soft_delete,
        limit=settings.limit,
        tool_settings=settings.tool_settings(),
        extractor=extractor,
        auto_memory=auto_memory,
    )


async def open_runner(settings: Settings) -> Runner:
    """Connect the backend (raising BackendError if it is unreachable) and
    return a ready runner."""
    service = create_service(settings)
    try:
        await service.open()
    except BaseException:
        await service.close()
        raise
    return Runner(
        create_model(settings),
        service,
        app=settings.app,
        user=settings.user,
        streaming=settings.streaming,
        preload=settings.preload,
    )


async def close_runner(runner: Runner) -> None:
    """Close the model, then the service: in auto mode what is pending of the
    conversation is extracted first (bounded by the job timeout)."""
    runner.flush_extraction()
    try:
        await runner.model.close()
    finally:
        await runner.service.close()
