"""The offline model: deterministic, rule-based, no key, no network.

It exists so that memchat, its demo and its tests work on a fresh machine. It
is not a language model, and says so: it recognises statements about the user
in English and Chinese by rule (likes, diets and allergies, instruments and
hobbies, home, work, family, "remember that…"; "I'm vegetarian and I play the
cello" is two memories) and stores them with ``memory_add``; a change ("I
don't work at a bakery anymore, I work at a library now", "I moved to Munich",
"我搬到上海了") searches for the old memory and rewrites it with
``memory_update``; a question about one topic ("what's my job?", "我对什么过敏？")
becomes a ``memory_search`` for that topic, answered with the memories that
match it; "what do you know about me?" loads them all; "forget …" searches,
then deletes when ``memory_delete`` is enabled. Anything else gets a short
explanation of what it can do and how to use a real model. Replies stream at
a real model's pace.

Modules: ``rules`` (the word lists and patterns), ``language`` (clauses, third
person, pieces), ``understand`` (what a message says), ``model`` (the
ChatModel), ``phrases`` (what it says).
"""

from __future__ import annotations

from .model import OFFLINE_MODEL_NAME, STREAM_TOKENS_PER_SECOND, OfflineModel
from .understand import Facts, extract_facts, facts_in, question_query, topics_for

__all__ = [
    "OFFLINE_MODEL_NAME",
    "STREAM_TOKENS_PER_SECOND",
    "Facts",
    "OfflineModel",
    "extract_facts",
    "facts_in",
    "question_query",
    "topics_for",
]
