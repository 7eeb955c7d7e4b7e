"""The console transcript of the seed's demo, line by line, through the real CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO_INPUT = "你好，我是张三，我喜欢 Go 语言编程\n/new\n 我喜欢什么?\n/exit\n"

EXPECTED = """\
🧠 Simple Memory Chat
Model: offline
Memory Service: {backend}
{describe}
Streaming: true
Available tools: memory_add, memory_update, memory_search, memory_load
(memory_delete, memory_clear disabled by default, can be enabled with --enable-tool)
ℹ️  Offline model (no OPENAI_API_KEY is set): it remembers and recalls what you tell it. Set OPENAI_API_KEY (and OPENAI_BASE_URL) for a real model.
==================================================
✅ Memory chat ready! Session: memory-session-<T1>

💡 Special commands:
   /memory   - Show user memories
   /new      - Start a new session (memories are kept)
   /stream   - Toggle streaming output
   /sessions - List saved sessions
   /export   - Save this conversation as Markdown (/export json, or /export FILE)
   /help     - Show the commands
   /exit     - End the conversation

👤 You: 你好，我是张三，我喜欢 Go 语言编程
🤖 Assistant: 你好张三！很高兴认识你，我把这个记下来。
🔧 Memory tool calls initiated:
   • memory_add (ID: <CALL1>)
     Args: {{"memory": "张三喜欢 Go 语言编程", "topics": ["programming", "go", "interests", "technology"]}}

🔄 Executing memory tools...
✅ Memory tool response (ID: <CALL1>): {{"message":"Memory added successfully","memory":"张三喜欢 Go 语言编程","topics":["programming","go","interests","technology"]}}
好的，我记住了：张三喜欢 Go 语言编程。

👤 You: /new
🆕 Started new memory session!
   Previous: memory-session-<T1>
   Current:  memory-session-<T2>
   (Conversation history has been reset, memories are preserved)

👤 You:  我喜欢什么?
🤖 Assistant: 我来查看一下记忆。
🔧 Memory tool calls initiated:
   • memory_search (ID: <CALL2>)
     Args: {{"query": "喜欢"}}

🔄 Executing memory tools...
✅ Memory tool response (ID: <CALL2>): {{"query":"喜欢","results":[{{"id":"bf97108fefa50daf9490be2bc35a7d189a71150cdcc3545e20b9e812d6ead2a8","memory":"张三喜欢 Go 语言编程","topics":["programming","go","interests","technology"],"created":"<TIME>","kind":"fact","score":<SCORE>}}],"count":1}}
根据我的记忆：
- 张三喜欢 Go 语言编程

👤 You: /exit
👋 Goodbye!
"""


def normalise(text: str) -> str:
    sessions: dict[str, str] = {}
    calls: dict[str, str] = {}

    def session(m: re.Match[str]) -> str:
        return "memory-session-" + sessions.setdefault(m.group(1), f"<T{len(sessions) + 1}>")

    def call(m: re.Match[str]) -> str:
        return calls.setdefault(m.group(0), f"<CALL{len(calls) + 1}>")

    text = re.sub(r"memory-session-(\d+)", session, text)
    text = re.sub(r"call_\d\d_[0-9a-f]{24}", call, text)
    text = re.sub(r'"score":[0-9.]+', '"score":<SCORE>', text)
    return re.sub(r'"created":"[^"]+"', '"created":"<TIME>"', text)


def scores(text: str) -> list[float]:
    """The relevance scores in the tool results: the engine's calibration sets the
    digits (tested with the engine); here the recalled memory must clearly match."""
    return [float(x) for x in re.findall(r'"score":([0-9.]+)', text)]


def run_memchat(args: list[str], stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMCHAT_"))}
    return subprocess.run(
        [sys.executable, "-m", "memchat", *args],
        input=stdin, capture_output=True, text=True, timeout=60, env={**clean, **env},
        cwd=Path(__file__).parent,
    )  # fmt: skip


def test_seed_demo_transcript_on_sqlite(tmp_path) -> None:
    db = tmp_path / "demo.db"
    result = run_memchat(["--plain", "--memory", "sqlite"], DEMO_INPUT, {"SQLITE_MEMORY_DSN": str(db)})
    assert result.returncode == 0, result.stderr
    expected = EXPECTED.format(backend="sqlite", describe=f"sqlite ({db})")
    assert normalise(result.stdout).splitlines() == expected.splitlines()
    assert [round(x) for x in scores(result.stdout)] == [1], scores(result.stdout)  # 0.5 ≤ score ≤ 1


def test_seed_demo_transcript_on_redis() -> None:
    import uuid

    from tests.conformance.harness import _redis_reachable
    from tests.support import require

    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    require(_redis_reachable(url), f"Redis is not reachable at {url}: start it or set REDIS_URL")
    prefix = f"memchat-test:{uuid.uuid4().hex}:"
    env = {"REDIS_URL": url, "REDIS_KEY_PREFIX": prefix}
    try:
        result = run_memchat(["--plain", "--memory", "redis"], DEMO_INPUT, env)
        assert result.returncode == 0, result.stderr
        expected = EXPECTED.format(backend="redis", describe=f"redis ({url}, key prefix {prefix!r})")
        assert normalise(result.stdout).splitlines() == expected.splitlines()
        assert [round(x) for x in scores(result.stdout)] == [1], scores(result.stdout)
    finally:
        import redis

        with redis.Redis.from_url(url) as client:
            keys = list(client.scan_iter(match=f"{prefix}*"))
            if keys:
                client.delete(*keys)


def test_memories_survive_a_restart_on_the_default_backend(tmp_path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path)}
    run_memchat(["--plain"], "I live in Berlin\n/exit\n", env)
    result = run_memchat(["--plain"], "where do I live?\n", env)
    assert "User lives in Berlin" in result.stdout
    assert (tmp_path / "memchat" / "memories.db").exists()


def test_non_streaming_prints_the_same_transcript(tmp_path) -> None:
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "a.db")}
    streamed = run_memchat(["--plain"], DEMO_INPUT, env)
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "b.db")}
    whole = run_memchat(["--plain", "--no-streaming"], DEMO_INPUT, env)
    strip = lambda text: [  # noqa: E731
        line for line in normalise(text).splitlines() if not line.startswith(("Streaming:", "sqlite ("))
    ]
    assert strip(streamed.stdout) == strip(whole.stdout)
    assert "Streaming: false" in whole.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--memory", "mongo"], "unknown memory backend 'mongo': choose one of"),
        (["--memory", "chromadb"], "cannot reach the Chroma server at http://127.0.0.1:9"),
        (["--preload", "-5"], "preload must be -1"),
        (["--enable-tool", "memory_nuke"], "unknown tool 'memory_nuke'"),
    ],
)
def test_bad_flags_are_one_line_and_exit_code_2(args, needle) -> None:
    result = run_memchat(["--plain", *args], "/exit\n", {"CHROMA_BASE_URL": "http://127.0.0.1:9"})
    assert result.returncode == 2
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_an_unwritable_database_is_one_line_and_exit_code_2(tmp_path) -> None:
    result = run_memchat(["--plain"], "hi\n", {"SQLITE_MEMORY_DSN": str(tmp_path / "no" / "such" / "x.db")})
    assert result.returncode == 2
    assert "SQLITE_MEMORY_DSN" in result.stderr and "Traceback" not in result.stderr


def test_the_piped_example_from_the_issue_works(tmp_path) -> None:
    result = run_memchat(
        ["--plain"],
        "I like Go\n/new\nWhat do I like?\n/exit\n",
        {"SQLITE_MEMORY_DSN": str(tmp_path / "x.db")},
    )
    assert result.returncode == 0
    after_new = result.stdout.split("Started new memory session")[1]
    assert "User likes Go" in after_new


def test_commands_help_stream_unknown_and_memory(tmp_path) -> None:
    result = run_memchat(
        ["--plain"],
        "I like tea\n/help\n/stream\n/bogus\n/memory\n/exit\n",
        {"SQLITE_MEMORY_DSN": str(tmp_path / "x.db")},
    )
    out = result.stdout
    assert "🔁 Streaming: false" in out
    assert "Unknown command /bogus" in out
    assert '"memory_load"' not in out and "memory_load (ID:" in out  # /memory asks the model
    assert "User likes tea" in out.split("memory_load (ID:")[1]


def test_forget_in_the_console_explains_and_deletes_nothing(tmp_path) -> None:
    result = run_memchat(
        ["--plain"],
        "I like tea\n/forget tea\nWhat do I like?\n/exit\n",
        {"SQLITE_MEMORY_DSN": str(tmp_path / "x.db")},
    )
    out = result.stdout
    assert result.returncode == 0
    # Explained, and the memory is still there to recall afterwards.
    assert "memchat memory delete ID" in out and "User likes tea" in out.split("/forget asks")[1]


# -- hostile text: bytes that are not UTF-8, escape sequences in memories ----------

#: A memory a model could write: window title (OSC … BEL), clear screen (CSI), C1 CSI, markup-like text.
HOSTILE = "\x1b]0;pwned\x07 tea\x1b[2J \x9b31m [bold]x[/bold] pip install 'memchat[redis]'"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_stdin_that_is_not_utf8_is_decoded_with_replacement(tmp_path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MEMCHAT_"))}
    for locale in ("C.UTF-8", "en_US.UTF-8"):  # stdin is surrogateescape in one, strict in the other
        done = subprocess.run(
            [sys.executable, "-m", "memchat", "--plain"],
            input=b"I like \xff tea\nwhat do I like?\n/exit\n", capture_output=True, timeout=60,
            env={**clean, "LC_ALL": locale, "SQLITE_MEMORY_DSN": str(tmp_path / f"{locale}.db")},
        )  # fmt: skip
        out, err = done.stdout.decode("utf-8"), done.stderr.decode("utf-8", "replace")
        assert done.returncode == 0, err
        assert "Traceback" not in err and err == ""
        assert "👤 You: I like \ufffd tea" in out
        assert "User likes \ufffd tea" in out.split("what do I like?")[1]
        assert "👋 Goodbye!" in out


def test_escape_sequences_in_memories_never_reach_the_terminal(tmp_path) -> None:
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "x.db")}
    added = run_memchat(["memory", "add", HOSTILE], "", env)
    assert added.returncode == 0, added.stderr
    # The model loads the memories (tool result) and quotes them in its answer.
    result = run_memchat(["--plain"], "/memory\nwhat do I like?\n/exit\n", env)
    assert result.returncode == 0, result.stderr
    assert not RAW_CONTROL.search(result.stdout.replace("\n", "")), repr(result.stdout)
    answer = result.stdout.split("🔄 Executing memory tools...")[1]
    assert "␛]0;pwned␇ tea␛[2J \\x9b31m [bold]x[/bold] pip install 'memchat[redis]'" in answer


async def test_the_console_shows_model_text_tool_calls_and_input_inert() -> None:
    import io

    from backends import create
    from memchat.agent.runner import Runner
    from memchat.console import Console
    from memchat.engine import MemoryService
    from tests.agent.scripted_model import ScriptedModel, Step

    args = '{"memory": "User likes \x9b31m tea \u202eexe", "topics": ["\x1b[31mred"]}'
    model = ScriptedModel([
        Step("Saving \x1b]0;pwned\x07 it.", [("call\x1b[2J-1", "memory_add", args)]),
        Step("Saved: \x1b[2J [bold]done[/bold]."),
    ])  # fmt: skip
    service = MemoryService(create("inmemory"))
    out = io.StringIO()
    try:
        console = Console(Runner(model, service), out, echo_input=True)
        await console.run(io.StringIO("I like \x1b[5m tea \udcff\n/bogus\x07\n"))
    finally:
        await service.close()
    text = out.getvalue()
    assert not RAW_CONTROL.search(text.replace("\n", "")), repr(text)
    assert "\u202e" not in text and "\udcff" not in text
    assert "👤 You: I like ␛[5m tea \ufffd" in text
    assert "Saving ␛]0;pwned␇ it." in text and "(ID: call␛[2J-1)" in text
    assert 'Args: {"memory": "User likes \\x9b31m tea \\u202eexe", "topics": ["␛[31mred"]}' in text
    assert "Saved: ␛[2J [bold]done[/bold]." in text
    assert "Unknown command /bogus␇" in text


def test_a_strict_stdin_is_switched_to_replacement() -> None:
    import io

    from memchat.console import tolerate_bad_input

    stdin = io.TextIOWrapper(io.BytesIO(b"I like \xff tea\n"), encoding="utf-8", errors="strict")
    tolerate_bad_input(stdin)
    assert stdin.readline() == "I like \ufffd tea\n"


def test_without_an_embedder_the_chat_says_so_once_and_recalls_by_keywords(tmp_path) -> None:
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "k.db"), "MEMCHAT_EMBEDDER": "none"}
    result = run_memchat(["--plain"], "I live in Berlin\n/new\nwhere do I live?\n/exit\n", env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "memchat: semantic search is off (MEMCHAT_EMBEDDER=none): memories are found by keywords only"
    ]
    assert "- User lives in Berlin" in result.stdout
    assert "onnxruntime" not in result.stdout


def test_the_progress_line_is_rewritten_on_a_terminal_and_printed_twice_in_a_pipe() -> None:
    import io

    from memchat.console import ProgressPrinter
    from memchat.engine.vectors import EmbeddingProgress

    piped = io.StringIO()
    printer = ProgressPrinter(piped)
    printer(EmbeddingProgress(0, 0))  # nothing to fill in: nothing said
    assert piped.getvalue() == ""
    for done in (0, 64, 128, 1234, 1234):
        printer(EmbeddingProgress(done, 1234))
    assert piped.getvalue().splitlines() == [
        "Embedding 1,234 memories for semantic search… 0%",
        "Embedding 1,234 memories for semantic search… 100%",
    ]

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    live = Terminal()
    printer = ProgressPrinter(live)
    for done in (0, 500, 1234):
        printer(EmbeddingProgress(done, 1234))
    assert live.getvalue() == (
        "\rEmbedding 1,234 memories for semantic search… 0%"
        "\rEmbedding 1,234 memories for semantic search… 40%"
        "\rEmbedding 1,234 memories for semantic search… 100%\n"
    )


def test_a_store_from_before_vectors_is_filled_in_with_a_progress_line(tmp_path) -> None:
    """Memories written without an embedder get their vectors on the next open, said on stderr."""
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "old.db"), "MEMCHAT_EMBEDDER": "none"}
    run_memchat(["--plain"], "I have a cat\n/exit\n", env)
    env.pop("MEMCHAT_EMBEDDER")
    result = run_memchat(["--plain"], "/new\ndo I have a pet animal?\n/exit\n", env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "Embedding 1 memory for semantic search… 0%",
        "Embedding 1 memory for semantic search… 100%",
    ]
    assert "- User has a cat" in result.stdout
