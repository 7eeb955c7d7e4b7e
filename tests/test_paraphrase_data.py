"""The paraphrase sets (benchmarks/data/paraphrase*.json) keep their own rule: a
question shares no content word with the memory that answers it. A set that
broke it would measure keyword matching, not recall by meaning."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _benchmark():
    spec = importlib.util.spec_from_file_location("paraphrase", ROOT / "benchmarks" / "paraphrase.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("paraphrase", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


SETS = sorted(path.name for path in (ROOT / "benchmarks" / "data").glob("paraphrase*.json"))


@pytest.mark.parametrize("name", SETS)
def test_no_question_shares_a_content_word_with_its_answer(name: str) -> None:
    paraphrase = _benchmark()
    data = paraphrase.load(ROOT / "benchmarks" / "data" / name)
    assert paraphrase.check(data) == []
    groups = {group: sum(q.group == group for q in data.questions) for group in ("en", "zh", "cross")}
    # The floor for such a set: 30 memories, 60 questions, English and Chinese.
    assert sum(len(memories) for memories in data.memories.values()) >= 30
    assert len(data.questions) >= 60 and min(groups.values()) > 0, groups
