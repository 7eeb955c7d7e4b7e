"""A request's wrapper taken off the question it carries: "Remind me when my
flight leaves" asks "when my flight leaves", "告诉我下次看牙是什么时候" asks
"下次看牙是什么时候".

People typing in the filter box, and models calling ``memory_search``, often
phrase a search as a request. The wrapper carries no content, but the model
reads it: "提醒我" (remind me) pulls a query's vector toward what reminders are
about, dates and appointments, so "提醒我出国度假的日期" ranked three birthdays
and an anniversary above the trip abroad (benchmarks/README.md, "Thirty-fourth
session"). Only a wrapper at the start of the query, from a closed list, is
taken off, and only when a question is left after it.
"""

from __future__ import annotations

import re

__all__ = ["without_request"]

_EN_REQUEST = re.compile(
    r"^\s*(?:(?:hey|hi|ok|okay)\b[,!]?\s*)?(?:please\s+)?"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:remind\s+me(?:\s+(?:of|about))?"
    r"|tell\s+me(?:\s+(?:about|of))?"
    r"|let\s+me\s+know"
    r"|show\s+me"
    r"|(?:do|did)\s+you\s+(?:still\s+)?(?:remember|recall|know)(?:\s+(?:about|of))?"
    r"|i(?:\s+(?:want|need|would\s+like)|['’]d\s+like)\s+to\s+know(?:\s+about)?"
    r"|what\s+do\s+you\s+(?:know|remember)\s+about)"
    r"\b[\s,:]*(?:please\b\s*)?",
    re.IGNORECASE,
)
#: 请问; or (请)(你)(帮我)提醒我 / 告诉我 / 说说 / 查一下 / 你还记得 / 我想知道 … (一下).
_ZH_REQUEST = re.compile(
    r"^\s*(?:请问|请?你?(?:帮我|给我)?"
    r"(?:提醒(?:一下)?我?|告诉我|跟我说说?|说说|查一下|查查|找一下|你还记得|你记得|还记得|我想知道|我想问问?)"
    r"(?:一下)?)[，,:：\s]*"
)


def without_request(query: str, keep_owner: tuple[str, ...] = ()) -> str:
    """``query`` without a leading request wrapper ("Remind me…", "Tell me about…",
    "Do you remember…", "请问", "提醒我", "告诉我"…); ``query`` itself when it has
    none, or when nothing would be left. ``keep_owner``: words that, right after a
    Chinese wrapper ending in 我, keep that 我 as theirs ("告诉我老公是干什么的" asks
    about 我老公, my husband)."""
    for pattern in (_EN_REQUEST, _ZH_REQUEST):
        found = pattern.match(query)
        if found is None or found.end() == 0:
            continue
        rest = query[found.end() :]
        if not rest.strip():
            return query
        owner_kept = found.group(0).rstrip("，,:： ").endswith("我") and rest.startswith(keep_owner)
        if pattern is _ZH_REQUEST and owner_kept:
            rest = "我" + rest
        return rest
    return query
