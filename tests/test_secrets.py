"""Secrets never reach a person: not whole, and not as a fragment a server echoes.

``redact`` masks a secret and any piece of it of 8+ characters; the model
client, the embedder, Chroma and the SQL/Redis stores route every error that
may quote a server through it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from memchat.agent.llm import ModelConfig, ModelError
from memchat.agent.openai_model import OpenAIChatModel
from memchat.engine import BackendError
from memchat.engine.secrets import redact
from tests.scripted_openai import ScriptedOpenAI

#: No "sk-" prefix inside the echoed piece, so only the fragment rule can catch it.
KEY = "sk-proj-Q7wErTyUiOp4AsDfGhJkLzXcVbNm9"
FRAGMENT = KEY[14:26]  # 12 characters from the middle


def leaks(message: str, secret: str = KEY, width: int = 8) -> list[str]:
    """Every ``width``-character piece of ``secret`` found in ``message``."""
    return [secret[i : i + width] for i in range(len(secret) - width + 1) if secret[i : i + width] in message]


# -- the helper ------------------------------------------------------------------


def test_the_whole_secret_and_every_long_piece_are_masked() -> None:
    assert redact(f"key {KEY} rejected", [KEY]) == "key *** rejected"
    assert redact(f"provided: ...{FRAGMENT}...", [KEY]) == "provided: ...***..."
    assert redact(f"a{KEY[:8]}b{KEY[-8:]}c", [KEY]) == "a***b***c"
    # Seven characters are not a piece worth masking (and common words must survive).
    assert redact(f"x{KEY[3:10]}x", [KEY]) == f"x{KEY[3:10]}x"
    assert redact("nothing secret here", [KEY, None, ""]) == "nothing secret here"


def test_overlapping_pieces_of_several_secrets_merge_into_one_mask() -> None:
    other = "hunter2-correct-horse"
    text = f"{KEY[:12]}{KEY[10:20]} and {other[5:20]}!"
    assert redact(text, [KEY, other]) == "*** and ***!"
    assert redact("pw=abcd;", ["abcd"]) == "pw=***;"  # short secrets: whole only
    assert redact("ab ab", ["ab"]) == "ab ab"  # too short to mask at all


def test_redaction_is_linear_enough_for_long_messages() -> None:
    text = ("x" * 7 + FRAGMENT[:7]) * 20_000 + FRAGMENT
    assert redact(text, [KEY]).endswith("***") and len(leaks(redact(text, [KEY]))) == 0


# -- the chat model --------------------------------------------------------------


async def _model_failure(base_url: str) -> str:
    model = OpenAIChatModel(
        ModelConfig(model="m", api_key=KEY, base_url=base_url, timeout=5.0, max_retries=0)
    )
    try:
        with pytest.raises(ModelError) as info:
            async for _ in model.stream([{"role": "user", "content": "hi"}]):
                pass
    finally:
        await model.close()
    return str(info.value)


@pytest.mark.parametrize("status", [400, 422, 500])
async def test_a_key_fragment_the_model_server_echoes_is_masked(status: int) -> None:
    with ScriptedOpenAI() as server:
        server.reply_error(status, f"Incorrect API key provided: ...{FRAGMENT}.... Check your key.")
        message = await _model_failure(server.base_url)
    assert "Incorrect API key provided" in message  # the server's reason still shows
    assert leaks(message) == [], message


# -- the embedder ----------------------------------------------------------------


class _Echo(BaseHTTPRequestHandler):
    """Answers every request with ``status`` and an error body quoting ``text``."""

    status = 500
    text = ""
    ok_paths: ClassVar[dict[str, Any]] = {}

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path in self.ok_paths:
            status, body = 200, self.ok_paths[self.path]
        else:
            status, body = self.status, {"error": {"message": self.text, "type": "x"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer


@pytest.fixture
def echo() -> Iterator[type[_Echo]]:
    handler = type("Echo", (_Echo,), {"ok_paths": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [400, 500])
async def test_a_key_fragment_the_embedding_server_echoes_is_masked(echo, status: int) -> None:
    from memchat.engine.embedding import OpenAIEmbedder

    echo.status, echo.text = status, f"invalid key ...{FRAGMENT}..."
    embedder = OpenAIEmbedder(
        model="text-embedding-3-small", api_key=KEY, base_url=f"{echo.url}/v1", env={}, timeout=5.0
    )
    with pytest.raises(BackendError) as info:
        await embedder.embed(["hello"])
    assert leaks(str(info.value)) == [], str(info.value)


# -- Chroma ----------------------------------------------------------------------


async def test_a_token_fragment_a_chroma_server_echoes_is_masked(echo) -> None:
    pytest.importorskip("chromadb")
    from backends import create

    echo.ok_paths["/api/v2/heartbeat"] = {"nanosecond heartbeat": 1}
    echo.status, echo.text = 403, f"token ...{FRAGMENT}... is not allowed"
    for options in ({"api_key": KEY}, {"bearer_token": KEY}):
        store = create("chromadb", url=echo.url, env={}, timeout=5, **options)
        with pytest.raises(BackendError) as info:
            await store.open()
        await store.close()
        assert "is not allowed" in str(info.value) and leaks(str(info.value)) == [], str(info.value)


# -- DSN passwords in driver messages ------------------------------------------------


PASSWORD = "correct-horse-battery-staple"


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("postgres", {"dsn": f"postgresql://app:{PASSWORD}@db.example:5432/mem"}),
        ("mysql", {"dsn": f"app:{PASSWORD}@tcp(db.example:3306)/mem"}),
    ],
)
def test_a_password_fragment_a_sql_driver_quotes_is_masked(name: str, options: dict[str, Any]) -> None:
    from backends import create

    store = create(name, **options)
    echoed = RuntimeError(f"authentication failed (tried '{PASSWORD[3:18]}')")
    message = str(store._error("connecting", echoed))
    assert message.startswith(f"{name} backend at app:***@db.example:")
    assert leaks(message, PASSWORD) == [], message


def test_a_password_fragment_a_redis_error_quotes_is_masked() -> None:
    from redis.exceptions import ResponseError

    from backends.redis import RedisStore

    store = RedisStore(f"redis://:{PASSWORD}@127.0.0.1:6379/0", env={})
    message = str(store._error("connecting", ResponseError(f"bad password {PASSWORD[4:16]}")))
    assert leaks(message, PASSWORD) == [], message
