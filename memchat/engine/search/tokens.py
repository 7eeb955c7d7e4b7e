"""Tokenisation (reference §4.1.1, §4.1.2): the one place text becomes search tokens.

* lower-cased, trimmed text; Han text is segmented with jieba's search mode
  (loaded lazily; a run its HMM glued together is cut again by jieba's tagger,
  so a name glued to the next word is a token too), kana/hangul text is split
  into raw CJK runs, and Latin letter/digit runs are always added;
* CJK trigrams, so unsegmented CJK still matches partially;
* the token sets of near-duplicate detection (§4.1.5);
* an English stemmer (Snowball, or a light suffix stripper) for hybrid search's
  keyword side, and the script share of a query.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

__all__ = [
    "CJK_STOPWORDS",
    "ENGLISH_STOPWORDS",
    "FUNCTION_WORDS",
    "build_search_tokens",
    "jaccard_tokens",
    "latin_share",
    "lexical_query",
    "stem_text",
]

_MIN_ENGLISH_TOKEN_BYTES = 2
_MIN_CJK_TOKEN_RUNES = 2
_CJK_GRAM_LEN = 3

_STATS_CACHE_SIZE = 50_000
_QUERY_CACHE_SIZE = 1_024

ENGLISH_STOPWORDS = frozenset(
    [
        "a", "an", "the", "and", "or", "of", "in", "on", "to", "for", "with", "is",
        "are", "am", "be", "been", "being", "was", "were", "this", "that", "these", "those",
    ]
)  # fmt: skip

CJK_STOPWORDS = frozenset(
    [
        "的", "了", "是", "在", "和", "有", "我", "他", "她", "它",
        "这", "那", "都", "也", "就", "不", "会", "到", "说", "对",
        "一个", "一些", "一种", "这个", "那个", "我们", "你们", "他们", "她们", "它们",
        "自己", "已经", "还是", "如果", "因为", "所以", "然后", "用户",
    ]
)  # fmt: skip

# ---------------------------------------------------------------------------
# Character classes
# ---------------------------------------------------------------------------

# Unicode Script property ranges (Scripts.txt, Unicode 15.1; Python's stdlib has
# no script lookup). "CJK" means the scripts Han, Hiragana, Katakana and Hangul.
_HAN_RANGES: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x2E99), (0x2E9B, 0x2EF3), (0x2F00, 0x2FD5), (0x3005, 0x3005), (0x3007, 0x3007),
    (0x3021, 0x3029), (0x3038, 0x303B), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFA6D),
    (0xFA70, 0xFAD9), (0x16FE2, 0x16FE3), (0x16FF0, 0x16FF1), (0x20000, 0x2A6DF), (0x2A700, 0x2B739),
    (0x2B740, 0x2B81D), (0x2B820, 0x2CEA1), (0x2CEB0, 0x2EBE0), (0x2EBF0, 0x2EE5D), (0x2F800, 0x2FA1D),
    (0x30000, 0x3134A), (0x31350, 0x323AF),
)  # fmt: skip
_KANA_HANGUL_RANGES: tuple[tuple[int, int], ...] = (
    # Hiragana
    (0x3041, 0x3096), (0x309D, 0x309F), (0x1B001, 0x1B11F), (0x1B132, 0x1B132), (0x1B150, 0x1B152),
    (0x1F200, 0x1F200),
    # Katakana
    (0x30A1, 0x30FA), (0x30FD, 0x30FF), (0x31F0, 0x31FF), (0x32D0, 0x32FE), (0x3300, 0x3357),
    (0xFF66, 0xFF6F), (0xFF71, 0xFF9D), (0x1AFF0, 0x1AFF3), (0x1AFF5, 0x1AFFB), (0x1AFFD, 0x1AFFE),
    (0x1B000, 0x1B000), (0x1B120, 0x1B122), (0x1B155, 0x1B155), (0x1B164, 0x1B167),
    # Hangul
    (0x1100, 0x11FF), (0x302E, 0x302F), (0x3131, 0x318E), (0x3200, 0x321E), (0x3260, 0x327E),
    (0xA960, 0xA97C), (0xAC00, 0xD7A3), (0xD7B0, 0xD7C6), (0xD7CB, 0xD7FB), (0xFFA0, 0xFFBE),
    (0xFFC2, 0xFFC7), (0xFFCA, 0xFFCF), (0xFFD2, 0xFFD7), (0xFFDA, 0xFFDC),
)  # fmt: skip


def _char_class(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in sorted(ranges))


_HAN_CLASS = _char_class(_HAN_RANGES)
_CJK_CLASS = _char_class(_HAN_RANGES + _KANA_HANGUL_RANGES)
_HAN_RE = re.compile(f"[{_HAN_CLASS}]")
_CJK_RE = re.compile(f"[{_CJK_CLASS}]")
_CJK_RUN_RE = re.compile(f"[{_CJK_CLASS}]+")
_ASCII_WORD_RE = re.compile(r"[a-z0-9]+")

_CJK_SORTED = sorted(_HAN_RANGES + _KANA_HANGUL_RANGES)
_CJK_STARTS = [lo for lo, _ in _CJK_SORTED]
_CJK_ENDS = [hi for _, hi in _CJK_SORTED]

# Go's unicode.IsSpace (Python's str.isspace() also accepts U+001C..U+001F).
_SPACE_CHARS = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_SPACE_SET = frozenset(_SPACE_CHARS)

# Per-character flags, memoised.
_F_CJK = 1  # script Han, Hiragana, Katakana or Hangul
_F_WORD = 2  # letter (L*) or decimal digit (Nd): Go's IsLetter || IsDigit
_F_LETTER_NUMBER = 4  # letter (L*) or number (N*): Go's IsLetter || IsNumber
_F_SPACE = 8  # Go's unicode.IsSpace
_F_PUNCT = 16  # punctuation (P*) or symbol (S*)

_FLAGS: dict[str, int] = {}


def _is_cjk_code(cp: int) -> bool:
    i = bisect_right(_CJK_STARTS, cp) - 1
    return i >= 0 and cp <= _CJK_ENDS[i]


def _flags(ch: str) -> int:
    flags = _FLAGS.get(ch)
    if flags is None:
        flags = 0
        if _is_cjk_code(ord(ch)):
            flags |= _F_CJK
        category = unicodedata.category(ch)
        if ch.isalpha() or category == "Nd":
            flags |= _F_WORD
        if category[0] in "LN":
            flags |= _F_LETTER_NUMBER
        if ch in _SPACE_SET:
            flags |= _F_SPACE
        if category[0] in "PS":
            flags |= _F_PUNCT
        _FLAGS[ch] = flags
    return flags


def _trim(text: str) -> str:
    return text.strip(_SPACE_CHARS)


def _is_cjk_token(token: str) -> bool:
    return bool(token) and all(_flags(ch) & _F_CJK for ch in token)


def _is_word_token(token: str) -> bool:
    """Letters/digits only, no CJK rune (the reference's ``isASCIIAlnumToken``)."""
    return bool(token) and all(_flags(ch) & (_F_CJK | _F_WORD) == _F_WORD for ch in token)


def _is_punct_token(token: str) -> bool:
    return all(_flags(ch) & _F_PUNCT for ch in token)


def _is_cjk_stopword(word: str) -> bool:
    if not word:
        return False
    if word in CJK_STOPWORDS:
        return True
    return _is_cjk_token(word) and all(ch in CJK_STOPWORDS for ch in word)


def _keep_single_cjk_rune(text: str) -> bool:
    """True when ``text``, ignoring spaces and punctuation, is exactly one CJK rune."""
    kept = ""
    count = 0
    for ch in _trim(text):
        flags = _flags(ch)
        if flags & (_F_SPACE | _F_PUNCT):
            continue
        count += 1
        if count > 1:
            return False
        kept = ch
    return count == 1 and bool(_flags(kept) & _F_CJK)


# ---------------------------------------------------------------------------
# jieba (loaded lazily, only for text containing Han characters)
# ---------------------------------------------------------------------------

_jieba: Any = None
_jieba_state = 0  # 0: not tried, 1: loaded, -1: unavailable


def jieba_module() -> Any:
    """jieba, initialised on first use (its dictionary: about a second), or None
    when it cannot load (CJK text is then split into raw runs)."""
    global _jieba, _jieba_state
    if _jieba_state == 0:
        try:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba = jieba
            _jieba_state = 1
        except Exception:  # missing package or unreadable dictionary: raw CJK runs instead
            _jieba = None
            _jieba_state = -1
    return _jieba


def tagger_module() -> Any:
    """jieba's part-of-speech tagger (``jieba.posseg``; its model loads on first
    use, about half a second after jieba), or None when it cannot load."""
    if jieba_module() is None:
        return None
    try:
        import jieba.posseg
    except Exception:  # an unreadable model: no tagger
        return None
    return jieba.posseg


# ---------------------------------------------------------------------------
# Tokenisation (§4.1.1, §4.1.2)
# ---------------------------------------------------------------------------


def _cjk_runs(text: str) -> list[str]:
    return _CJK_RUN_RE.findall(text)


def _raw_cjk_tokens(text: str, keep_single: bool) -> list[str]:
    return [
        segment
        for segment in _cjk_runs(text)
        if (keep_single or len(segment) >= _MIN_CJK_TOKEN_RUNES) and not _is_cjk_stopword(segment)
    ]


def _normalize_segment_token(token: str) -> str:
    token = _trim(token.lower())
    if not token or _is_word_token(token) or _is_cjk_token(token):
        return token
    return "".join(ch for ch in token if _flags(ch) & (_F_CJK | _F_WORD))


#: An unknown run of at least this many runes is cut again by the tagger.
_GLUED_MIN_RUNES = 3
#: Runes after the run the tagger reads with it.
_GLUED_CONTEXT = 2


#: What Chinese speakers put before a surname to name someone familiar (小刘, 老陈, 阿黄).
FAMILIAR_PREFIXES = frozenset("小老阿")
#: The hundred commonest surnames (one rune each).
SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝"
    "龚邵万钱严覃武戴莫孔向汤"
)


def is_familiar_name(word: str) -> bool:
    """老周, 小马: a prefix of familiarity and a surname."""
    return len(word) == 2 and word[0] in FAMILIAR_PREFIXES and word[1] in SURNAMES


def _familiar_name(before: str, word: str, known: Any) -> str:
    """小刘 when jieba cut "小刘是…" as 小 + 刘是 (or 小 + 刘): a prefix of familiarity alone,
    then a surname that starts no dictionary word. jieba knows some such names (小张,
    老李, 老王) and keeps them whole; the others it splits, so a search for 小刘 matched
    nothing. A surname that starts a real word stays that word (小 + 程序 is no 小程)."""
    if not word or not is_familiar_name(before + word[0]):
        return ""
    if len(word) > 1 and known.get(word):
        return ""
    return before + word[0]


def _tagged_words(text: str) -> list[str]:
    """``text`` as jieba's part-of-speech tagger cuts it (empty without the tagger)."""
    tagger = tagger_module()
    if tagger is None:
        return []
    try:
        return [pair.word for pair in tagger.cut(text)]
    except Exception:  # the runs as the search mode gave them
        return []


def _segment_han(text: str, keep_single: bool) -> list[str]:
    jieba = jieba_module()
    if jieba is None:
        return _raw_cjk_tokens(text, keep_single)
    try:
        words = list(jieba.cut_for_search(text, HMM=True))
    except Exception:
        return _raw_cjk_tokens(text, keep_single)
    tokens: list[str] = []

    def add(token: str) -> None:
        if not token or _is_punct_token(token):
            return
        if _is_word_token(token):
            return  # Latin runs come from the English pass; no double counting
        if _is_cjk_token(token):
            if not keep_single and len(token) < _MIN_CJK_TOKEN_RUNES:
                return
            if _is_cjk_stopword(token):
                return
        tokens.append(token)

    known = jieba.dt.FREQ
    at = 0
    before = ""
    for word in words:
        start, at = at, at + len(word)
        token = _normalize_segment_token(word)
        name = _familiar_name(before, word, known)
        before = word
        if name:
            add(name)
            if len(word) == 2:
                continue  # 刘是 of 小刘是: the surname glued to the next rune, no word
        add(token)
        if len(token) >= _GLUED_MIN_RUNES and not known.get(token) and _is_cjk_token(token):
            # The search mode's HMM glues an unknown name to what follows it: "林晓对
            # 芒果过敏" gives 林晓对, "孙浩和林晓的…" gives 孙浩和林晓, so a search for 林晓
            # missed both. The tagger, which knows names, cuts them apart (林晓 + 对,
            # 孙浩 + 和 + 林晓) given the run and what follows it ("孙浩养" alone reads
            # as one name; "孙浩养了一" as 孙浩 + 养 + 了): its words inside the run are
            # tokens too.
            inside = 0
            for part in _tagged_words(text[start : at + _GLUED_CONTEXT]):
                inside += len(part)
                if inside > len(word):
                    break
                if part != word:
                    add(_normalize_segment_token(part))
    return tokens


def _english_tokens(text: str) -> list[str]:
    """Maximal runs of letters/digits; a CJK rune or any other character ends a run."""
    tokens: list[str] = []
    start = -1
    for i, ch in enumerate(text):
        if _flags(ch) & (_F_CJK | _F_WORD) == _F_WORD:
            if start < 0:
                start = i
        elif start >= 0:
            tokens.append(text[start:i])
            start = -1
    if start >= 0:
        tokens.append(text[start:])
    # Byte length >= 2: a single non-ASCII letter is two or more UTF-8 bytes.
    return [t for t in tokens if (len(t) >= 2 or not t.isascii()) and t not in ENGLISH_STOPWORDS]


def _primary_tokens(text: str, keep_single: bool) -> list[str]:
    """Primary tokens of already lower-cased and trimmed text, repeats kept."""
    if text.isascii():
        return [t for t in _ASCII_WORD_RE.findall(text) if len(t) >= 2 and t not in ENGLISH_STOPWORDS]
    tokens: list[str] = []
    if _HAN_RE.search(text):
        tokens.extend(_segment_han(text, keep_single))
    elif _CJK_RE.search(text):
        tokens.extend(_raw_cjk_tokens(text, keep_single))
    tokens.extend(_english_tokens(text))
    return tokens


def _cjk_trigrams(lowered: str) -> list[str]:
    """Every 3-rune window of every CJK run of >= 3 runes, stopword trigrams skipped."""
    if lowered.isascii():
        return []
    grams: list[str] = []
    for run in _cjk_runs(lowered):
        for i in range(len(run) - _CJK_GRAM_LEN + 1):
            gram = run[i : i + _CJK_GRAM_LEN]
            if not _is_cjk_stopword(gram):
                grams.append(gram)
    return grams


def _normalize_phrase(lowered: str) -> str:
    """Every rune that is not CJK or a letter/digit becomes a space; whitespace collapsed."""
    if lowered.isascii():
        return " ".join(_ASCII_WORD_RE.findall(lowered))
    chars = [ch if _flags(ch) & (_F_CJK | _F_WORD) else " " for ch in lowered]
    return " ".join("".join(chars).split())


def _dedup(tokens: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(t for t in tokens if t))


@lru_cache(maxsize=_QUERY_CACHE_SIZE)
def _search_tokens(trimmed_lower: str) -> tuple[str, ...]:
    if not trimmed_lower:
        return ()
    return tuple(_dedup(_primary_tokens(trimmed_lower, _keep_single_cjk_rune(trimmed_lower))))


def build_search_tokens(text: str) -> list[str]:
    """Primary query tokens (§4.1.1): de-duplicated, in order of appearance."""
    return list(_search_tokens(_trim(text.lower())))


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def _jaccard_set(text: str) -> frozenset[str]:
    return frozenset(_search_tokens(_trim(text.lower()))) | frozenset(_cjk_trigrams(text.lower()))


def jaccard_tokens(text: str) -> set[str]:
    """The token set used for near-duplicate detection: search tokens plus CJK trigrams."""
    return set(_jaccard_set(text))


_stemmer: Any = None
_stemmer_state = 0


def _get_stemmer() -> Any:
    global _stemmer, _stemmer_state
    if _stemmer_state == 0:
        try:
            import snowballstemmer

            _stemmer = snowballstemmer.stemmer("english")
            _stemmer_state = 1
        except Exception:  # not installed: a light suffix stripper instead
            _stemmer_state = -1
    return _stemmer


_LATIN_WORD_RE = re.compile(r"[A-Za-z]+")
_LIGHT_SUFFIXES = ("ing", "ed", "es", "s", "ly")


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def _stem_word(word: str) -> str:
    stemmer = _get_stemmer()
    if stemmer is not None:
        return str(stemmer.stemWord(word))
    for suffix in _LIGHT_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stem_text(text: str) -> str:
    """``text`` lower-cased with every Latin word replaced by its English stem."""
    return _LATIN_WORD_RE.sub(lambda m: _stem_word(m.group(0).lower()), text)


#: English function words: NLTK's English stopword list (179 words; its
#: contractions as the word pieces ``_LATIN_WORD_RE`` cuts them into), and what the
#: SMART stoplist adds of the same kind: the modal verbs and the light verbs "get"
#: and "go" in every form ("How do I get to work?" matched "Raj is getting married"
#: by "get" alone). Standard lists, not words fitted to memchat's data; SMART's
#: others ("like", "want", "new", "use") are content words in a question about a
#: person, and taking them too lost LoCoMo questions (benchmarks/README.md).
FUNCTION_WORDS = frozenset(
    [
        "would", "could", "might", "must", "shall", "ought",
        "get", "gets", "getting", "got", "gotten", "go", "goes", "going", "went", "gone",
        "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "your", "yours", "yourself",
        "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its",
        "itself", "they", "them", "their", "theirs", "themselves", "what", "which", "who", "whom",
        "this", "that", "these", "those", "am", "is", "are", "was", "were", "be", "been", "being",
        "have", "has", "had", "having", "do", "does", "did", "doing", "a", "an", "the", "and", "but",
        "if", "or", "because", "as", "until", "while", "of", "at", "by", "for", "with", "about",
        "against", "between", "into", "through", "during", "before", "after", "above", "below", "to",
        "from", "up", "down", "in", "out", "on", "off", "over", "under", "again", "further", "then",
        "once", "here", "there", "when", "where", "why", "how", "all", "any", "both", "each", "few",
        "more", "most", "other", "some", "such", "no", "nor", "not", "only", "own", "same", "so",
        "than", "too", "very", "s", "t", "can", "will", "just", "don", "should", "now", "d", "ll", "m",
        "o", "re", "ve", "y", "ain", "aren", "couldn", "didn", "doesn", "hadn", "hasn", "haven", "isn",
        "ma", "mightn", "mustn", "needn", "shan", "shouldn", "wasn", "weren", "won", "wouldn",
    ]
)  # fmt: skip


def _blank_function_word(match: re.Match[str]) -> str:
    return " " if match.group(0).lower() in FUNCTION_WORDS else match.group(0)


@lru_cache(maxsize=_QUERY_CACHE_SIZE)
def lexical_query(query: str) -> str:
    """A query as hybrid search's keyword side reads it: its English function words
    dropped (unless nothing else is left) and every Latin word stemmed.

    The reference's keyword scoring drops only 22 stopwords, so in a question the
    words that frame it ("who", "my", "at", "how", "do") matched memories as any
    content word does: "Who was my closest mate at uni?" ranked five memories
    holding "at" or "who" above the one about a best friend from university. Only
    the query loses them: the memories, their index and its statistics stay as
    they are (keyword search keeps the reference's scoring)."""
    words = _LATIN_WORD_RE.findall(query)
    if any(w.lower() in FUNCTION_WORDS for w in words):
        kept = _LATIN_WORD_RE.sub(_blank_function_word, query)
        if _search_tokens(_trim(kept.lower())):  # something to look up is left
            query = kept
    return stem_text(query)


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def latin_share(text: str) -> float:
    """Share of the text's letters that are not CJK (1.0 for English, 0.0 for Chinese;
    digits are no letters).

    Hybrid search reads it for each of a query's hundred best candidates, every
    search, on the event loop: read a character at a time, that was about a
    millisecond (benchmarks/README.md, "Thirty-sixth session"). Text without CJK
    (checked at C speed) is 1.0 at once, and a text read before is not read again."""
    if text.isascii() or _CJK_RE.search(text) is None:
        return 1.0
    # Letters only: digits belong to no script ("华为Mate 60 Pro" is not half English).
    letters = [_flags(ch) for ch in text if ch.isalpha()]
    if not letters:  # CJK numerals alone (〇)
        return 1.0
    cjk = sum(1 for f in letters if f & _F_CJK)
    return 1.0 - cjk / len(letters)
