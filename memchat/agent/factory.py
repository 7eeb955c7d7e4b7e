"""Build the model, memory service and runner that a Settings object describes.

Shared by the console and the TUI so that both start the same chat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memchat.engine import MemoryService

from .llm import ChatModel, ModelConfig
from .runner import Runner

if TYPE_CHECKING:
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


def create_service(settings: Settings) -> MemoryService:
    from backends import create

    return MemoryService(
        create(settings.memory, env=settings.env),
        soft_delete=settings.soft_delete,
        limit=settings.limit,
        tool_settings=settings.tool_settings(),
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
    try:
        await runner.model.close()
    finally:
        await runner.service.close()
