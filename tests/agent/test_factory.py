"""What the app factory builds from Settings: embedders for vector backends."""

from __future__ import annotations

from memchat.agent.factory import create_service
from memchat.engine.embedding import LocalEmbedder, OpenAIEmbedder
from memchat.settings import Settings


def service_for(tmp_path, memory: str, env: dict[str, str]):
    settings = Settings.load({"memory": memory}, environ=env, cwd=tmp_path)
    return create_service(settings)


def test_vector_backends_embed_offline_by_default(tmp_path) -> None:
    svc = service_for(tmp_path, "sqlitevec", {"SQLITEVEC_MEMORY_DSN": str(tmp_path / "v.db")})
    assert isinstance(svc.embedder, LocalEmbedder) and svc.store.dimension == 384


def test_the_references_per_backend_embedder_variable_picks_a_remote_model(tmp_path) -> None:
    env = {
        "SQLITEVEC_MEMORY_DSN": str(tmp_path / "v.db"),
        "SQLITEVEC_EMBEDDER_MODEL": "text-embedding-3-small",
        "OPENAI_API_KEY": "sk-test",
    }
    svc = service_for(tmp_path, "sqlitevec", env)
    assert isinstance(svc.embedder, OpenAIEmbedder) and svc.embedder.model == "text-embedding-3-small"
    # The index is sized for the remote model, so the dimension check passes.
    assert svc.store.dimension == svc.embedder.dimension == 1536


def test_chroma_uses_the_chroma_prefix(tmp_path) -> None:
    env = {
        "CHROMA_PATH": str(tmp_path / "chroma"),
        "CHROMA_EMBEDDER_MODEL": "text-embedding-3-large",
        "OPENAI_API_KEY": "sk-test",
    }
    svc = service_for(tmp_path, "chromadb", env)
    assert isinstance(svc.embedder, OpenAIEmbedder) and svc.embedder.model == "text-embedding-3-large"


def test_keyword_backends_get_no_embedder(tmp_path) -> None:
    svc = service_for(tmp_path, "sqlite", {"SQLITE_MEMORY_DSN": str(tmp_path / "k.db")})
    assert not svc.is_vector_store


def test_the_timeout_setting_reaches_the_store(tmp_path) -> None:
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "t.db"), "MEMCHAT_TIMEOUT": "2.5s"}
    assert service_for(tmp_path, "sqlite", env).store.timeout == 2.5
    env = {"REDIS_ADDR": "127.0.0.1:6379", "MEMCHAT_TIMEOUT": "750ms"}
    assert service_for(tmp_path, "redis", env).store.timeout == 0.75
    assert service_for(tmp_path, "inmemory", {}).store.timeout == 10.0
