"""The offline model's tables: word lists and patterns, one entry a line.

The rules are general (any "I play …", any "I'm allergic to …", any "I don't …
anymore, I … now"); the lists say which verbs and words count as lasting facts
about the user, so "I'm tired" or "I'm going to the store" is not stored.
"""

from __future__ import annotations

import re

# -- English ---------------------------------------------------------------------

#: Verbs of lasting habits, skills and circumstances: "I <verb> …" is stored.
HABIT_VERBS = frozenset({
    "live", "work", "play", "practice", "practise", "go", "collect", "run", "watch", "speak", "study",
    "knit", "drink", "drive", "ride", "sing", "teach", "write", "cook", "bake", "paint", "draw", "read",
    "swim", "eat", "use", "own", "volunteer", "attend", "support", "follow", "listen", "do", "park", "code",
    "program", "travel", "visit", "learn", "walk", "cycle", "bike", "climb", "dance", "surf", "ski", "fish",
    "garden", "meditate", "train", "coach", "manage", "lead", "build", "make", "grow", "raise", "keep",
    "wear", "take", "commute", "rent", "belong", "sleep", "wake", "skate", "box", "row", "hike", "jog",
    "smoke", "vote", "pray", "celebrate", "grew", "studied", "graduated", "went", "moved", "worked", "lived",
})  # fmt: skip
#: Past forms kept as they are in the third person ("User grew up in Texas").
PAST_VERBS = frozenset({"grew", "studied", "graduated", "went", "moved", "worked", "lived", "was", "born"})
#: Adverbs that may sit between "I" and the verb ("I usually run …").
ADVERBS = frozenset({
    "usually", "often", "always", "sometimes", "also", "really", "never", "rarely", "mostly", "still",
    "normally", "generally", "regularly", "occasionally", "mainly", "actually", "currently", "even", "only",
})  # fmt: skip
#: "I'm <word>": lasting states (diets, conditions, family status, handedness).
STATES = frozenset({
    "vegetarian", "vegan", "pescatarian", "keto", "paleo", "diabetic", "celiac", "coeliac", "asthmatic",
    "epileptic", "married", "single", "divorced", "engaged", "widowed", "retired", "pregnant", "left-handed",
    "right-handed", "colorblind", "colourblind", "deaf", "blind", "introverted", "extroverted", "religious",
    "atheist", "buddhist", "christian", "muslim", "jewish", "hindu", "unemployed", "self-employed", "bilingual",
    "shy", "allergic", "intolerant", "sober", "teetotal",
})  # fmt: skip
#: "I'm <Nationality>" (not a name).
NATIONALITIES = frozenset({
    "american", "british", "english", "german", "french", "italian", "spanish", "chinese", "japanese",
    "korean", "indian", "brazilian", "mexican", "canadian", "australian", "russian", "dutch", "swedish",
    "polish", "portuguese", "turkish", "greek", "irish", "scottish", "vietnamese", "thai", "egyptian",
    "nigerian", "kenyan", "argentinian", "argentine", "swiss", "austrian", "belgian", "danish", "norwegian",
    "finnish", "ukrainian", "israeli", "iranian", "pakistani", "filipino", "indonesian", "malaysian",
})  # fmt: skip
#: "I'm <verb>ing …" that is a lasting activity ("I'm learning Japanese"), not a moment ("I'm going").
ONGOING = frozenset({
    "learning", "studying", "training", "practicing", "practising", "working", "living", "teaching",
    "writing", "building", "raising", "saving", "renovating", "majoring", "doing",
})  # fmt: skip
#: "I have <these> …" is not a fact about the user.
NOT_POSSESSIONS = re.compile(
    r"^(?:to|no|a\s+question|an?\s+idea|a\s+problem|been|got\s+to|nothing|time|fun|a\s+good|a\s+nice)\b", re.I
)
#: Words in "I'm a/an <words>" that describe a moment, not the user.
NOT_ROLES = re.compile(r"^an?\s+(?:bit|little|lot|moment|second|minute)\b", re.I)

#: "I don't/can't/never <verb> X" kept as a fact for these verbs ("User doesn't eat meat").
NEGATABLE_VERBS = frozenset({"eat", "drink", "smoke", "drive", "own", "have", "use", "speak", "tolerate"})

#: The English clause rules: (pattern, template, base topics). "{s}" is the subject
#: ("User" or the name), "{x}" the matched rest.
EN_CLAUSES: list[tuple[re.Pattern[str], str, list[str]]] = [
    (re.compile(r"^i\s+(?:don't|do not|dont)\s+(?:really\s+)?(?:like|enjoy|love)\s+(.+)$", re.I), "{s} dislikes {x}", ["preferences"]),
    (re.compile(r"^i\s+(?:really\s+|also\s+|absolutely\s+)?(?:like|love|enjoy|adore)\s+(.+)$", re.I), "{s} likes {x}", ["interests"]),
    (re.compile(r"^i\s+(?:really\s+)?prefer\s+(.+)$", re.I), "{s} prefers {x}", ["preferences"]),
    (re.compile(r"^i\s+(?:hate|dislike|can't\s+stand|cannot\s+stand)\s+(.+)$", re.I), "{s} dislikes {x}", ["preferences"]),
    (re.compile(r"^i(?:'m|\s+am)\s+from\s+(.+)$", re.I), "{s} is from {x}", ["location"]),
    (re.compile(r"^my\s+favou?rite\s+(.+?)\s+(?:is|are)\s+(.+)$", re.I), "{s}'s favorite {x}", ["preferences"]),
    (re.compile(r"^my\s+(.+?)\s+(is|are|was)\s+(.+)$", re.I), "{s}'s {x}", ["personal"]),
    (re.compile(r"^i\s+was\s+born\s+(.+)$", re.I), "{s} was born {x}", ["personal"]),
]  # fmt: skip

EN_NAME = re.compile(
    r"^(?i:my\s+name\s+is|call\s+me|i\s+am|i'm|this\s+is)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3})$"
)
EN_REMEMBER = re.compile(
    r"^(?:please\s+)?(?:remember|note|keep\s+in\s+mind)\s+(?:that\s+)?(.+)$", re.I | re.S
)
EN_FORGET = re.compile(
    r"^(?:please\s+)?(?:forget|delete|remove)\s+(?:that\s+|about\s+|the\s+memory\s+(?:about\s+|of\s+|that\s+)?)?(.+)$",
    re.I,
)
FORGET_ALL = re.compile(
    r"^(?:please\s+)?forget\s+everything|^(?:请)?(?:忘记|忘掉|清空)(?:所有|全部|一切)", re.I
)
#: "What did I just say?": answered from the conversation history.
EN_SAID = re.compile(
    r"^what\s+did\s+i\s+(?:just\s+|last\s+)?(?:say|write|tell\s+you)\b|^what\s+was\s+my\s+(?:last|previous)\s+message\b",
    re.I,
)
ZH_SAID = re.compile(r"我(?:刚才|刚刚|之前|上一句)?说了什么")
GREETING = re.compile(r"^(?:hi|hello|hey|你好|您好|嗨|哈喽)[\s,，!！.。]*", re.I)

# Changes of a fact. Each yields "old" (what no longer holds, as the user said it)
# and "new" (what holds now, or None when it simply stopped).
EN_CHANGES: list[re.Pattern[str]] = [
    # "I don't work at a bakery anymore, I work at a library now"
    re.compile(r"^i\s+(?:don't|do\s+not|no\s+longer)\s+(?P<old>.+?)(?:\s+any\s*more)?\s*[,;.]\s*(?:but\s+|and\s+)?(?:now\s+)?(?P<new>i\s+.+?)(?:\s+now)?$", re.I),
    # "I used to live in Paris, now I live in Rome"
    re.compile(r"^i\s+used\s+to\s+(?P<old>.+?)\s*[,;.]?\s*(?:but\s+|and\s+)?now\s+(?P<new>i\s+.+?)$", re.I),
    # "I'm not vegetarian anymore", "I am no longer married"
    re.compile(r"^i(?:'m|\s+am)\s+(?:not|no\s+longer)\s+(?P<old_state>.+?)(?:\s+any\s*more)?$", re.I),
    # "I no longer play tennis", "I don't play tennis anymore"
    re.compile(r"^i\s+(?:no\s+longer\s+(?P<stop1>.+?)|(?:don't|do\s+not)\s+(?P<stop2>.+?)\s+any\s*more)$", re.I),
    # "I stopped playing the piano", "I gave up smoking"
    re.compile(r"^i(?:'ve)?\s+(?:stopped|quit|gave\s+up)\s+(?P<gerund>\w+ing\b.*)$", re.I),
]  # fmt: skip
#: Every change above says that something ended or what holds now.
EN_CHANGE_MARKER = re.compile(
    r"\bany\s*more\b|\bno\s+longer\b|\bnow\b|\bused\s+to\b|\bstopped\b|\bquit\b|\bgave\s+up\b", re.I
)
#: "I moved to Munich", "I've relocated to Lisbon": where the user lives now.
EN_MOVED = re.compile(
    r"^i(?:'ve|\s+have)?\s+(?:just\s+)?(?:moved|relocated)\s+to\s+(?P<place>.+?)(?:\s+now)?$", re.I
)
#: "I quit my job (at Google)", "I switched jobs", "I changed jobs": the work fact changes.
EN_JOB_CHANGE = re.compile(r"\b(?:quit|left|changed|switched|lost)\s+(?:my\s+)?jobs?\b", re.I)

# Questions.
EN_LOAD = re.compile(
    r"\b(?:what\s+do\s+you\s+(?:know|remember)(?:\s+about\s+me)?\s*\??$|show\s+(?:me\s+)?what\s+you\s+remember)|^\s*who\s+am\s+i\b",
    re.I,
)  # fmt: skip
EN_ASKS = re.compile(
    r"^(?:what|what's|whats|who|where|which|when|how|do|does|did|am|is|are|can|could|tell|show|list|remind|have)\b",
    re.I,
)
#: A question is about the user when it says "I"/"my", or "about me"/"remind me".
ABOUT_ME = re.compile(r"\b(?:i|my|mine|myself|i'm)\b|\babout\s+me\b|\bremind\s+me\b|我", re.I)
#: A short elliptical question about the user's things ("any pets?", "Any allergies?"):
#: in a chat about the user, "any" asks after theirs; not a request for the
#: assistant's own output ("any ideas for dinner?", "any news?").
EN_ELLIPTICAL = re.compile(
    r"^any\s+(?!(?:ideas?|suggestions?|tips?|advice|news|updates?|questions?|thoughts?|recommendations?|help)\b)"
    r"[a-z'-]+(?:\s+[a-z'-]+){0,2}\s*\?$",
    re.I,
)
#: Words of an English question that carry no content.
EN_FILLER = frozenset({
    "what", "what's", "whats", "who", "who's", "whom", "where", "where's", "which", "when", "when's", "how",
    "how's", "why", "do", "does", "did", "is", "are", "am", "was", "were", "'s", "can", "could", "would",
    "will", "shall", "you", "please", "tell", "me", "remind", "again", "know", "remember", "recall", "about",
    "the", "a", "an", "any", "some", "for", "of", "to", "in", "on", "at", "have", "has", "kind", "sort",
    "type", "still", "called", "named", "exactly",
})  # fmt: skip
PRONOUNS = frozenset({"i", "my", "me", "mine", "myself"})
#: Words a question uses for a topic → words the memories about it use.
EN_QUESTION_TOPICS: dict[str, str] = {
    "job": "works job", "work": "works job", "living": "works job", "profession": "works job profession",
    "occupation": "works job", "career": "works job", "employer": "works",
    "live": "lives", "home": "lives", "city": "lives city", "town": "lives", "address": "lives",
    "allergic": "allergic allergy", "allergies": "allergic allergy", "allergy": "allergic allergy",
    "diet": "diet vegetarian vegan eats", "eat": "eats diet",
    "instrument": "plays instrument", "instruments": "plays instrument",
    "pet": "pets has", "pets": "pets has", "sport": "sports plays", "sports": "sports plays",
    "hobby": "hobby likes", "hobbies": "hobbies likes", "music": "music likes",
    "language": "speaks language", "languages": "speaks languages",
    "born": "born birthday", "birthday": "birthday born", "age": "years old born", "old": "years old born",
    "car": "car drives", "drive": "drives car",
}  # fmt: skip

# -- Chinese ---------------------------------------------------------------------

#: "我<lead>…" is stored as "用户<lead>…": lasting habits, skills and circumstances.
ZH_FACT_LEADS = re.compile(
    r"^(?:不|也|还|一直|经常|常常|平时|每天|每周|每个?月|每年|周末|晚上|早上|从小|现在|已经)*"
    r"(?:会|能|对|有|养|吃|喝|住|来自|开|骑|说|学|在学|练|打|踢|弹|拉|玩|跑|游|做|读|写|画|唱|看|听|用|收集|参加|信|从事|"
    r"毕业|出生|戴|穿|抽|跳|爬|滑|钓|种|教|去|是|在\S+(?:工作|上班|读书|上学|住|生活))"
)  # fmt: skip
#: Clause rules applied before the general one: (pattern, template, base topics).
ZH_CLAUSES: list[tuple[re.Pattern[str], str, list[str]]] = [
    (re.compile(r"^我(?:不喜欢|讨厌)(.+)$"), "{s}不喜欢{x}", ["preferences"]),
    (re.compile(r"^我(?:很|也|最|非常|特别|真的)?(?:喜欢|爱|热爱)(.+)$"), "{s}喜欢{x}", ["interests"]),
    (re.compile(r"^我(?:的职业)?是(?:一名|一位|一个|个)(.+)$"), "{s}是{x}", ["work"]),
    (re.compile(r"^我的(.+)$"), "{s}的{x}", ["personal"]),
    (re.compile(r"^我((?:\S*)(?:过敏|不耐受).*)$"), "{s}{x}", ["health"]),
]  # fmt: skip
#: "我是<X>" where X ends like a role or kind, not a name ("我是老师", "我是素食者").
ZH_ROLE_SUFFIX = re.compile(
    r"(?:者|员|师|生|家|手|人|工|长|士|官|族|迷|控|党|的|儿|子|友|主|医|夫|妻|妈|爸)$"
)
ZH_NAME = re.compile(
    r"^(?:我叫|我是|我的名字是|我的名字叫|叫我)\s*([\u4e00-\u9fffA-Za-z][\u4e00-\u9fffA-Za-z ]{0,11})$"
)
ZH_REMEMBER = re.compile(r"^(?:请)?(?:记住|记一下|帮我记住|记得)[:：,，]?\s*(.+)$", re.S)
ZH_FORGET = re.compile(r"^(?:请)?(?:忘记|忘掉|删除|删掉)(?:关于)?(?:我的)?(.+)$")
ZH_CHANGES: list[re.Pattern[str]] = [
    # "我不在面包店工作了，现在在图书馆工作", "我现在不在北京住了，搬到广州了"
    re.compile(r"^我(?:现在|已经)?(?:不再|不)(?P<old>.+?)了[，,；;]?\s*(?:我)?(?:现在|如今|而是)?(?P<new>.+)?$"),
    # "我以前住在北京，现在住在深圳"
    re.compile(r"^我(?:以前|之前|过去|原来)(?P<old>.+?)[，,；;]\s*(?:但)?(?:我)?(?:现在|如今)(?P<new>.+)$"),
]  # fmt: skip
ZH_MOVED = re.compile(r"^(?:我)?(?:已经)?搬(?:到|去)了?(?P<place>.+?)了?$")
ZH_LOAD = re.compile(r"我是谁|(?:你)?(?:记得|知道)(?:关于)?我(?:的)?(?:什么|哪些)|你记住了什么|关于我的一切")
ZH_ASKS = re.compile(r"什么|啥|谁|哪|吗|呢|几|多少|记得|知道")
#: Leading framing of a Chinese question ("请问", "你记得", "告诉我") and its question words.
ZH_FRAME = re.compile(r"^(?:请问|请你|请|你还记得|你记得|你知道|告诉我|说说|提醒我)+")
ZH_FILLER = re.compile(r"我的|我|什么|啥|哪些|哪里|哪儿|哪一天|哪天|几号|多少|哪|谁|吗|呢|吧|呀|啊|么|几")
ZH_EDGES = "是在的了有个做"
#: Requests that have "我" as their object ("给我讲个笑话"): not about the user.
ZH_REQUEST = re.compile(r"(?:给|帮|替|让|跟|陪|为|教)我")
ZH_QUESTION_TOPICS: dict[str, str] = {
    "工作": "工作 职业", "职业": "工作 职业", "住": "住在", "过敏": "过敏", "乐器": "乐器 弹 拉",
    "宠物": "宠物 养 猫 狗", "名字": "名字 名叫", "爱好": "爱好 喜欢", "语言": "语言 说",
}  # fmt: skip

# -- topics ----------------------------------------------------------------------

LANGUAGES = frozenset({
    "go", "golang", "python", "rust", "java", "javascript", "typescript", "c", "c++", "c#", "ruby",
    "kotlin", "swift", "haskell", "scala", "elixir", "php", "lua", "zig", "perl", "r", "julia",
})  # fmt: skip
TOPIC_WORDS: dict[str, set[str]] = {
    "food": {"coffee", "tea", "pizza", "sushi", "noodles", "food", "cooking", "cilantro", "咖啡", "茶", "美食", "火锅", "香菜"},
    "diet": {"vegetarian", "vegan", "pescatarian", "keto", "meat", "gluten", "alcohol", "吃素", "素食", "辣", "酒"},
    "health": {"allergic", "allergy", "intolerant", "diabetic", "lactose", "celiac", "过敏", "不耐受"},
    "music": {"music", "jazz", "rock", "piano", "guitar", "cello", "violin", "drums", "sing", "sings", "choir",
              "音乐", "钢琴", "吉他", "大提琴", "小提琴", "鼓", "唱歌"},
    "sports": {"football", "soccer", "basketball", "tennis", "running", "runs", "hiking", "swimming", "climbing",
               "yoga", "crossfit", "跑步", "篮球", "足球", "游泳", "爬山", "网球"},
    "travel": {"travel", "traveling", "travelling", "旅行", "旅游"},
    "reading": {"books", "reading", "novels", "读书", "小说"},
    "pets": {"cat", "cats", "dog", "dogs", "猫", "狗", "宠物"},
    "family": {"sister", "brother", "brothers", "wife", "husband", "kids", "children", "son", "daughter",
               "mother", "father", "married", "妹妹", "姐姐", "哥哥", "弟弟", "孩子", "妻子", "丈夫"},
    "languages": {"speaks", "spanish", "french", "english", "japanese", "portuguese", "英语", "法语", "日语"},
}  # fmt: skip
