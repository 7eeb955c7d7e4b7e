"""Property tests of the six memory tools on every backend.

``Tool.call(arguments, key)`` never raises, whatever the arguments (any text,
random JSON, deep nesting, huge numbers, invalid UTF-8 bytes, non-objects,
arbitrary Python objects) and whatever the session key: it returns one JSON
object, valid UTF-8, that is either a result or ``{"error": "..."}``. A call
for user A never changes user B, even with B's memory IDs in its arguments.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memchat.engine import UserKey
from memchat.engine.tools import ALL_TOOLS, ToolSettings

from .helpers import seed_other_user
from .strategies import any_key_part, any_text, given_settings, good_text

PARAMETERS = [
    "memory",
    "memory_id",
    "topics",
    "memory_kind",
    "event_time",
    "participants",
    "location",
    "query",
    "kind",
    "time_after",
    "time_before",
    "order_by_event_time",
    "limit",
    "reason",
    "app_name",
    "user_id",
]

#: Any JSON value (strings from the hostile alphabet, floats without NaN: json.dumps refuses them).
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        any_text,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

NASTY_TEXTS = [
    "[" * 100_000,
    "{" * 100_000,
    '{"a":' * 50_000,
    "[" * 63 + "]" * 63,
    '{"memory": "' + "[" * 100_000 + '"}',
    "1" * 5_000,
    '{"limit": ' + "9" * 5_000 + "}",
    '{"limit": 1e400}',
    '{"limit": -1e400}',
    '{"limit": NaN}',
    '{"limit": Infinity}',
    '{"limit": 1e308, "memory": 1e-400}',
    '{"memory": "\\ud800"}',
    '{"memory": "a\\u0000b"}',
    '{"memory_id": "\\u0000"}',
    '{"memory": "x", "memory": "y"}',
    '{"memory": "' + "x" * 2_000_000 + '"}',
    "null",
    "true",
    "42",
    '"a string"',
    "[]",
    "[{}]",
    "{}",
    "{",
    "}",
    '{"memory": }',
    "\ufeff{}",
    " \n\t",
]


def arguments_for(other_ids: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Arguments as a model might send them, and as nobody should."""
    field_values = st.one_of(json_values, other_ids, good_text, st.lists(any_text, max_size=3))
    objects = st.dictionaries(st.sampled_from(PARAMETERS), field_values, max_size=6)
    return st.one_of(
        objects.map(lambda o: json.dumps(o, ensure_ascii=False)),  # may hold lone surrogates
        objects.map(lambda o: json.dumps(o).encode()),
        objects,
        json_values.map(json.dumps),
        any_text,
        st.sampled_from(NASTY_TEXTS),
        st.binary(max_size=40),
        st.sampled_from([b"\xff\xfe{}", b'{"memory": "\xc3\x28"}', b"\xed\xa0\x80", bytearray(b"{}")]),
        st.one_of(st.none(), st.integers(), st.floats(), st.lists(st.integers(), max_size=3)),
        st.sampled_from([object(), math.nan, {"memory": object()}, {"topics": {1, 2}}, {1: "x"}]),
    )


def check_result(content: Any, is_error: bool) -> dict[str, Any]:
    assert isinstance(content, str), f"the tool returned {type(content).__name__}, not a JSON string"
    content.encode("utf-8")  # sendable: no lone surrogate
    value = json.loads(content, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert isinstance(value, dict), f"the tool returned JSON {type(value).__name__}, not an object"
    if is_error:
        assert set(value) == {"error"} and isinstance(value["error"], str) and value["error"].strip()
    else:
        assert "error" not in value
    return value


def test_a_tool_call_never_raises_and_never_touches_another_user(rig) -> None:
    svc = rig.service(soft_delete=True, tool_settings=ToolSettings(enabled=dict.fromkeys(ALL_TOOLS, True)))
    tools = {tool.name: tool for tool in svc.tools()}
    assert sorted(tools) == sorted(ALL_TOOLS)

    @given_settings(weight=3)
    @given(data=st.data(), name=st.sampled_from(sorted(ALL_TOOLS)), mine=st.booleans())
    def check(data: st.DataObject, name: str, mine: bool) -> None:
        other = rig.run(seed_other_user(svc))
        me = UserKey(other.key.app, f"alice-{uuid.uuid4().hex[:8]}")
        key = me if mine else data.draw(other.keys(any_key_part), label="key")
        arguments = data.draw(arguments_for(other.ids_strategy()), label="arguments")
        tool = tools[name]
        try:
            result = rig.run(tool.run(arguments, key))
            content = rig.run(tool.call(arguments, key))
        except BaseException as exc:
            raise AssertionError(f"{name}.call raised {type(exc).__name__}: {exc!r}") from exc
        check_result(result.content, result.is_error)
        check_result(content, json.loads(content).keys() == {"error"})
        rig.run(other.check(svc))

    check()
