"""Keep secrets (API keys, tokens, DSN passwords) out of what people read.

A server that rejects a key often echoes part of it ("Incorrect API key
provided: sk-abc…xyz"), and a driver may quote a connection string. ``redact``
masks the whole secret and every piece of it of ``MIN_FRAGMENT`` (8) or more
characters, wherever it appears in a message; ``redact_keys`` also masks
whatever looks like an API key (a server may quote a key we never had).
Every message that could hold a secret goes through one of these two.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["KEY_LIKE", "MASK", "MIN_FRAGMENT", "MIN_SECRET", "redact", "redact_keys"]

MASK = "***"
#: The shortest piece of a secret that is masked on its own.
MIN_FRAGMENT = 8
#: Shorter secrets are left alone: masking every "ab" would garble the text and hide nothing.
MIN_SECRET = 4
#: What an API key looks like (``sk-…``, ``pk-…``, ``rk-…``, ``key-…``).
KEY_LIKE = re.compile(r"\b(?:sk|pk|rk|key)-[A-Za-z0-9_*\-]{3,}", re.IGNORECASE)


def redact(text: str, secrets: Iterable[str | None], min_fragment: int = MIN_FRAGMENT) -> str:
    """``text`` with each secret, and any substring of one that is at least
    ``min_fragment`` characters long, replaced by ``***`` (overlapping or
    adjacent pieces become one ``***``). Linear in the text per secret: every
    ``min_fragment``-character window of the text that occurs in a secret is
    marked, and the marked spans are merged."""
    if not text:
        return text
    marked = bytearray(len(text))
    for secret in secrets:
        if not secret or len(secret) < MIN_SECRET:
            continue
        if len(secret) <= min_fragment:
            start = text.find(secret)
            while start >= 0:
                marked[start : start + len(secret)] = b"\x01" * len(secret)
                start = text.find(secret, start + 1)
            continue
        windows = {secret[i : i + min_fragment] for i in range(len(secret) - min_fragment + 1)}
        for i in range(len(text) - min_fragment + 1):
            if text[i : i + min_fragment] in windows:
                marked[i : i + min_fragment] = b"\x01" * min_fragment
    if not any(marked):
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        if marked[i]:
            out.append(MASK)
            while i < len(text) and marked[i]:
                i += 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def redact_keys(text: str, secrets: Iterable[str | None]) -> str:
    """``redact(text, secrets)``, and every key-like word (``KEY_LIKE``) masked too."""
    return KEY_LIKE.sub(MASK, redact(text, secrets))
