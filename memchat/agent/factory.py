"""Build the model, memory service and runner that a Settings object describes.

Shared by the console and the TUI so that both start the same chat.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from memchat.engine import MemoryService
from memchat.engine.vectors import ProgressCallback

from .llm import ChatModel, ModelConfig
from .runner import Runner

if TYPE_CHECKING:
    from memchat.engine.embedding import Embedder
    from memchat.engine.extraction import Checker, Extractor
    from memchat.settings import Settings

#: Told how opening the store goes: filling in missing vectors (an EmbeddingProgress)
#: or building a keyword index (an IndexingProgress); both have ``.done``, ``.total``,
#: ``.percent`` and ``.message()``.
Progress = ProgressCallback


def create_model(settings: Settings) -> ChatModel:
    if settings.offline:
        from .offline import STREAM_TOKENS_PER_SECOND, OfflineModel

        return OfflineModel(tokens_per_second=STREAM_TOKENS_PER_SECOND)
    from .openai_model import OpenAIChatModel

    return OpenAIChatModel(
        ModelConfig(model=settings.model, api_key=settings.api_key, base_url=settings.base_url)
    )


def offline_notice(settings: Settings) -> str:
    """One line when a model was asked for (flag, variable or config file) but there is no
    key, so the offline model answers instead ("" otherwise, and for the default model)."""
    if not settings.offline_fallback:
        return ""
    return (
        f"memchat: OPENAI_API_KEY is not set, so the offline model answers instead of {settings.model}: "
        "set OPENAI_API_KEY (and OPENAI_BASE_URL) to use it"
    )


def offline_facts(text: str) -> Iterator[tuple[str, list[str]]]:
    """The statements about the user in one message, as the offline model reads
    them (including "remember that …"): the rule-based extractor's fact finder."""
    from .offline import facts_in

    yield from facts_in(text)


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


#: The one line said when semantic search is off; {where} names the setting.
KEYWORD_ONLY_NOTICE = "memchat: semantic search is off ({where}): memories are found by keywords only"


def embedder_notice(settings: Settings) -> str:
    """The one line to show when the embedder is "none" ("" otherwise): console
    and CLI print it on stderr, the TUI shows it as a notification."""
    if settings.embedder != "none":
        return ""
    origin = settings.sources.get("embedder", "")
    if origin.startswith("config file "):
        where = f'{origin.removeprefix("config file ")} = "none" in the config file'
    else:
        where = f"{settings.origin_of('embedder') if origin else 'MEMCHAT_EMBEDDER'}=none"
    return KEYWORD_ONLY_NOTICE.format(where=where)


def create_embedder(settings: Settings) -> Embedder | None:
    """The embedder the settings choose (None for "none": keyword search only).

    The reference's per-backend variable (e.g. PGVECTOR_EMBEDDER_MODEL) names a
    remote embedding model for that backend; it applies unless another embedder
    was chosen explicitly. Nothing is loaded here: models load on first use."""
    from memchat.engine.embedding import create_embedder as build

    if settings.embedder == "none":
        return None
    prefix = {"chromadb": "CHROMA"}.get(settings.memory, settings.memory.upper())
    backend_model = settings.env.get(f"{prefix}_EMBEDDER_MODEL", "").strip()
    chosen = "embedder" in settings.sources and settings.embedder != "openai"
    if backend_model and not chosen:
        return build("openai", env=settings.env, model=backend_model)
    return build(settings.embedder, env=settings.env)


def create_service(settings: Settings, *, progress: Progress | None = None) -> MemoryService:
    """The memory service the settings describe: store, embedder, search mode,
    limits, tools and (in auto mode) the extractor. ``progress`` is told how
    filling in missing vectors goes when the store opens."""
    from backends import create, store_class
    from memchat.engine.embedding import OpenAIEmbedder
    from memchat.engine.vectors import NO_EMBEDDER

    extractor = auto_memory = None
    if settings.extract:
        from memchat.engine.extraction import AutoMemoryConfig

        extractor = create_extractor(settings)
        auto_memory = AutoMemoryConfig(
            workers=settings.workers, queue_size=settings.queue_size, job_timeout=settings.job_timeout
        )
    embedder = create_embedder(settings)
    store_options = {}
    if isinstance(embedder, OpenAIEmbedder) and store_class(settings.memory).capabilities.vector_search:
        # A remote embedder (OPENAI_EMBEDDING_MODEL) fixes the index dimension.
        store_options["dimension"] = embedder.dimension
    return MemoryService(
        create(settings.memory, env=settings.env, timeout=settings.timeout, **store_options),
        embedder=NO_EMBEDDER if embedder is None else embedder,
        soft_delete=settings.soft_delete,
        limit=settings.limit,
        tool_settings=settings.tool_settings(),
        extractor=extractor,
        auto_memory=auto_memory,
        search_mode=settings.search,
        progress=progress,
    )


async def open_runner(settings: Settings, *, progress: Progress | None = None) -> Runner:
    """Connect the backend (raising BackendError if it is unreachable) and
    return a ready runner. ``progress`` is told how filling in missing vectors goes."""
    service = create_service(settings, progress=progress)
    try:
        await service.open()
        runner = Runner(
            create_model(settings),
            service,
            app=settings.app,
            user=settings.user,
            streaming=settings.streaming,
            preload=settings.preload,
        )
        from .sessions import attach_sessions

        # The conversation is saved beside the memories (memchat.sessions).
        await attach_sessions(runner, settings)
    except BaseException:
        await service.close()
        raise
    return runner


async def close_runner(runner: Runner) -> None:
    """Save what is pending of the conversation, close the model, then the
    service: in auto mode what is pending of the conversation is extracted
    first (bounded by the job timeout)."""
    runner.flush_extraction()
    try:
        from .sessions import recorder_of

        recorder = recorder_of(runner)
        if recorder is not None:
            await recorder.close()
    finally:
        try:
            await runner.model.close()
        finally:
            await runner.service.close()
