"""A bounded JSON loader for text that comes from a model.

``json.loads`` on untrusted text can raise ``RecursionError`` (deep nesting),
a bare ``ValueError`` about integer digits (a 5000-digit number), or spend
unbounded time and memory on huge input. ``load_json`` bounds all three and
always raises one ``JSONInputError`` whose ``reason`` says what is actually
wrong:

- "the text is over N bytes"
- "nesting is deeper than 64 levels" (checked by a cheap scan before parsing,
  brackets inside strings are ignored)
- "a number has more than 4300 digits" (Python's integer conversion limit)
- "NaN is not valid JSON: use a number or null" (also Infinity, -Infinity)
- otherwise the ``json.JSONDecodeError`` message, with its position.

Used by the tools (``tools.parse_arguments``) and by the extractor.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

__all__ = ["DEFAULT_MAX_DEPTH", "JSONInputError", "load_json"]

#: Far deeper than any legitimate tool call or extractor reply (they are 2–4
#: levels deep) and far below the interpreter's recursion limit.
DEFAULT_MAX_DEPTH = 64

# A JSON string, also an unterminated one running to the end of the text, so
# that brackets inside strings never count towards the nesting depth.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class JSONInputError(ValueError):
    """The text is not acceptable JSON; ``reason`` is one short clause."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _too_deep(text: str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than ``limit`` (a cheap scan)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _reject_constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not valid JSON: use a number or null")


def load_json(text: str | bytes, *, max_bytes: int, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse ``text`` as JSON within the bounds; raise ``JSONInputError`` otherwise.

    Never raises anything else for any ``str`` or ``bytes`` input."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_bytes:
            raise JSONInputError(f"the text is over {max_bytes} bytes")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONInputError("the text is not valid UTF-8") from exc
    elif not isinstance(text, str):
        raise JSONInputError(f"expected JSON text, got {type(text).__name__}")
    # A character is 1–4 bytes in UTF-8: only measure exactly when it matters.
    # "surrogatepass" so that a lone surrogate is counted instead of raising.
    if len(text) > max_bytes or (
        len(text) * 4 > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes
    ):
        raise JSONInputError(f"the text is over {max_bytes} bytes")
    if _too_deep(text, max_depth):
        raise JSONInputError(f"nesting is deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except JSONInputError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONInputError(str(exc)) from exc
    except ValueError as exc:
        if "digits" in str(exc):
            limit = sys.get_int_max_str_digits()
            raise JSONInputError(f"a number has more than {limit} digits") from exc
        raise JSONInputError(str(exc) or "the text is not valid JSON") from exc
    except RecursionError as exc:  # not expected after the depth scan; kept as a safety net
        raise JSONInputError("nesting is too deep") from exc
