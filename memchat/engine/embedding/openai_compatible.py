"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..model import BackendError, ConfigError

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
#: Output sizes of well-known models (others need ``dimension``/OPENAI_EMBEDDING_DIMENSIONS).
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "bge-m3": 1024,
}
ENV_DIMENSIONS = "OPENAI_EMBEDDING_DIMENSIONS"
_MAX_INPUTS_PER_CALL = 256


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible service (OpenAI, Ollama, vLLM, …)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        dimension: int | None = None,
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        client: Any = None,
    ) -> None:
        env = os.environ if env is None else env
        self.model = model or env.get("OPENAI_EMBEDDING_MODEL") or DEFAULT_OPENAI_MODEL
        own_key = env.get("OPENAI_EMBEDDING_API_KEY")
        self._key_from = "OPENAI_EMBEDDING_API_KEY" if own_key else "OPENAI_API_KEY"
        self._api_key = api_key or env.get("OPENAI_EMBEDDING_API_KEY") or env.get("OPENAI_API_KEY") or ""
        self.base_url = base_url or env.get("OPENAI_EMBEDDING_BASE_URL") or env.get("OPENAI_BASE_URL") or None
        self.timeout = timeout
        explicit = dimension
        if explicit is None and env.get(ENV_DIMENSIONS):
            try:
                explicit = int(env[ENV_DIMENSIONS])
            except ValueError:
                raise ConfigError(f"{ENV_DIMENSIONS} must be a whole number such as 1536") from None
        if explicit is not None and explicit <= 0:
            raise ConfigError("the embedding dimension must be a positive number")
        known = KNOWN_DIMENSIONS.get(self.model.split("/")[-1].split(":")[0])
        if explicit is None and known is None:
            raise ConfigError(
                f"the size of the vectors of embedding model {self.model!r} is not known: "
                f"set {ENV_DIMENSIONS} (for example 1024)"
            )
        self.dimension = int(explicit if explicit is not None else known)  # type: ignore[arg-type]
        #: Ask the service to shorten vectors (text-embedding-3 models support it).
        self._request_dimensions = (
            explicit is not None and explicit != known and self.model.startswith("text-embedding-3")
        )
        self.name = f"{self.model} (OpenAI-compatible)"
        self.identity = f"openai:{self.model}/{self.dimension}"
        self._client = client

    def _get_client(self) -> Any:
        if self._client is None:
            if not self._api_key:
                raise ConfigError(
                    "no API key for the embedding service: set OPENAI_EMBEDDING_API_KEY (or OPENAI_API_KEY)"
                )
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=2
            )
        return self._client

    def _where(self) -> str:
        return self.base_url or "api.openai.com"

    def _scrub(self, text: str) -> str:
        """``text`` without the key (or any piece of it of 8+ characters) or anything key-like."""
        from ..secrets import redact_keys

        return redact_keys(text, [self._api_key])

    def _explain(self, exc: Exception) -> str:
        from ..openai_errors import OpenAIEndpoint, describe_openai_error

        where = f"the embedding service at {self._where()}"
        endpoint = OpenAIEndpoint(
            server=where,
            url=where,
            model=self.model,
            timeout=self.timeout,
            key_setting=self._key_from,
            url_setting="OPENAI_EMBEDDING_BASE_URL",
            model_setting="OPENAI_EMBEDDING_MODEL",
            secrets=[self._api_key],
        )
        return describe_openai_error(exc, endpoint)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import openai

        client = self._get_client()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _MAX_INPUTS_PER_CALL):
            chunk = list(texts[start : start + _MAX_INPUTS_PER_CALL])
            kwargs: dict[str, Any] = {"model": self.model, "input": chunk}
            if self._request_dimensions:
                kwargs["dimensions"] = self.dimension
            try:
                response = await client.embeddings.create(**kwargs)
            except openai.OpenAIError as exc:
                raise BackendError(self._scrub(self._explain(exc))) from exc
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(chunk):
                raise BackendError(
                    f"the embedding service at {self._where()} returned {len(data)} vectors "
                    f"for {len(chunk)} texts"
                )
            for item in data:
                vector = [float(x) for x in item.embedding]
                if len(vector) != self.dimension:
                    raise BackendError(
                        f"embedding model {self.model!r} returned {len(vector)}-dimensional vectors, "
                        f"not the configured {self.dimension}: set {ENV_DIMENSIONS}={len(vector)}"
                    )
                norm = math.sqrt(sum(x * x for x in vector)) or 1.0
                vectors.append([x / norm for x in vector])
        return vectors
