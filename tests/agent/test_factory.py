"""What the app factory builds from Settings: the embedder, the search mode, the notices."""

from __future__ import annotations

from memchat.agent.factory import create_service, embedder_notice
from memchat.engine.embedding import DefaultEmbedder, LocalEmbedder, OpenAIEmbedder
from memchat.settings import Settings


def service_for(tmp_path, memory: str, env: dict[str, str]):
    settings = Settings.load({"memory": memory}, environ=env, cwd=tmp_path)
    return create_service(settings)


def test_vector_backends_embed_offline_by_default(tmp_path) -> None:
    svc = service_for(tmp_path, "sqlitevec", {"SQLITEVEC_MEMORY_DSN": str(tmp_path / "v.db")})
    assert isinstance(svc.embedder, DefaultEmbedder) and svc.store.dimension == 384
    assert svc.search_mode == "hybrid"


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


def test_every_backend_gets_the_embedder_the_settings_choose(tmp_path) -> None:
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "k.db")}
    assert isinstance(service_for(tmp_path, "sqlite", env).embedder, DefaultEmbedder)
    env["MEMCHAT_EMBEDDER"] = "minilm"
    assert isinstance(service_for(tmp_path, "sqlite", env).embedder, LocalEmbedder)
    env = {"OPENAI_EMBEDDING_MODEL": "text-embedding-3-small", "OPENAI_API_KEY": "sk-test"}
    assert isinstance(service_for(tmp_path, "inmemory", env).embedder, OpenAIEmbedder)


def test_the_search_mode_reaches_the_service(tmp_path) -> None:
    settings = Settings.load({"memory": "inmemory", "search": "Keyword"}, environ={}, cwd=tmp_path)
    assert create_service(settings).search_mode == "keyword"
    settings = Settings.load({"memory": "inmemory"}, environ={"MEMCHAT_SEARCH": "semantic"}, cwd=tmp_path)
    assert create_service(settings).search_mode == "semantic"


def test_no_embedder_is_said_in_one_line(tmp_path) -> None:
    settings = Settings.load({"memory": "inmemory"}, environ={"MEMCHAT_EMBEDDER": "none"}, cwd=tmp_path)
    assert embedder_notice(settings) == (
        "memchat: semantic search is off (MEMCHAT_EMBEDDER=none): memories are found by keywords only"
    )
    (tmp_path / "memchat.toml").write_text('[memory]\nembedder = "none"\n', encoding="utf-8")
    settings = Settings.load({"memory": "inmemory"}, environ={}, cwd=tmp_path)
    assert '[memory] embedder = "none" in the config file' in embedder_notice(settings)
    assert embedder_notice(Settings.load({"memory": "inmemory"}, environ={}, cwd=tmp_path / "x")) == ""


def test_no_embedder_means_keyword_search_only(tmp_path) -> None:
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "k.db"), "MEMCHAT_EMBEDDER": "none"}
    svc = service_for(tmp_path, "sqlite", env)
    assert not svc.has_embedder


def test_the_timeout_setting_reaches_the_store(tmp_path) -> None:
    env = {"SQLITE_MEMORY_DSN": str(tmp_path / "t.db"), "MEMCHAT_TIMEOUT": "2.5s"}
    assert service_for(tmp_path, "sqlite", env).store.timeout == 2.5
    env = {"REDIS_ADDR": "127.0.0.1:6379", "MEMCHAT_TIMEOUT": "750ms"}
    assert service_for(tmp_path, "redis", env).store.timeout == 0.75
    assert service_for(tmp_path, "inmemory", {}).store.timeout == 10.0
