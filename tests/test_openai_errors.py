"""One describer for every OpenAI-compatible failure: the chat model and the
embedder name the problem the same way, each with its own settings."""

from __future__ import annotations

import httpx
import openai
import pytest

from memchat.engine.openai_errors import OpenAIEndpoint, describe_openai_error

KEY = "sk-embed-0123456789abcdef"
URL = "http://127.0.0.1:9/v1"
EMBEDDING = OpenAIEndpoint(
    server=f"the embedding service at {URL}",
    url=f"the embedding service at {URL}",
    model="all-minilm",
    timeout=2,
    key_setting="OPENAI_EMBEDDING_API_KEY",
    url_setting="OPENAI_EMBEDDING_BASE_URL",
    model_setting="OPENAI_EMBEDDING_MODEL",
    secrets=(KEY,),
)


def status_error(status: int, message: str) -> openai.APIStatusError:
    request = httpx.Request("POST", f"{URL}/embeddings")
    response = httpx.Response(status, request=request)
    return openai.APIStatusError(message, response=response, body={"error": {"message": message}})


@pytest.mark.parametrize(
    ("status", "needles"),
    [
        (401, ["API key was rejected by the embedding service", "OPENAI_EMBEDDING_API_KEY"]),
        (404, ["model 'all-minilm' not found", "OPENAI_EMBEDDING_MODEL", "OPENAI_EMBEDDING_BASE_URL"]),
        (429, ["rate limited (429) by the embedding service", "wait and try again"]),
        (500, ["server error 500 from the embedding service", "try again later"]),
        (400, ["the embedding service at", "rejected the request (400)", "input too long"]),
    ],
)
def test_a_status_error_is_one_sentence_with_the_fix_and_without_the_key(status, needles) -> None:
    message = describe_openai_error(status_error(status, f"input too long for key {KEY}"), EMBEDDING)
    assert all(needle in message for needle in needles), message
    assert KEY not in message and KEY[:12] not in message and "\n" not in message
    assert "after" not in message  # the SDK retried: no count to give


def test_unreachable_and_slow_servers_name_the_setting_to_check() -> None:
    request = httpx.Request("POST", f"{URL}/embeddings")
    refused = openai.APIConnectionError(request=request)
    refused.__cause__ = ConnectionRefusedError("connect call failed")
    assert describe_openai_error(refused, EMBEDDING) == (
        f"cannot reach the embedding service at {URL} (connection refused) — "
        "check OPENAI_EMBEDDING_BASE_URL and that the server is up"
    )
    slow = openai.APITimeoutError(request=request)
    assert describe_openai_error(slow, EMBEDDING).startswith(
        f"no answer from the embedding service at {URL} within 2s"
    )


def test_the_chat_model_counts_its_own_retries() -> None:
    chat = OpenAIEndpoint(server="api.example.com", url="https://api.example.com/v1", model="m", timeout=60)
    message = describe_openai_error(status_error(503, "overloaded"), chat, retries=1)
    assert message == "server error 503 from api.example.com after 1 retry (overloaded) — try again later"
    no_key = OpenAIEndpoint(server="api.example.com", url="", model="m", timeout=60, key_set=False)
    assert "none is set — set OPENAI_API_KEY" in describe_openai_error(status_error(401, "no key"), no_key)
