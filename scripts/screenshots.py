"""Regenerate the README's screenshots from the real app.

    .venv/bin/python scripts/screenshots.py          # writes screenshots/*.svg and *.png

The app runs headless under Textual's Pilot with the offline model and the
sqlite backend in a temporary folder, types the seed's demo conversation, and
saves SVGs (``App.save_screenshot``); ``rsvg-convert`` (Debian: librsvg2-bin)
turns them into PNGs. For the PNGs a CJK font (fonts-wqy-zenhei) and an emoji
font (fonts-noto-color-emoji) make the Chinese demo and the icons render.

Shots: the chat with live tool-call panels, the memory side panel, and a turn
caught mid-stream.
"""

from __future__ import annotations

import asyncio
import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "screenshots"
SIZE = (120, 40)

SEED_TELL = "你好，我是张三，我喜欢 Go 语言编程"
SEED_ASK = "我喜欢什么?"

LONG_ANSWER = """Here is how I remember things for you:

1. **You tell me something durable** — a name, a preference, a plan.
2. I call `memory_add`, and the memory engine stores it in **sqlite**.
3. In a later session, `memory_search` finds it again by meaning and keywords, in English or 中文.

```python
entries = await service.search(key, "what do I like?")
for entry in entries:
    print(entry.memory.text, entry.memory.topics)
```

Memories survive `/new`: only the conversation starts afresh, and the side panel
shows everything I keep, newest first, with topics and times. You can delete a
memory there, or restore it when soft delete is on. Streaming shows each token as
it arrives; press Esc at any moment to stop the answer and keep what was written.
"""


class SlowMarkdownModel:
    """Streams LONG_ANSWER word by word, slowly enough to catch it mid-way."""

    name = "offline"

    def __init__(self, delay: float = 0.03) -> None:
        self.delay = delay

    async def close(self) -> None:
        return None

    async def stream(self, messages, tools=(), *, streaming=True):
        from memchat.agent.llm import ModelReply, TextChunk, Usage

        pieces = re.findall(r"\S+\s*|\s+", LONG_ANSWER)
        for piece in pieces:
            await asyncio.sleep(self.delay)
            yield TextChunk(piece)
        yield ModelReply(LONG_ANSWER, (), Usage(completion_tokens=len(pieces)))


async def wait_until(pilot, predicate, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("the app did not reach the expected state")
        await pilot.pause(0.02)


async def say(pilot, text: str, wait: bool = True) -> None:
    app = pilot.app
    chat_input = app.chat.chat_input
    chat_input.focus()
    chat_input.load_text(text)
    chat_input.move_cursor(chat_input.document.end)
    await pilot.press("enter")
    if wait:
        await wait_until(pilot, lambda: not app.busy)
        await pilot.pause(0.3)


async def shoot(settings, name: str, script) -> Path:
    from memchat.tui.app import MemchatApp

    app = MemchatApp(settings, cursor_blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.runner is not None)
        await pilot.pause(0.3)
        await script(pilot)
        await pilot.pause(0.2)
        path = Path(app.save_screenshot(f"{name}.svg", str(OUT)))
    print(f"wrote {path.relative_to(ROOT)}")
    return path


async def chat_with_tool_panels(pilot) -> None:
    await say(pilot, SEED_TELL)
    await say(pilot, "/new")
    await say(pilot, SEED_ASK)


async def memory_panel(pilot) -> None:
    app = pilot.app
    for text in (
        SEED_TELL,
        "I live in Hangzhou",
        "I like green tea",
        "I like hiking and jazz",
        "I prefer vim",
    ):
        await say(pilot, text)
    await pilot.press("ctrl+b")
    await wait_until(pilot, lambda: len(app.chat.memory_panel.memory_list.entries) >= 4)
    # Delete one from the panel (soft delete is on): it stays as a dimmed tombstone.
    await pilot.press("down", "d")  # the panel opens in its filter: ↓ into the list
    await pilot.pause(0.3)
    await pilot.press("y")
    await wait_until(pilot, lambda: any(e.is_deleted for e in app.chat.memory_panel.memory_list.entries))
    await pilot.press("down", "down", "down")
    await pilot.pause(0.3)


async def mid_stream(pilot) -> None:
    app = pilot.app
    await say(pilot, SEED_TELL)
    app.runner.model = SlowMarkdownModel()
    await say(pilot, "How do you remember things?", wait=False)
    await wait_until(pilot, lambda: "Memories survive" in (app.chat.chat_log.last_assistant().copy_text()))
    await pilot.pause(0.1)


def fix_svg_for_rsvg(svg: str) -> str:
    """Rich's SVG positions each run of text by ``x`` and stretches it with
    ``textLength``, which rsvg ignores: wide (CJK) characters then overlap and
    leading spaces vanish. Place every character on its own cell instead."""
    from rich.cells import cell_len

    pattern = re.compile(r'<text([^>]*?) x="([0-9.]+)"([^>]*?) textLength="([0-9.]+)"([^>]*)>([^<]*)</text>')

    def place(match: re.Match[str]) -> str:
        before, x, middle, length, after, body = match.groups()
        text = html.unescape(body)
        if not text:
            return match.group(0)
        cell = float(length) / len(text)  # rich sizes runs by characters, not cells
        position, out = float(x), []
        for char in text:
            width = cell_len(char)
            if char not in " \u00a0":
                out.append(
                    f'<text{before} x="{position:.1f}"{middle} textLength="{cell * width:.1f}"{after}>'
                    f"{html.escape(char, quote=False)}</text>"
                )
            position += cell * width
        return "".join(out)

    return pattern.sub(place, svg)


def to_png(svg_path: Path) -> Path | None:
    converter = shutil.which("rsvg-convert")
    if converter is None:
        print("rsvg-convert not found (apt-get install librsvg2-bin): PNGs skipped")
        return None
    png = svg_path.with_suffix(".png")
    with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False, encoding="utf-8") as fixed:
        fixed.write(fix_svg_for_rsvg(svg_path.read_text(encoding="utf-8")))
    try:
        subprocess.run([converter, fixed.name, "-o", str(png)], check=True)
    finally:
        Path(fixed.name).unlink()
    print(f"wrote {png.relative_to(ROOT)}")
    return png


async def main() -> None:
    from memchat.settings import Settings

    OUT.mkdir(exist_ok=True)
    shots = [
        ("chat-tool-panels", chat_with_tool_panels, {}),
        ("memory-panel", memory_panel, {"soft_delete": True}),
        ("mid-stream", mid_stream, {}),
    ]
    for name, script, flags in shots:
        with tempfile.TemporaryDirectory() as tmp:
            environ = {"SQLITE_MEMORY_DSN": f"sqlite:///{tmp}/memories.db", "TZ": "UTC"}
            settings = Settings.load({"memory": "sqlite", **flags}, environ=environ, cwd=Path(tmp))
            to_png(await shoot(settings, name, script))


if __name__ == "__main__":
    asyncio.run(main())
