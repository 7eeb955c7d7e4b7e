"""The offline model: deterministic, rule-based, no key, no network.

It exists so that memchat, its demo and its tests work on a fresh machine. It
recognises statements about the user in English and Chinese ("I'm Zhang San
and I like Go", "我喜欢…", "remember that…") and stores them with
``memory_add``; questions about the user ("what do I like?", "我喜欢什么?")
become ``memory_search`` or ``memory_load``; "forget …" searches, then
deletes when ``memory_delete`` is enabled. Replies stream piece by piece like
a real model's. It is not a language model: anything else gets a short
explanation of what it can do and how to use a real model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .llm import ModelEvent, ModelReply, TextChunk, ToolCall, Usage

OFFLINE_MODEL_NAME = "offline"

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LANGUAGES = {
    "go", "golang", "python", "rust", "java", "javascript", "typescript", "c", "c++", "c#", "ruby",
    "kotlin", "swift", "haskell", "scala", "elixir", "php", "lua", "zig", "perl", "r", "julia",
}  # fmt: skip
_TOPIC_WORDS = {
    "food": {"coffee", "tea", "pizza", "sushi", "noodles", "food", "cooking", "咖啡", "茶", "美食", "火锅"},
    "music": {"music", "jazz", "rock", "piano", "guitar", "音乐", "钢琴", "吉他"},
    "sports": {"football", "soccer", "basketball", "tennis", "running", "hiking", "swimming", "climbing",
               "跑步", "篮球", "足球", "游泳", "爬山"},
    "travel": {"travel", "traveling", "travelling", "旅行", "旅游"},
    "reading": {"books", "reading", "novels", "读书", "小说"},
    "pets": {"cat", "cats", "dog", "dogs", "猫", "狗"},
}  # fmt: skip


def _topics_for(text: str, base: Sequence[str]) -> list[str]:
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9+#]*", text)}
    topics: list[str] = []
    langs = sorted(w for w in words if w in _LANGUAGES)
    if langs or "编程" in text or "programming" in words:
        topics += ["programming", *(("go" if w == "golang" else w) for w in langs)]
    for topic, vocabulary in _TOPIC_WORDS.items():
        if words & vocabulary or any(v in text for v in vocabulary if _HAN.search(v)):
            topics.append(topic)
    topics += base
    if "programming" in topics:
        topics.append("technology")
    return list(dict.fromkeys(topics))


@dataclass
class _Facts:
    """What one user message says about the user."""

    name: str = ""
    memories: list[tuple[str, list[str]]] = field(default_factory=list)


def _clean(fragment: str) -> str:
    return fragment.strip().strip(" .!?,;:。！？，；：、").strip()


_EN_CLAUSES: list[tuple[re.Pattern[str], str, list[str]]] = [
    (re.compile(r"^(?:i\s+really\s+|i\s+)(?:like|love|enjoy|adore)\s+(.+)$", re.I), "{s} likes {x}",
     ["interests"]),
    (re.compile(r"^i\s+prefer\s+(.+)$", re.I), "{s} prefers {x}", ["preferences"]),
    (re.compile(r"^i\s+(?:don't|do not|dont)\s+like\s+(.+)$", re.I), "{s} dislikes {x}", ["preferences"]),
    (re.compile(r"^i\s+(?:hate|dislike)\s+(.+)$", re.I), "{s} dislikes {x}", ["preferences"]),
    (re.compile(r"^i\s+live\s+in\s+(.+)$", re.I), "{s} lives in {x}", ["location"]),
    (re.compile(r"^i(?:'m|\s+am)\s+from\s+(.+)$", re.I), "{s} is from {x}", ["location"]),
    (re.compile(r"^i\s+work\s+(as|at|for|on|in)\s+(.+)$", re.I), "{s} works {x}", ["work"]),
    (re.compile(r"^i\s+have\s+(.+)$", re.I), "{s} has {x}", ["personal"]),
    (re.compile(r"^i\s+was\s+born\s+(.+)$", re.I), "{s} was born {x}", ["personal"]),
    (re.compile(r"^my\s+favou?rite\s+(.+?)\s+is\s+(.+)$", re.I), "{s}'s favorite {x}", ["preferences"]),
    (re.compile(r"^my\s+(.+?)\s+is\s+(.+)$", re.I), "{s}'s {x}", ["personal"]),
    (re.compile(r"^i(?:'m|\s+am)\s+(an?\s+.+)$", re.I), "{s} is {x}", ["personal"]),
]  # fmt: skip
_EN_NAME = [
    re.compile(
        r"^(?i:my\s+name\s+is|call\s+me|i\s+am|i'm|this\s+is)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3})$"
    ),
]
_EN_REMEMBER = re.compile(r"^(?:please\s+)?remember\s+(?:that\s+)?(.+)$", re.I | re.S)

_ZH_CLAUSES: list[tuple[re.Pattern[str], str, list[str]]] = [
    (re.compile(r"^我(?:不喜欢|讨厌)(.+)$"), "{s}不喜欢{x}", ["preferences"]),
    (re.compile(r"^我(?:很|也|最|非常)?(?:喜欢|爱|热爱)(.+)$"), "{s}喜欢{x}", ["interests"]),
    (re.compile(r"^我住在(.+)$"), "{s}住在{x}", ["location"]),
    (re.compile(r"^我来自(.+)$"), "{s}来自{x}", ["location"]),
    (re.compile(r"^我在(.+?)(?:工作|上班)$"), "{s}在{x}工作", ["work"]),
    (re.compile(r"^我(?:的职业)?是(?:一名|一个|个)(.+)$"), "{s}是{x}", ["work"]),
    (re.compile(r"^我有(.+)$"), "{s}有{x}", ["personal"]),
    (re.compile(r"^我的(.+?)是(.+)$"), "{s}的{x}", ["personal"]),
]  # fmt: skip
_ZH_NAME = re.compile(
    r"^(?:我叫|我是|我的名字是|叫我)\s*([\u4e00-\u9fffA-Za-z][\u4e00-\u9fffA-Za-z ]{0,11})$"
)
_ZH_REMEMBER = re.compile(r"^(?:请)?(?:记住|记一下|帮我记住)[:：,，]?\s*(.+)$", re.S)
_GREETING = re.compile(r"^(?:hi|hello|hey|你好|您好|嗨|哈喽)[\s,，!！.。]*", re.I)


def _split_clauses(text: str) -> list[str]:
    parts = re.split(r"[.!;\n。！；，,]+|\s+and\s+(?=i\b|my\b)|\s+but\s+(?=i\b|my\b)", text, flags=re.I)
    return [p.strip() for p in parts if p and p.strip()]


def _third_person(fragment: str, chinese: bool) -> str:
    """Turn "I …"/"my …" into a statement about the user, for "remember that …"."""
    text = _clean(fragment)
    if chinese:
        return re.sub(r"^我的", "用户的", re.sub(r"^我", "用户", text))
    swaps = [(r"^i am\b", "User is"), (r"^i'm\b", "User is"), (r"^i\b", "User"), (r"^my\b", "User's"),
             (r"\bmy\b", "their"), (r"\bme\b", "them")]  # fmt: skip
    for pattern, repl in swaps:
        text = re.sub(pattern, repl, text, flags=re.I)
    if text.startswith("User ") and re.match(r"User (\w+)", text):
        verb = re.match(r"User (\w+)", text).group(1)
        if verb.lower() not in {
            "is",
            "was",
            "has",
            "can",
            "will",
            "should",
            "does",
            "did",
        } and not verb.endswith("s"):
            text = f"User {_third_person_verb(verb)}{text[5 + len(verb) :]}"
    return text[:1].upper() + text[1:]


def _third_person_verb(verb: str) -> str:
    if verb.lower() == "have":
        return "has"
    if re.search(r"(s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def extract_facts(text: str) -> _Facts:
    """Statements about the user in one message (English or Chinese)."""
    chinese = bool(_HAN.search(text))
    facts = _Facts()
    body = _GREETING.sub("", text.strip())
    clauses = _split_clauses(body)
    for clause in clauses:
        match = (_ZH_NAME if chinese else None) and _ZH_NAME.match(clause)
        if not chinese:
            match = next((m for p in _EN_NAME if (m := p.match(_clean(clause)))), None)
        if match:
            facts.name = _clean(match.group(1))
    subject = facts.name or ("用户" if chinese else "User")
    for clause in clauses:
        clause = _clean(clause)
        for pattern, template, base in _ZH_CLAUSES if chinese else _EN_CLAUSES:
            m = pattern.match(clause)
            if not m:
                continue
            if len(m.groups()) == 2:
                x = (
                    f"{m.group(1)} is {_clean(m.group(2))}"
                    if not chinese
                    else f"{m.group(1)}是{_clean(m.group(2))}"
                )
                if template == "{s} works {x}":
                    x = f"{m.group(1)} {_clean(m.group(2))}"
            elif chinese:
                # Keep the space before a Latin word: "我喜欢 Go" → "张三喜欢 Go".
                x = m.group(1).rstrip(" .!?,;:。！？，；：、")
            else:
                x = _clean(m.group(1))
            if x.strip():
                memory = template.format(s=subject, x=x)
                facts.memories.append((memory, _topics_for(memory, base)))
            break
    if facts.name and not any(facts.name in m for m, _ in facts.memories):
        name_memory = f"用户名叫{facts.name}" if chinese else f"User's name is {facts.name}"
        facts.memories.insert(0, (name_memory, ["identity"]))
    elif facts.name and not chinese:
        facts.memories.insert(0, (f"User's name is {facts.name}", ["identity"]))
    return facts


# Questions that ask for everything remembered: memory_load rather than a search.
_EN_LOAD = re.compile(
    r"\b(?:what\s+do\s+you\s+(?:know|remember)|show\s+what\s+you\s+remember)\b|^\s*who\s+am\s+i\b", re.I
)
_ZH_LOAD = re.compile(
    r"我(?:是谁|叫什么)|我的名字|(?:你)?(?:记得|知道)(?:关于)?我(?:的)?(?:什么|哪些)|你记住了什么"
)
#: Words of an English question that carry no content: the question words,
#: auxiliaries, politeness and "do you remember…" framing.
_EN_FILLER = frozenset({
    "what", "what's", "whats", "who", "who's", "whom", "where", "where's", "which", "when", "when's", "how",
    "how's", "why", "do", "does", "did", "is", "are", "am", "was", "were", "'s", "can", "could", "would",
    "will", "shall", "you", "please", "tell", "me", "remind", "again", "know", "remember", "recall", "about",
    "the", "a", "an",
})  # fmt: skip
_PRONOUNS = frozenset({"i", "my", "me", "mine", "myself"})
#: Leading framing of a Chinese question ("请问", "你记得", "告诉我") and its question words.
_ZH_FRAME = re.compile(r"^(?:请问|请你|请|你还记得|你记得|你知道|告诉我|说说|提醒我)+")
_ZH_FILLER = re.compile(r"我的|我|什么|啥|哪些|哪里|哪儿|哪|谁|吗|呢|吧|呀|啊|么")
_ZH_EDGES = "是在的了有个"
_QUESTION_PUNCTUATION = " \t\n?？!！.。,，;；:：、\"'“”‘’()（）"


def _question_content(text: str, chinese: bool) -> str:
    """The question minus its filler, in the words the memories are written in:
    "What's my job?" → "job", "What pets do I have?" → "pets has", "Where do I
    live?" → "lives" (memories say "User lives in …", and keyword search does
    not stem), "我喜欢什么?" → "喜欢", "我在哪里工作？" → "工作". Every content
    word is kept, so search by meaning gets the whole question, not one guessed
    keyword. "" when nothing but pronouns is left ("who am I?")."""
    if chinese:
        body = _ZH_FRAME.sub("", text.strip(_QUESTION_PUNCTUATION))
        body = _ZH_FILLER.sub("", body).strip(_QUESTION_PUNCTUATION)
        trimmed = body.strip(_ZH_EDGES).strip(_QUESTION_PUNCTUATION)
        body = trimmed if len(trimmed) >= 2 else body  # "住在" stays; "在工作" → "工作"
        return re.sub(r"\s+", " ", body)
    words = [w.strip(_QUESTION_PUNCTUATION) for w in text.split()]
    words = [w for w in words if w]
    kept: list[str] = []
    for i, word in enumerate(words):
        lower = word.lower().replace("’", "'")
        if lower in _EN_FILLER or lower in _PRONOUNS:
            continue
        # "do I like" → "likes": the verb as a memory about the user has it.
        after_do_i = i >= 2 and words[i - 1].lower() == "i" and words[i - 2].lower() == "do"
        kept.append(_third_person_verb(word) if after_do_i else word)
    return " ".join(kept)


def _question(text: str) -> str | None:
    """The search query for a question about the user ("" = load recent
    memories), or None when ``text`` is not such a question."""
    chinese = bool(_HAN.search(text))
    asks = text.rstrip().endswith(("?", "？")) or bool((_ZH_ASKS if chinese else _EN_ASKS).search(text))
    if not asks or not _ABOUT_ME.search(text):
        return None
    if (_ZH_LOAD if chinese else _EN_LOAD).search(text):
        return ""
    return _question_content(text, chinese)


_EN_FORGET = re.compile(
    r"^(?:please\s+)?(?:forget|delete|remove)\s+(?:that\s+|about\s+|the\s+memory\s+)?(.+)$", re.I
)
_ZH_FORGET = re.compile(r"^(?:请)?(?:忘记|忘掉|删除|删掉)(?:关于)?(.+)$")
_FORGET_ALL = re.compile(
    r"^(?:please\s+)?forget\s+everything|^(?:请)?(?:忘记|忘掉|清空)(?:所有|全部|一切)", re.I
)


_EN_ASKS = re.compile(r"^(?:what|who|where|which|when|how|do|does|did|can|could|tell|show|list)\b", re.I)
_ZH_ASKS = re.compile(r"什么|啥|谁|哪|吗|呢|记得|知道")
_ABOUT_ME = re.compile(r"\b(?:i|me|my|mine|myself)\b|我", re.I)


def _chunks(text: str) -> list[str]:
    """Word-sized pieces (two characters at a time for CJK), as a model streams."""
    return re.findall(
        r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]{1,2}|[^\s\u3400-\u9fff]+\s*|\s+", text
    )


class OfflineModel:
    """A ChatModel that needs nothing: see the module docstring."""

    name = OFFLINE_MODEL_NAME

    def __init__(self, *, delay: float = 0.0) -> None:
        #: Seconds between streamed pieces (0 in tests; a little in the app so streaming shows).
        self.delay = delay

    async def close(self) -> None:
        return None

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] = (),
        *,
        streaming: bool = True,
    ) -> AsyncIterator[ModelEvent]:
        available = {t.get("function", {}).get("name") for t in tools}
        text, calls = self._respond(list(messages), available)
        pieces = _chunks(text) if text else []
        if streaming:
            for piece in pieces:
                if self.delay:
                    await asyncio.sleep(self.delay)
                yield TextChunk(piece)
        elif text:
            yield TextChunk(text)
        yield ModelReply(
            text=text,
            tool_calls=tuple(calls),
            usage=Usage(completion_tokens=max(len(pieces), 1)),
            finish_reason="tool_calls" if calls else "stop",
        )

    # -- decisions -------------------------------------------------------

    def _respond(self, messages: list[Mapping[str, Any]], available: set[str]) -> tuple[str, list[ToolCall]]:
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        user_text = str(messages[last_user].get("content") or "") if last_user >= 0 else ""
        results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
        called = [c for m in messages[last_user + 1 :] for c in (m.get("tool_calls") or [])]
        chinese = bool(_HAN.search(user_text))
        seed = f"{len(messages)}|{user_text}"
        if results:
            return self._after_tools(user_text, called, results, available, chinese, seed)
        text, calls = self._first_round(user_text, available, chinese, seed)
        if _background_memory(messages) and text in (
            _say(chinese, "add_disabled"),
            _say(chinese, "delete_disabled"),
        ):
            # Auto mode: the background extractor writes; the agent only reads.
            return _say(chinese, "background"), []
        return text, calls

    @staticmethod
    def _call(seed: str, index: int, name: str, arguments: dict[str, Any]) -> ToolCall:
        digest = hashlib.sha256(f"{seed}|{index}|{name}".encode()).hexdigest()[:24]
        return ToolCall(
            id=f"call_{index:02d}_{digest}", name=name, arguments=json.dumps(arguments, ensure_ascii=False)
        )

    def _first_round(
        self, text: str, available: set[str], chinese: bool, seed: str
    ) -> tuple[str, list[ToolCall]]:
        stripped = text.strip()
        if _FORGET_ALL.search(stripped):
            if "memory_clear" in available:
                return "", [self._call(seed, 0, "memory_clear", {"reason": stripped})]
            return _say(chinese, "clear_disabled"), []
        forget = (_ZH_FORGET if chinese else _EN_FORGET).match(stripped)
        if forget:
            if "memory_delete" not in available:
                return _say(chinese, "delete_disabled"), []
            return "", [self._call(seed, 0, "memory_search", {"query": _clean(forget.group(1))})]
        remember = (_ZH_REMEMBER if chinese else _EN_REMEMBER).match(stripped)
        query = None if remember else _question(stripped)
        if query is not None:
            if query and "memory_search" in available:
                return _say(chinese, "looking"), [self._call(seed, 0, "memory_search", {"query": query})]
            if "memory_load" in available:
                return _say(chinese, "looking"), [self._call(seed, 0, "memory_load", {"limit": 10})]
            if "memory_search" in available:
                return _say(chinese, "looking"), [
                    self._call(seed, 0, "memory_search", {"query": query or stripped})
                ]
            return _say(chinese, "no_read_tools"), []
        if remember:
            memory = _third_person(remember.group(1), chinese)
            facts = _Facts(memories=[(memory, _topics_for(memory, ["notes"]))])
        else:
            facts = extract_facts(stripped)
        if facts.memories:
            if "memory_add" not in available:
                return _say(chinese, "add_disabled"), []
            intro = _say(chinese, "greet_name", name=facts.name) if facts.name else ""
            calls = [
                self._call(seed, i, "memory_add", {"memory": memory, "topics": topics})
                for i, (memory, topics) in enumerate(facts.memories)
            ]
            return intro, calls
        if _GREETING.match(stripped):
            return _say(chinese, "hello"), []
        return _say(chinese, "help"), []

    def _after_tools(
        self,
        user_text: str,
        called: list[Mapping[str, Any]],
        results: list[Mapping[str, Any]],
        available: set[str],
        chinese: bool,
        seed: str,
    ) -> tuple[str, list[ToolCall]]:
        names = [c.get("function", {}).get("name") for c in called]
        payloads = [_load_json(r.get("content")) for r in results]
        errors = [p["error"] for p in payloads if isinstance(p, dict) and "error" in p]
        if errors:
            return _say(chinese, "failed", error=errors[-1]), []
        last_name, last = names[-1], payloads[-1]
        forgetting = (_ZH_FORGET if chinese else _EN_FORGET).match(user_text.strip())
        if last_name == "memory_search" and forgetting:
            hits = (last or {}).get("results") or []
            if not hits:
                return _say(chinese, "nothing_to_forget"), []
            return "", [self._call(seed, 0, "memory_delete", {"memory_id": hits[0]["id"]})]
        if last_name == "memory_delete":
            found = [
                r.get("memory", "") for p in payloads if isinstance(p, dict) for r in p.get("results", [])
            ]
            return _say(chinese, "forgotten", item=found[0] if found else "it"), []
        if last_name == "memory_clear":
            return _say(chinese, "cleared"), []
        if last_name in ("memory_search", "memory_load"):
            hits = [r.get("memory", "") for r in (last or {}).get("results") or []]
            if not hits:
                return _say(chinese, "no_memories"), []
            return _say(chinese, "recall", items="\n".join(f"- {h}" for h in hits)), []
        added = [p.get("memory", "") for p in payloads if isinstance(p, dict) and p.get("memory")]
        return _say(chinese, "remembered", items="; ".join(added)), []


def _background_memory(messages: list[Mapping[str, Any]]) -> bool:
    """True when the system prompt says memories are written in the background (auto mode)."""
    system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    from .runner import AUTO_MODE_MARKER

    return AUTO_MODE_MARKER in system


def _load_json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


_PHRASES: dict[str, tuple[str, str]] = {
    "hello": ("Hello! I'm memchat's offline model. Tell me about yourself (\"I like Go\") and I'll remember it; "
              "ask me later (\"what do I like?\").",
              "你好！我是 memchat 的离线模型。告诉我关于你的事（比如“我喜欢 Go”），我会记住；之后可以问我“我喜欢什么？”。"),
    "help": ("I'm memchat's offline model, not a language model: I can remember facts you tell me "
             "(\"I like Go\", \"remember that my sister is Ana\") and recall them (\"what do I like?\"). "
             "Set OPENAI_API_KEY (and OPENAI_BASE_URL for other providers) to chat with a real model.",
             "我是 memchat 的离线模型，不是大语言模型：我可以记住你告诉我的事（“我喜欢 Go”），也可以回忆"
             "（“我喜欢什么？”）。设置 OPENAI_API_KEY（其他服务商再设 OPENAI_BASE_URL）即可使用真正的模型。"),
    "greet_name": ("Nice to meet you, {name}! Let me remember that.", "你好{name}！很高兴认识你，我把这个记下来。"),
    "looking": ("Let me check my memory.", "我来查看一下记忆。"),
    "remembered": ("Got it, I'll remember: {items}.", "好的，我记住了：{items}。"),
    "recall": ("Here's what I remember:\n{items}", "根据我的记忆：\n{items}"),
    "no_memories": ("I don't have any memories about that yet. Tell me and I'll remember.",
                    "我还没有这方面的记忆。告诉我，我会记住。"),
    "forgotten": ("Done, I've forgotten: {item}", "好的，已经忘掉了：{item}"),
    "nothing_to_forget": ("I couldn't find a memory like that to forget.", "没有找到要忘记的记忆。"),
    "cleared": ("Done, I've forgotten everything about you.", "好的，关于你的记忆已全部清空。"),
    "failed": ("I couldn't do that: {error}", "没能完成：{error}"),
    "background": ("Noted. Memories are saved in the background after each turn, so this will be taken care of.",
                   "好的，记忆会在每轮对话后于后台自动保存。"),
    "add_disabled": ("I'd remember that, but the memory_add tool is disabled.", "我想记住这件事，但 memory_add 工具已禁用。"),
    "delete_disabled": ("I can't delete memories myself (my memory_delete tool is off), but you can: "
                        "type /forget and what to forget (e.g. /forget I like Go), or press d on it in the "
                        "memory panel (ctrl+b). To let me do it, start memchat with --enable-tool memory_delete.",
                        "我自己不能删除记忆（memory_delete 工具未启用），但你可以：输入 /forget 加要忘记的内容"
                        "（如 /forget 我喜欢 Go），或在记忆面板（ctrl+b）中选中后按 d。"
                        "想让我来删，请用 --enable-tool memory_delete 启动 memchat。"),
    "clear_disabled": ("I can't clear all memories: memory_clear is disabled "
                       "(start memchat with --enable-tool memory_clear).",
                       "无法清空记忆：memory_clear 已禁用（用 --enable-tool memory_clear 启动 memchat）。"),
    "no_read_tools": ("I can't look anything up: memory_search and memory_load are disabled.",
                      "无法查询：memory_search 和 memory_load 已禁用。"),
}  # fmt: skip


def _say(chinese: bool, phrase: str, **values: Any) -> str:
    english, zh = _PHRASES[phrase]
    return (zh if chinese else english).format(**values)
