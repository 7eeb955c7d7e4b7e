"""Text that is safe to show on a terminal.

Memories are written by a model (and tool arguments, results and answers
quote them), so anything shown to a person may hold terminal control
sequences: ``ESC ] 0 ; title BEL`` retitles the window, ``ESC [ 2 J`` clears
the screen, a C1 ``CSI`` (U+009B) does the same on some terminals, and bidi
overrides make text read differently from what it is. A terminal acts only
on the control characters themselves (ESC, the other C0 controls, DEL and the
C1 controls), so replacing each of them with a visible stand-in neutralises
every sequence they introduce: ``"\\x1b]0;pwned\\x07"`` is shown as
``"␛]0;pwned␇"``, the person sees that something was there, and nothing acts.

- C0 controls (except newline and tab), DEL → their Control Pictures (``␛``, ``␇``, ``␡``…);
- C1 controls (U+0080–U+009F) and the bidi embedding, override and isolate
  controls (U+202A–U+202E, U+2066–U+2069) → an escape written out, ``\\x9b``, ``\\u202e``;
- lone surrogates (undecodable bytes) → U+FFFD;
- everything else (CJK, emoji, punctuation, combining marks) is kept.

:func:`printable` keeps newlines (multi-line contexts); :func:`one_line`
also shows them as ``⏎`` (list rows, notifications). :func:`safe_json` makes
``json.dumps`` output safe without changing what it decodes to.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Shown for a newline in one-line contexts.
NEWLINE_MARK = "⏎"

BIDI_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))


def _table(single_line: bool) -> dict[int, str]:
    table: dict[int, str] = {code: chr(0x2400 + code) for code in range(0x20)}  # ␀ … ␟
    del table[ord("\t")]
    if single_line:
        table[ord("\n")] = NEWLINE_MARK
        table[0x2028] = NEWLINE_MARK  # line separator
        table[0x2029] = NEWLINE_MARK  # paragraph separator
    else:
        del table[ord("\n")]
    table[0x7F] = "\u2421"  # ␡
    table.update({code: f"\\x{code:02x}" for code in range(0x80, 0xA0)})
    table.update({code: f"\\u{code:04x}" for code in BIDI_CONTROLS})
    table.update({code: "\ufffd" for code in range(0xD800, 0xE000)})
    return table


_MULTI_LINE = _table(single_line=False)
_SINGLE_LINE = _table(single_line=True)

#: Characters that may appear raw in a JSON string but must not reach a terminal.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str, *, single_line: bool = False) -> str:
    """``text`` with every control and escape sequence made visible and inert."""
    return str(text).translate(_SINGLE_LINE if single_line else _MULTI_LINE)


def one_line(text: str) -> str:
    """:func:`printable`, with newlines shown as ``⏎`` (one row on screen)."""
    return printable(text, single_line=True)


def safe_json(value: Any, **dumps_options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, …)`` that is safe on a
    terminal: besides the C0 controls JSON always escapes, DEL, the C1
    controls, U+2028/U+2029, bidi controls and lone surrogates are written as
    ``\\uXXXX`` escapes. The text still decodes to exactly ``value``."""
    dumps_options.setdefault("ensure_ascii", False)
    return escape_json_text(json.dumps(value, **dumps_options))


def escape_json_text(text: str) -> str:
    """Escape the terminal-unsafe characters inside a JSON document (they can
    only occur inside its strings, where ``\\uXXXX`` means the same)."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
