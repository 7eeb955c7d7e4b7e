"""memchat.safe_text: text from a model never drives the terminal."""

from __future__ import annotations

import json
import re

import pytest

from memchat.safe_text import escape_json_text, one_line, printable, safe_json

#: What a terminal acts on: C0 controls (but newline and tab), DEL, C1 controls.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")

HOSTILE = [
    "\x1b]0;pwned\x07",  # OSC: set the window title, ended by BEL
    "\x1b]52;c;aGk=\x1b\\",  # OSC 52 (clipboard), ended by ST
    "\x1b[2J\x1b[H",  # CSI: clear the screen, home
    "\x9b31m",  # C1 CSI
    "\x9d0;title\x9c",  # C1 OSC … C1 ST
    "\x1bP1$r\x1b\\",  # DCS
    "a\rb\x08c\x7f",  # carriage return, backspace, DEL
    "\u202egnp.exe",  # right-to-left override
    "\u2066isolate\u2069",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_no_control_or_bidi_character_survives(text: str) -> None:
    for shown in (printable(text), one_line(text)):
        assert not RAW_CONTROL.search(shown), repr(shown)
        assert not BIDI.search(shown), repr(shown)
        assert "\x1b" not in shown


def test_controls_are_made_visible_not_dropped() -> None:
    assert printable("\x1b]0;pwned\x07") == "␛]0;pwned␇"
    assert printable("\x1b[2J") == "␛[2J"
    assert printable("\x9b31m") == "\\x9b31m"
    assert printable("\u202eabc") == "\\u202eabc"
    assert printable("a\rb\x7f\x00") == "a␍b␡␀"


def test_ordinary_text_is_unchanged() -> None:
    text = "张三喜欢 Go 语言编程 😀 café — “quoted” [bold]x[/bold] pip install 'memchat[redis]'\tend\nnext"
    assert printable(text) == text


def test_one_line_shows_newlines() -> None:
    assert one_line("first\nsecond\u2028third") == "first⏎second⏎third"
    assert "\n" not in one_line("a\r\nb")
    assert printable("a\nb") == "a\nb"


def test_lone_surrogates_become_replacement_characters() -> None:
    assert printable("I like \udcff tea") == "I like \ufffd tea"
    printable("\ud800").encode("utf-8")  # encodable now


def test_safe_json_stays_faithful_and_inert() -> None:
    value = {"memory": "".join(HOSTILE) + " 你好 \u2028 \udcff", "topics": ["[bold]"]}
    text = safe_json(value, indent=2)
    assert json.loads(text) == value
    assert not RAW_CONTROL.search(text) and not BIDI.search(text)
    assert "\u2028" not in text and "\x1b" not in text
    assert "你好" in text  # not ASCII-escaped
    text.encode("utf-8")  # no lone surrogate left


def test_escape_json_text_only_touches_unsafe_characters() -> None:
    assert escape_json_text('{"a": "b\x9bc"}') == '{"a": "b\\u009bc"}'
    assert escape_json_text('{"a": "ü"}') == '{"a": "ü"}'
