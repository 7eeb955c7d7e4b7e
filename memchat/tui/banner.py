"""The note the chat opens with once the runner is connected: the session,
where the memories are kept, the tools the model has, and how to start."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

if TYPE_CHECKING:
    from memchat.agent.runner import Runner
    from memchat.settings import Settings


def ready_banner(runner: Runner, settings: Settings) -> Content:
    from memchat.agent.runner import tool_summary

    enabled, note = tool_summary(runner)
    lines = [
        Content.from_markup("✅ [b]Memory chat ready![/b]  Session: $s", s=runner.session_id),
        Content.from_markup("[$text-muted]Memory service:[/] $d", d=runner.memory.describe()),
        Content.from_markup("[$text-muted]Available tools:[/] $t", t=enabled),
    ]
    if note:
        lines.append(Content.from_markup("[$text-muted]$n[/]", n=note))
    if runner.auto_extraction:
        from memchat.agent.factory import extraction_summary

        summary = extraction_summary(settings) or "🧩 Auto extraction: on (in the background)"
        lines.append(Content(summary))
    if settings.offline:
        lines.append(
            Content.from_markup(
                "ℹ  Offline model ($why): it remembers and recalls what you tell it. "
                "Set OPENAI_API_KEY (and OPENAI_BASE_URL) for a real model.",
                why=settings.offline_reason,
            )
        )
    lines.append(
        Content.from_markup("[$text-muted]Type a message and press Enter · /help for commands · "
                            "ctrl+b shows your memories[/]")
    )  # fmt: skip
    return Content("\n").join(lines)
