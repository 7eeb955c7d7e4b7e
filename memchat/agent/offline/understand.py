"""What a message says, by rule: facts about the user, a change of a fact, a
question (and the search query for it), a request to forget."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memchat.engine.search.bridge import MY_RELATION_EN, MY_RELATION_ZH

from . import rules as r
from .language import HAN, clean, is_chinese, split_clauses, third_person, third_person_verb


def topics_for(text: str, base: Sequence[str]) -> list[str]:
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9+#]*", text)}
    topics: list[str] = []
    langs = sorted(w for w in words if w in r.LANGUAGES)
    if langs or "编程" in text or "programming" in words:
        topics += ["programming", *(("go" if w == "golang" else w) for w in langs)]
    for topic, vocabulary in r.TOPIC_WORDS.items():
        if words & vocabulary or any(v in text for v in vocabulary if HAN.search(v)):
            topics.append(topic)
    topics += base
    if "programming" in topics:
        topics.append("technology")
    return list(dict.fromkeys(topics))


@dataclass
class Facts:
    """What one user message says about the user."""

    name: str = ""
    memories: list[tuple[str, list[str]]] = field(default_factory=list)


# -- facts -----------------------------------------------------------------------


def _en_name(clause: str) -> str:
    match = r.EN_NAME.match(clean(clause))
    if not match:
        return ""
    name = clean(match.group(1))
    return "" if name.lower() in r.NATIONALITIES or name.lower() in r.STATES else name


def _zh_name(clause: str) -> str:
    match = r.ZH_NAME.match(clean(clause))
    if not match:
        return ""
    name = clean(match.group(1))
    if clause.startswith("我是") and (
        r.ZH_ROLE_SUFFIX.search(name) or len(name) > 4 or re.match(r"^(?:一|个)", name)
    ):
        return ""  # "我是老师", "我是素食者": a role, not a name
    return name


def _en_fact(clause: str, subject: str) -> tuple[str, list[str]] | None:
    """The memory one English clause states, or None."""
    for pattern, template, base in r.EN_CLAUSES:
        m = pattern.match(clause)
        if not m:
            continue
        groups = [g for g in m.groups() if g is not None]
        if len(groups) == 3:  # my X is/are Y
            x = f"{groups[0]} {groups[1]} {clean(groups[2])}"
        elif len(groups) == 2:  # my favourite X is Y
            x = f"{groups[0]} is {clean(groups[1])}"
        else:
            x = clean(groups[0])
        x = third_person(x, False).removeprefix("User ") if re.search(r"\b(?:my|me|i)\b", x, re.I) else x
        return (template.format(s=subject, x=x), base) if x else None
    words = clause.split()
    if len(words) < 2 or words[0].lower() not in ("i", "i'm", "i've"):
        return None
    lowered = [w.lower() for w in words]
    statement = None
    base = ["personal"]
    if lowered[0] == "i'm" or lowered[:2] == ["i", "am"]:
        rest = words[1:] if lowered[0] == "i'm" else words[2:]
        statement = _state(rest)
        base = ["personal"]
    elif lowered[0] == "i've" or lowered[1] in ("have", "has"):
        had = " ".join(words[1:] if lowered[0] == "i've" else words[2:])
        if lowered[0] == "i've" and had.lower().startswith("been "):
            statement = "User has " + had if _ongoing(had.split()[1:2]) else None
        elif had and not r.NOT_POSSESSIONS.match(had) and lowered[0] != "i've":
            statement = "User has " + had
    else:
        verb_at = 1
        while verb_at < len(lowered) - 1 and lowered[verb_at] in r.ADVERBS:
            verb_at += 1
        verb = lowered[verb_at]
        negated = verb in ("don't", "dont", "never", "can't", "cannot") or lowered[verb_at : verb_at + 2] == [
            "do",
            "not",
        ]
        if negated:
            following = lowered[verb_at + (2 if verb == "do" else 1) :][:1]
            if following and following[0] in r.NEGATABLE_VERBS:
                statement = third_person(clause, False)
        elif verb in r.HABIT_VERBS or (
            verb == "can" and lowered[verb_at + 1 : verb_at + 2] and lowered[verb_at + 1] in r.HABIT_VERBS
        ):
            statement = third_person(clause, False)
            base = ["work"] if verb == "work" else ["location"] if verb in ("live", "grew") else ["habits"]
    if not statement:
        return None
    if subject != "User":
        statement = re.sub(r"^User\b", subject, statement)
    return statement, base


def _state(rest: list[str]) -> str | None:
    """ "I'm <rest>" as a lasting fact ("User is vegetarian"), or None for a moment ("I'm tired")."""
    if not rest:
        return None
    text = clean(" ".join(rest))
    lowered = [w.lower().strip(".,!?") for w in rest]
    first = lowered[0]
    words = set(lowered)
    if first in ("a", "an") and len(rest) > 1 and not r.NOT_ROLES.match(text):
        return "User is " + text
    if words & {"allergic", "intolerant"} or first in r.STATES or first in r.NATIONALITIES:
        return "User is " + text
    if (
        first in ("really", "very", "strictly", "fully", "mostly")
        and len(lowered) > 1
        and lowered[1] in r.STATES
    ):
        return "User is " + text
    if re.fullmatch(r"\d+\s+years?\s+old", text, re.I) or first in ("into", "fluent"):
        return "User is " + text
    if _ongoing(lowered[:1]) and len(rest) > 1:
        return "User is " + third_person(text, False).removeprefix("User ")
    return None


def _ongoing(words: Sequence[str]) -> bool:
    return bool(words) and words[0].lower() in r.ONGOING


def _zh_fact(clause: str, subject: str) -> tuple[str, list[str]] | None:
    for pattern, template, base in r.ZH_CLAUSES:
        m = pattern.match(clause)
        if m:
            # Keep the space before a Latin word: "我喜欢 Go" → "张三喜欢 Go".
            x = m.group(1).rstrip(" .!?,;:。！？，；：、")
            return (template.format(s=subject, x=x), base) if x.strip() else None
    if clause.startswith("我") and r.ZH_FACT_LEADS.match(clause[1:]):
        rest = clause[1:]
        base = (
            ["work"]
            if "工作" in rest or "上班" in rest
            else ["location"]
            if rest.startswith(("住", "来自"))
            else ["personal"]
        )
        return subject + clean(rest), base
    return None


def extract_facts(text: str) -> Facts:
    """Statements about the user in one message (English or Chinese)."""
    chinese = is_chinese(text)
    facts = Facts()
    clauses = split_clauses(r.GREETING.sub("", text.strip()))
    for clause in clauses:
        name = _zh_name(clause) if chinese else _en_name(clause)
        if name:
            facts.name = name
    subject = facts.name or ("用户" if chinese else "User")
    for clause in clauses:
        clause = clean(clause)
        if _zh_name(clause) if chinese else _en_name(clause):
            continue
        fact = _zh_fact(clause, subject) if chinese else _en_fact(clause, subject)
        if fact:
            memory, base = fact
            facts.memories.append((memory, topics_for(memory, base)))
    if facts.name and not (chinese and any(facts.name in m for m, _ in facts.memories)):
        name_memory = f"用户名叫{facts.name}" if chinese else f"User's name is {facts.name}"
        facts.memories.insert(0, (name_memory, ["identity"]))
    return facts


def remembered(text: str) -> tuple[str, list[str]] | None:
    """ "remember that …" / "记住…": the memory, in the third person."""
    chinese = is_chinese(text)
    match = (r.ZH_REMEMBER if chinese else r.EN_REMEMBER).match(text.strip())
    if not match:
        return None
    memory = third_person(match.group(1), chinese)
    return memory, topics_for(memory, ["notes"])


def facts_in(text: str) -> list[tuple[str, list[str]]]:
    """Every (memory, topics) a message states, "remember that …" included: what the
    rule-based background extractor stores."""
    note = remembered(text)
    return [note] if note else extract_facts(text).memories


# -- changes ---------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """A fact that no longer holds (``old``, the search query for it) and what holds
    now (``new``, a memory to store in its place)."""

    old: str
    new: str
    topics: list[str]


def parse_change(text: str) -> Change | None:
    body = clean(r.GREETING.sub("", text.strip()))
    if is_chinese(body):
        return _zh_change(body)
    moved = r.EN_MOVED.match(body)
    if moved:
        new = f"User lives in {clean(moved.group('place'))}"
        return Change("lives", new, topics_for(new, ["location"]))
    if r.EN_JOB_CHANGE.search(body):
        work = re.search(r"\bi\s+(?:now\s+)?work\s+.+$", body, re.I)
        if work:
            new = third_person(re.sub(r"\s+now$", "", work.group(0), flags=re.I), False)
            return Change("works", new, topics_for(new, ["work"]))
    for pattern in r.EN_CHANGES:
        m = pattern.match(body)
        if not m or not r.EN_CHANGE_MARKER.search(body):
            continue  # "I'm not sure", "I don't know, I think so": no change of a fact
        parts = m.groupdict()
        if parts.get("old_state"):
            state = clean(parts["old_state"])
            new = f"User is no longer {state}"
            return Change(f"is {state}", new, topics_for(new, ["personal"]))
        if parts.get("gerund"):
            verb, _, rest = clean(parts["gerund"]).partition(" ")
            base = _verb_of_gerund(verb)
            old = third_person(f"I {base} {rest}".strip(), False).removeprefix("User ")
            new = f"User no longer {old}"
            return Change(old, new, topics_for(new, ["habits"]))
        stopped = parts.get("stop1") or parts.get("stop2")
        if stopped:
            old = third_person(f"I {clean(stopped)}", False).removeprefix("User ")
            new = f"User no longer {old}"
            return Change(old, new, topics_for(new, ["habits"]))
        old_text = re.sub(r"\s+any\s*more$", "", clean(parts["old"]), flags=re.I)
        old = third_person(f"I {old_text}", False).removeprefix("User ")
        new = third_person(clean(parts["new"]), False)
        return Change(old, new, topics_for(new, ["personal"]))
    return None


def _verb_of_gerund(gerund: str) -> str:
    """playing → play, running → run, practicing → practice (by the habit verbs)."""
    stem = gerund.lower().removesuffix("ing")
    for candidate in (stem, stem + "e", stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else ""):
        if candidate in r.HABIT_VERBS:
            return candidate
    return stem


def _zh_change(body: str) -> Change | None:
    moved = r.ZH_MOVED.match(body)
    if moved:
        new = f"用户住在{clean(moved.group('place'))}"
        return Change("住", new, topics_for(new, ["location"]))
    for pattern in r.ZH_CHANGES:
        m = pattern.match(body)
        if not m:
            continue
        old = clean(m.group("old"))
        later = clean(m.group("new") or "")
        if later:
            moved = r.ZH_MOVED.match(later)
            new = f"用户住在{clean(moved.group('place'))}" if moved else "用户" + later.removeprefix("我")
        else:
            new = f"用户不再{old}"
        return Change(old, new, topics_for(new, ["personal"]))
    return None


def matching_hit(change: Change, hits: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The stored memory a change replaces: the best hit sharing a content word with the old fact."""
    return next((hit for hit in hits if shares_words(change.old, str(hit.get("memory", "")))), None)


# -- questions and forgetting ----------------------------------------------------

_STOP = frozenset({"user", "the", "a", "an", "and", "or", "of", "to", "in", "on", "at", "is", "are", "was",
                   "has", "for", "with", "their", "they", "them"})  # fmt: skip


def keywords(text: str) -> set[str]:
    """English content words by their first five letters ("allergies" ~ "allergic",
    "lives" ~ "live")."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in _STOP}


def shares_words(query: str, text: str) -> bool:
    """Whether ``text`` has a content word of ``query``: an English word (by its first five
    letters), or a Chinese character pair (a single character when the query has one)."""
    if keywords(query) & keywords(text):
        return True
    text = text.replace("用户", "")
    for run in re.findall(r"[\u3400-\u9fff]+", query.replace("用户", " ")):
        pairs = {run[i : i + 2] for i in range(len(run) - 1)} or {run}
        if any(pair in text for pair in pairs):
            return True
    return False


def _question_content(text: str, chinese: bool) -> str:
    """The question minus its filler, in the words the memories are written in, plus the
    words memories use for its topic: "What's my job?" → "job works", "Where do I live?"
    → "lives", "我喜欢什么?" → "喜欢". "" when nothing but pronouns is left ("who am I?")."""
    punctuation = " \t\n?？!！.。,，;；:：、\"'“”‘’()（）"
    if chinese:
        body = r.ZH_FRAME.sub("", text.strip(punctuation))
        # "我对象", "我的姐姐" stay whole: the search finds who that is (engine/search/bridge.py).
        kept_relations = MY_RELATION_ZH.findall(body)
        body = MY_RELATION_ZH.sub("\0", body)
        body = r.ZH_FILLER.sub("", body).strip(punctuation)
        for relation in kept_relations:
            body = body.replace("\0", f"我{relation}", 1)
        trimmed = body.strip(r.ZH_EDGES).strip(punctuation)
        body = re.sub(r"\s+", " ", trimmed if len(trimmed) >= 2 else body)
        extra = [words for topic, words in r.ZH_QUESTION_TOPICS.items() if topic in body]
        return " ".join(dict.fromkeys([body, *" ".join(extra).split()])) if body else ""
    words = [w.strip(punctuation) for w in text.split()]
    words = [w for w in words if w]
    kept: list[str] = []
    for i, word in enumerate(words):
        lower = word.lower().replace("’", "'")
        if lower == "my" and MY_RELATION_EN.match(" ".join(words[i : i + 3])):
            kept.append(word)  # "my sister": the search finds who that is (engine/search/bridge.py)
            continue
        if lower in r.EN_FILLER or lower in r.PRONOUNS:
            continue
        lower = lower.removesuffix("'s")
        # "do I like" → "likes": the verb as a memory about the user has it.
        after_do_i = i >= 2 and words[i - 1].lower() == "i" and words[i - 2].lower() == "do"
        kept.append(third_person_verb(word) if after_do_i else word.removesuffix("'s").removesuffix("’s"))
    extra = [r.EN_QUESTION_TOPICS[w.lower()] for w in kept if w.lower() in r.EN_QUESTION_TOPICS]
    return " ".join(dict.fromkeys([*kept, *" ".join(extra).split()]))


def question_query(text: str) -> str | None:
    """The search query for a question about the user ("" = load recent memories),
    or None when ``text`` is not such a question."""
    chinese = is_chinese(text)
    stripped = text.strip()
    if chinese:
        about = r.ZH_REQUEST.sub("", stripped)
        asks = stripped.endswith(("?", "？")) or bool(r.ZH_ASKS.search(stripped))
        if not asks or "我" not in about:
            return None
        if r.ZH_LOAD.search(stripped):
            return ""
        return _question_content(stripped, True)
    asks = stripped.endswith("?") or bool(r.EN_ASKS.search(stripped))
    if not asks or not (r.ABOUT_ME.search(stripped) or r.EN_ELLIPTICAL.match(stripped)):
        return None
    if r.EN_LOAD.search(stripped):
        return ""
    return _question_content(stripped, False)


def relevant_hits(
    query: str, hits: Sequence[Mapping[str, Any]], ratio: float = 0.6
) -> list[Mapping[str, Any]]:
    """The hits that answer the question: those sharing a content word with the query,
    and those scored close to the best one; never the tail of unrelated memories."""
    if not hits:
        return []
    top = max(float(h.get("score") or 0.0) for h in hits)
    return [
        h for h in hits
        if shares_words(query, str(h.get("memory", ""))) or float(h.get("score") or 0.0) >= ratio * top
    ]  # fmt: skip


def forget_query(text: str) -> str | None:
    """What to search for before deleting ("forget that I live in Berlin" → "User lives in Berlin")."""
    chinese = is_chinese(text)
    match = (r.ZH_FORGET if chinese else r.EN_FORGET).match(text.strip())
    if not match:
        return None
    target = clean(match.group(1))
    if not chinese:
        target = re.sub(r"^(?:about|of|that)\s+", "", target, flags=re.I)
        target = re.sub(r"^my\s+", "", target, flags=re.I) if not re.match(r"^i\b", target, re.I) else target
    return third_person(target, chinese) if re.match(r"^(?:i|my|我)", target, re.I) else target
