"""The embedders: the offline MiniLM default and the OpenAI-compatible one, the
dimension check, and what the service does with them on write."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memchat.engine import BackendError, ConfigError, MemoryService, UserKey
from memchat.engine.embedding import (
    DEFAULT_DIMENSION,
    Embedder,
    LocalEmbedder,
    OpenAIEmbedder,
    check_dimensions,
    create_embedder,
    default_embedder,
)

pytest.importorskip("onnxruntime", reason="the offline embedder needs: pip install 'memchat[embed]'")

KEY = UserKey("test-app", "user-1")


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return default_embedder()


# -- the offline embedder --------------------------------------------------------


def test_importing_the_module_does_not_import_onnxruntime() -> None:
    code = (
        "import sys, memchat.engine.embedding as e, memchat.engine.service\n"
        "e.LocalEmbedder()\n"
        "assert 'onnxruntime' not in sys.modules and 'tokenizers' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_vectors_are_384_dimensional_unit_length_and_in_order(local: LocalEmbedder) -> None:
    assert isinstance(local, Embedder) and local.dimension == DEFAULT_DIMENSION == 384
    texts = ["User likes coffee", "The weather in Kyoto is cold in January", "张三喜欢 Go 语言编程"]
    vectors = await local.embed(texts)
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-5) for v in vectors)
    # Batched (and padded) vectors equal one-by-one vectors: dynamic padding is masked out.
    for text, vector in zip(texts, vectors, strict=True):
        [alone] = await local.embed([text])
        assert cosine(alone, vector) > 0.9999
    assert await local.embed([]) == []


async def test_similar_meanings_are_closer_than_unrelated_ones(local: LocalEmbedder) -> None:
    coffee, espresso, car = await local.embed(
        ["User likes coffee", "The user drinks an espresso every morning", "User's car is a red Volvo"]
    )
    assert cosine(coffee, espresso) > 0.5 > cosine(coffee, car) + 0.2


async def test_long_texts_use_up_to_256_tokens_not_the_files_128(local: LocalEmbedder) -> None:
    head = " ".join(["coffee"] * 120)
    a, b = await local.embed(
        [head + " " + " ".join(["volcano"] * 100), head + " " + " ".join(["piano"] * 100)]
    )
    assert cosine(a, b) < 0.99  # words past token 128 still count


async def test_token_vectors_skip_special_tokens_and_stopwords(local: LocalEmbedder) -> None:
    [tokens] = await local.embed_tokens(["What is the capital of France?"])
    assert tokens.shape == (2, 384)  # "capital", "france"
    [again] = await local.embed_tokens(["What is the capital of France?"])  # from the cache
    assert abs(again - tokens).max() < 1e-2


def test_a_missing_model_file_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    embedder = LocalEmbedder(env={"MEMCHAT_EMBEDDING_MODEL_PATH": str(tmp_path / "nope.onnx")})
    with pytest.raises(ConfigError, match="MEMCHAT_EMBEDDING_MODEL_PATH"):
        embedder.embed_sync(["x"])
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    embedder = LocalEmbedder(env={"MEMCHAT_EMBEDDING_TOKENIZER_PATH": str(tmp_path / "missing.json")})
    with pytest.raises(ConfigError, match="MEMCHAT_EMBEDDING_TOKENIZER_PATH"):
        embedder.embed_sync(["x"])


def test_the_dimension_check_names_both_numbers_and_the_fix(local: LocalEmbedder) -> None:
    check_dimensions(local, 384, "here")
    with pytest.raises(ConfigError) as raised:
        check_dimensions(local, 1536, "sqlitevec (/tmp/x.db)")
    message = str(raised.value)
    assert "384" in message and "1536" in message and "new table" in message


# -- choosing ------------------------------------------------------------------


def test_create_embedder_picks_local_unless_an_embedding_model_is_configured() -> None:
    assert isinstance(create_embedder(env={}), LocalEmbedder)
    chosen = create_embedder(env={"OPENAI_EMBEDDING_MODEL": "text-embedding-3-small", "OPENAI_API_KEY": "k"})
    assert isinstance(chosen, OpenAIEmbedder) and chosen.dimension == 1536
    with pytest.raises(ConfigError, match="local or openai"):
        create_embedder("word2vec", env={})


# -- the OpenAI-compatible embedder ------------------------------------------------

SECRET = "sk-test-SECRET-key-0123456789"


class _Server:
    """A loopback /v1/embeddings endpoint answering what ``reply`` says."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.dimension = 4
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                if owner.status != 200:
                    payload = {"error": {"message": f"failure for {SECRET}", "type": "x"}}
                else:
                    data = [
                        {"object": "embedding", "index": i, "embedding": [float(i + 1)] * owner.dimension}
                        for i in range(len(body["input"]))
                    ]
                    payload = {"object": "list", "data": data[::-1], "model": body["model"], "usage": {}}
                raw = json.dumps(payload).encode()
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.httpd.shutdown()


def _env(server: _Server, **extra: str) -> dict[str, str]:
    return {
        "OPENAI_EMBEDDING_MODEL": "local-embed",
        "OPENAI_EMBEDDING_BASE_URL": server.url,
        "OPENAI_EMBEDDING_API_KEY": SECRET,
        "OPENAI_EMBEDDING_DIMENSIONS": "4",
        **extra,
    }


async def test_openai_embedder_uses_its_variables_and_normalises(server: _Server) -> None:
    embedder = OpenAIEmbedder(env=_env(server))
    assert embedder.dimension == 4 and "local-embed" in embedder.name
    vectors = await embedder.embed(["a", "b"])
    assert vectors[0] == pytest.approx([0.5] * 4) and vectors[1] == pytest.approx([0.5] * 4)
    [request] = server.requests
    assert request["input"] == ["a", "b"] and request["model"] == "local-embed"
    assert request["auth"] == f"Bearer {SECRET}" and "dimensions" not in request


async def test_openai_embedder_falls_back_to_the_chat_variables(server: _Server) -> None:
    env = {
        "OPENAI_BASE_URL": server.url,
        "OPENAI_API_KEY": "chat-key",
        "OPENAI_EMBEDDING_MODEL": "all-minilm",
    }
    embedder = OpenAIEmbedder(env=env)
    server.dimension = 384
    assert embedder.dimension == 384
    await embedder.embed(["x"])
    assert server.requests[0]["auth"] == "Bearer chat-key"


@pytest.mark.parametrize(
    ("status", "expected"),
    [(401, "rejected the API key"), (404, "not found"), (429, "rate limiting"), (500, "HTTP 500")],
)
async def test_openai_errors_are_one_sentence_without_the_key(
    server: _Server, status: int, expected: str
) -> None:
    server.status = status
    embedder = OpenAIEmbedder(env=_env(server))
    embedder._client = embedder._get_client().with_options(max_retries=0)
    with pytest.raises(BackendError) as raised:
        await embedder.embed(["x"])
    message = str(raised.value)
    assert expected in message and SECRET not in message and "\n" not in message


async def test_openai_unreachable_and_missing_settings() -> None:
    embedder = OpenAIEmbedder(
        env={"OPENAI_EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": SECRET}, timeout=2
    )
    embedder._client = embedder._get_client().with_options(max_retries=0)
    with pytest.raises(BackendError, match="cannot reach the embedding service") as raised:
        await embedder.embed(["x"])
    assert SECRET not in str(raised.value)
    with pytest.raises(ConfigError, match="OPENAI_EMBEDDING_API_KEY"):
        await OpenAIEmbedder(env={}).embed(["x"])
    with pytest.raises(ConfigError, match="OPENAI_EMBEDDING_DIMENSIONS"):
        OpenAIEmbedder(env={"OPENAI_EMBEDDING_MODEL": "mystery-model", "OPENAI_API_KEY": "k"})


async def test_a_wrong_sized_answer_is_a_clear_error(server: _Server) -> None:
    server.dimension = 3
    with pytest.raises(BackendError, match="returned 3-dimensional vectors, not the configured 4"):
        await OpenAIEmbedder(env=_env(server)).embed(["x"])


# -- the service -----------------------------------------------------------------


class _FailingEmbedder:
    name = "failing"
    dimension = 384

    def __init__(self) -> None:
        self.fail = False

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail:
            raise BackendError("the embedding service is down")
        return [[1.0] + [0.0] * 383 for _ in texts]


@pytest.fixture
def sqlitevec_store(tmp_path):
    pytest.importorskip("sqlite_vec", reason="pip install 'memchat[sqlitevec]'")
    from backends import create

    return lambda **kw: create("sqlitevec", dsn=f"sqlite:///{tmp_path / 'vec.db'}", **kw)


async def test_an_embedding_failure_changes_nothing(sqlitevec_store) -> None:
    embedder = _FailingEmbedder()
    async with MemoryService(sqlitevec_store(), embedder=embedder) as svc:
        kept = await svc.add(KEY, "User likes coffee")
        embedder.fail = True
        with pytest.raises(BackendError, match="down"):
            await svc.add(KEY, "User likes tea")
        with pytest.raises(BackendError, match="down"):
            await svc.update(KEY, kept.id, "User likes green tea")
        assert [e.memory.text for e in await svc.read(KEY)] == ["User likes coffee"]
        # Deleting and restoring need no embedding.
        await svc.delete(KEY, kept.id)
        assert await svc.count(KEY) == 0


async def test_a_dimension_mismatch_fails_at_open_naming_both(sqlitevec_store) -> None:
    svc = MemoryService(sqlitevec_store(dimension=8), embedder=_FailingEmbedder())
    with pytest.raises(ConfigError, match=r"makes 384-dimensional vectors .* holds 8-dimensional"):
        await svc.add(KEY, "User likes coffee")


async def test_a_vector_store_without_an_embedder_gets_the_offline_default(sqlitevec_store) -> None:
    async with MemoryService(sqlitevec_store()) as svc:
        assert svc.embedder is default_embedder()
        await svc.add(KEY, "User drinks a double espresso every morning")
        [hit] = await svc.vector_search(KEY, "coffee")
        assert 0.3 < hit.score <= 1.0


async def test_non_vector_stores_never_embed() -> None:
    from backends import create

    embedder = _FailingEmbedder()
    embedder.fail = True
    async with MemoryService(create("inmemory"), embedder=embedder) as svc:
        await svc.add(KEY, "User likes coffee")
        assert [h.memory.text for h in await svc.search(KEY, "coffee")] == ["User likes coffee"]
        with pytest.raises(ConfigError, match="no vector index"):
            await svc.vector_search(KEY, "coffee")
