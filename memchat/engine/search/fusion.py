"""Hybrid search: dense and keyword candidates fused into one 0–1 relevance.

The reference fuses the two lists with RRF (k = 60) and shows the RRF sum
(≈ 0.016–0.033) to the model as a "similarity score (0-1)". We fuse scores
that are each an honest 0–1 similarity instead:

    mix       = w_dense · dense + w_keyword · keyword + w_tokens · token_similarity
    relevance = max(mix, floor · dense)

* ``dense`` is the store's cosine mapped to a relevance by the embedder's
  calibration (dense.py: a ramp through two anchors measured on data);
* ``keyword`` is the engine's keyword score (§4.1.3, in [0, 1]) over a stemmed
  view of query and memories (Snowball English on Latin words; CJK left to
  jieba and the trigrams), IDF over the user's whole collection; the query
  loses its English function words first ("who", "my", "at": tokens.lexical_query);
* ``token_similarity`` (late interaction) re-ranks the best ``HYBRID_RERANK_DEPTH``
  candidates when the embedder gives per-token vectors (the default's are
  static MiniLM word-piece vectors, engine/pieces.py: a lookup, no model run):
  the mean over the query's content pieces of their best cosine with a piece
  of the memory, each piece weighted by how rarely the candidates match it.
  Without per-token vectors, or for a memory in the other script than the
  query's (MiniLM's pieces read no CJK), its weight goes to ``dense``.
* ``floor · dense`` is the semantic floor: a memory whose meaning clearly
  answers the query (dense near 1) keeps a high relevance even when it shares
  no word with it, so the keyword side cannot bury it under memories that
  merely repeat the query's words.

Episode neighbourhood: memories with the same ``event_time`` as one of the
``HYBRID_EPISODE_SEEDS`` best candidates (things recorded for one moment,
e.g. one conversation session) move ``HYBRID_EPISODE_WEIGHT`` of the way up to
that seed's score, never past it.

Relevance floor: a candidate without a keyword match (score below the keyword
search's 0.3 minimum) stays only if its fused relevance is above the
calibration's "unrelated" level (0.1) and its cosine stands out of this query's
own background — the median and robust spread (MAD) of the query's cosines over
the user's memories, per script (Latin / CJK) when every memory is at hand —
by at least ``max(1.5, Φ⁻¹(1 − α/N))`` spreads (α = 2, N memories), or its
cosine is at least the calibration's median answer's (a few memories on one topic
make a background of their own, out of which their answer cannot stand), or both
models stand it out together: its token similarity over the re-ranked candidates'
and its cosine each by at least one spread, and their sum by √2 times the level
(Stouffer's combined z). A query that
means nothing to this user (``zzz``) so finds nothing instead of every memory
at 0.05–0.2. The floor is then one score level: a candidate without evidence of
its own stays if it scores at least as much as the least of those with it (less
2 %, a tie), so results never hide a memory that scores more than one they show.
Cross-script: a memory in another script than the query's that
stands out of its own script's background is ranked as if its block sat where
the query's own script's block does (e5's cosines across languages sit lower as
a block).

Answer type: a question asking for one of the types of search/answer_types.py
(an occupation: "What's my job?", "我老公是干什么的？"; a birth, a wedding, waking
and sleeping, a pastime, a home, an appointment, an age, a pet) lifts each candidate that gives
it for the person asked about (the user, a relative, a named person)
``HYBRID_TYPED_LIFT`` of the way to 1, and that counts as evidence, as a keyword
match does. The models read "job" as close to the word "work", not to "runs a
farm" or "当护士", and a birthday not as "was born on".

Query-side adjustments: weights of a model that cannot read CJK (MiniLM's
dense vector and its tokens) are scaled by the share of the query that is not
CJK, the rest going to the dense weight when the dense model reads CJK (the
default's does), else to the keyword weight; and when the query names a date,
month or year, ``relevance`` becomes ``(1 − w_time) · relevance + w_time ·
[event_time falls in that period]``. Every term is in [0, 1] and the weights
sum to 1, so the score stays a 0–1 relevance. Filters, kind fallback,
ordering, dedup and truncation then run as in keyword search (results.py).
Settings chosen on LoCoMo and the paraphrase set (benchmarks/README.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import cached_property
from operator import itemgetter

from memchat.engine.model import Entry, SearchOptions, utc

from .answer_types import asked_about, states
from .dense import UNCALIBRATED, DenseCalibration, weighted_piece_means
from .index import KeywordStats, NewestFirst
from .keyword import MIN_KEYWORD_SCORE, lexical_scores
from .results import DEFAULT_MAX_RESULTS, _Pair, finish, matches_filters
from .tokens import _trim, latin_share

__all__ = [
    "HYBRID_DENSE_DEPTH",
    "HYBRID_EPISODE_SEEDS",
    "HYBRID_EPISODE_WEIGHT",
    "HYBRID_RERANK_DEPTH",
    "HYBRID_SEMANTIC_FLOOR",
    "HYBRID_TIME_WEIGHT",
    "HYBRID_WEIGHTS",
    "HybridRanking",
    "query_periods",
]

#: Fusion weights with token-level re-ranking (dense, keyword, tokens); sum 1. The
#: dense side gained weight when the default's vectors became a blend of two models
#: (benchmarks/README.md, "Thirtieth session"): 0.3/0.4/0.3 before.
HYBRID_WEIGHTS = (0.4, 0.35, 0.25)
#: A memory's relevance is at least this share of its calibrated dense relevance.
HYBRID_SEMANTIC_FLOOR = 0.5
#: Weight of "the memory's event_time is in the period the query names".
HYBRID_TIME_WEIGHT = 0.1
#: Dense candidates asked of the store (at least; more for large limits).
HYBRID_DENSE_DEPTH = 100
#: How many of the best candidates are re-ranked with token similarity.
HYBRID_RERANK_DEPTH = 100
#: Share of the way a memory moves up to the best candidate sharing its event_time.
HYBRID_EPISODE_WEIGHT = 0.3
#: How many of the best candidates lift the memories of their episode.
HYBRID_EPISODE_SEEDS = 3
#: Relevance floor (benchmarks/README.md, "Relevance floor"). A candidate without a
#: keyword match (score < ``MIN_KEYWORD_SCORE``) is kept only when (1) its fused
#: relevance is above ``HYBRID_UNRELATED_RELEVANCE``, what the calibration gives the
#: median unrelated memory, and (2) its cosine is an outlier of this query's own
#: background: at least ``max(HYBRID_MIN_Z, Φ⁻¹(1 − α/N))`` robust standard
#: deviations above the median cosine over the user's N memories (α =
#: ``HYBRID_BACKGROUND_ALPHA``: about α memories of a normal background pass by
#: chance). A candidate scoring at least as much as one kept so stays too.
#: ``None`` turns the floor off.
HYBRID_BACKGROUND_ALPHA: float | None = 2.0
#: The outlier level never sinks below this many spreads (small collections).
HYBRID_MIN_Z = 1.5
#: Scores this share or less below the least score with evidence of its own tie with
#: it (the floor keeps them): the same text's cosines differ by about as much between
#: machines (4-bit vectors, BLAS kernels), and a cut between 0.135 and 0.137 is
#: a toss of the machine, not of the meaning (benchmarks/README.md, "Thirty-third session").
HYBRID_LEVEL_TIE = 0.02
#: Fused relevance a candidate must exceed: the calibration's "unrelated" anchor.
HYBRID_UNRELATED_RELEVANCE = 0.1
#: A dense relevance at which a candidate has evidence of its own, however it stands
#: out of the background: the calibration's median answer (dense.py; halfway between
#: its anchors). 24 nonsense queries to each of the paraphrase sets' users found no
#: memory more with it (benchmarks/README.md, "Thirty-eighth session").
HYBRID_ANSWER_RELEVANCE = 0.5
#: Two models each standing a candidate out of its background by at least this many
#: spreads, and together (Stouffer: the sum of the two z over √2) by the outlier
#: level, is evidence too: "What's my job?" over ten memories of Alice's stands
#: "Alice works as a nurse" out by 1.4 spreads of cosine and 1.9 of token
#: similarity, each short of the level (1.5) alone (benchmarks/README.md,
#: "Thirty-ninth session").
HYBRID_AGREEMENT_MIN_Z = 1.0
#: Share of the way to 1 a memory moves when the question asks for a type of answer
#: (an occupation, a birth…) and the memory gives it, of the person asked about
#: (search/answer_types.py). It is evidence of relevance too, as a keyword match is.
HYBRID_TYPED_LIFT = 0.15
#: Rank a memory in the other script than the query's against its own block (see __init__).
HYBRID_SCRIPT_ALIGN = True
#: Per-script backgrounds only up to this many memories (a filtered search over a
#: large collection gets every cosine; reading every text's script there costs time).
HYBRID_SCRIPT_GROUPS_MAX = 2000
#: Fewer memories than this: no background to speak of; condition (1) alone applies.
HYBRID_BACKGROUND_MIN = 8
#: The background's spread is at least this (cosine units), so a query whose
#: cosines are all alike does not make every small difference an outlier.
HYBRID_MIN_SPREAD = 0.005


_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTHS = {name: i + 1 for i, name in enumerate(_MONTH_NAMES)}
_MONTH_ALT = "|".join([*_MONTHS, *(m[:3] for m in _MONTHS if m != "may")])
#: Between a date's parts: spaces, or a comma with or without them ("December 1,2023").
_SEP = r"(?:\s*,\s*|\s+)"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_ALT})\.?{_SEP}(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?{_SEP}(\d{{4}})\b")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH_ALT})\.?{_SEP}(\d{{4}})\b")
_YEAR = re.compile(r"(?<![\d-])((?:19|20)\d\d)(?![\d-])")
#: Slack after a named period: an event is often recorded a few days after it happened.
_PERIOD_SLACK_DAYS = 7


def _month_number(name: str) -> int:
    name = name.lower()
    return _MONTHS.get(name) or next(v for k, v in _MONTHS.items() if k.startswith(name))


def query_periods(query: str) -> list[tuple[datetime, datetime]]:
    """The [start, end) periods an English query names: a day (±1 day), a month
    or a year (each with a week of slack after it). Empty when it names none."""
    from datetime import timedelta

    text = query.lower()
    periods: list[tuple[datetime, datetime]] = []

    def day(y: int, m: int, d: int) -> None:
        try:
            start = datetime(y, m, d, tzinfo=UTC)
        except ValueError:
            return
        periods.append((start - timedelta(days=1), start + timedelta(days=2)))

    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy"), (_ISO_DATE, "ymd")):
        for match in pattern.finditer(text):
            a, b, c = match.groups()
            if order == "dmy":
                day(int(c), _month_number(b), int(a))
            elif order == "mdy":
                day(int(c), _month_number(a), int(b))
            else:
                day(int(a), int(b), int(c))
        text = pattern.sub(" ", text)
    slack = timedelta(days=_PERIOD_SLACK_DAYS)
    for match in _MONTH_YEAR.finditer(text):
        year, month = int(match.group(2)), _month_number(match.group(1))
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
        periods.append((start, end + slack))
    text = _MONTH_YEAR.sub(" ", text)
    for match in _YEAR.finditer(text):
        year = int(match.group(1))
        periods.append((datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC) + slack))
    return periods


def background(cosines: Sequence[float], size: int | None = None) -> tuple[float, float] | None:
    """(centre, spread) of a query's cosines over the user's memories, robustly:
    the median and 1.4826 × MAD when ``cosines`` holds them all; when it holds the
    store's best ``K`` of ``size`` memories, a normal fitted to the lower half of
    those K (rank k sits at the upper-tail share (k − ½)/size; least squares of
    cosine on its normal quantile). None with too few memories to tell."""
    from statistics import NormalDist, median

    values = sorted((float(c) for c in cosines), reverse=True)
    n = max(size or 0, len(values))
    if n < HYBRID_BACKGROUND_MIN or not values:
        return None
    if len(values) >= n:
        centre = median(values)
        spread = 1.4826 * median(abs(v - centre) for v in values)
        return centre, max(spread, HYBRID_MIN_SPREAD)
    normal = NormalDist()
    ranks = range(len(values) // 2, len(values))
    xs = [normal.inv_cdf(1.0 - (k + 0.5) / n) for k in ranks]
    ys = [values[k] for k in ranks]
    if len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx > 0 else 0.0
    spread = max(slope, HYBRID_MIN_SPREAD)
    return my - spread * mx if slope > 0 else my, spread


def outlier_level(size: int, alpha: float) -> float:
    """``Φ⁻¹(1 − α/size)``: the z a background cosine exceeds with probability α/size."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1.0 - min(alpha / max(size, 1), 0.5))


def _max_level(a: float | None, b: float | None) -> float | None:
    """The stricter of two "at least this keyword score" levels (None: unreachable)."""
    return None if a is None or b is None else max(a, b)


def _in_periods(entry: Entry, periods: Sequence[tuple[datetime, datetime]]) -> bool:
    event_time = entry.memory.event_time
    if event_time is None:
        return False
    when = utc(event_time)
    return any(start <= when < end for start, end in periods)


def memories_in_periods(
    entries: Iterable[Entry], periods: Sequence[tuple[datetime, datetime]], limit: int
) -> list[Entry] | None:
    """The active ones of ``entries`` whose event_time lies in one of ``periods``
    ([start, end)); None when more than ``limit`` do (``PeriodStore``'s answer, for
    a store that has its entries at hand)."""
    found = [e for e in entries if not e.is_deleted and _in_periods(e, periods)]
    return None if len(found) > limit else found


class HybridRanking:
    """Stage one of hybrid search: every candidate with its dense and keyword
    similarities, ranked. ``rerank_targets`` names the candidates worth a
    token-level look; ``results`` applies filters, fallback, order, dedup."""

    def __init__(
        self,
        keyword_entries: Sequence[Entry],
        dense_entries: Sequence[Entry],
        query: str,
        *,
        dense_complete: bool = False,
        calibration: DenseCalibration = UNCALIBRATED,
        weights: tuple[float, float, float] = HYBRID_WEIGHTS,
        semantic_floor: float = HYBRID_SEMANTIC_FLOOR,
        time_weight: float = HYBRID_TIME_WEIGHT,
        collection_size: int | None = None,
        background_alpha: float | None = HYBRID_BACKGROUND_ALPHA,
        keyword_stats: KeywordStats | None = None,
        keyword_scores: Sequence[float] | None = None,
        period_entries: Sequence[Entry] | None = None,
        dense_view: int | None = None,
    ) -> None:
        """``dense_view``: only the first this-many of ``dense_entries`` (the nearest)
        shape the ranking: the dense floor, the query's background. The others are
        candidates with their own cosines and nothing more. So a search asking for
        many results (the TUI's filter: 200, so 1,000 nearest) ranks its best ones as
        one asking for 10 (the memory_search tool) does: with every asked depth
        shaping it, the top 3 of 42 of 760 LoCoMo questions differed between the two."""
        query = _trim(query or "")
        self.query = query
        self.calibration = calibration
        share = latin_share(query)
        self._query_cjk = share < 0.5
        dense_share = 1.0 if calibration.reads_cjk else share
        w_dense, w_keyword, w_tokens = weights
        # The token pieces are MiniLM's, which reads no CJK: for the CJK share of the
        # query their weight goes to the dense side when its model reads CJK (as for a
        # memory in the other script, _compute), so the keyword side weighs as much in
        # Chinese as in English; else, with the dense side's own, to the keyword side.
        # Handed to the keyword side, it put four fewer answers of the eight paraphrase
        # sets in the top 3, and none more (benchmarks/README.md, "Thirty-eighth session").
        unread_tokens = w_tokens * (1.0 - share)
        w_keyword += w_dense * (1.0 - dense_share) + (0.0 if calibration.reads_cjk else unread_tokens)
        w_dense = w_dense * dense_share + (unread_tokens if calibration.reads_cjk else 0.0)
        self.w_dense, self.w_keyword, self.w_tokens = w_dense, w_keyword, w_tokens * share
        self.semantic_floor = semantic_floor * dense_share
        self.periods = query_periods(query) if share > 0 else []
        self.time_weight = time_weight if self.periods else 0.0
        # ``period_entries``: every memory in those periods (the store listed them),
        # so a keyword holder the store left out is known to be outside them.
        self.periods_known = period_entries is not None
        #: The time lift a keyword holder the store left out may have.
        self._left_out_lift = 0.0 if self.periods_known else self.time_weight

        nearest = list(dense_entries)
        beyond = nearest[dense_view:] if dense_view is not None else []
        if beyond:
            nearest = nearest[:dense_view]
            dense_complete = False  # as a search of that depth sees it
        self.dense: dict[str, float] = {}
        self.cosine: dict[str, float] = {}

        def take(entries: Iterable[Entry]) -> None:
            for entry in entries:
                if entry.id and entry.id not in self.dense:
                    self.cosine[entry.id] = float(entry.score)
                    self.dense[entry.id] = calibration.relevance(float(entry.score))

        take(nearest)
        size = max(collection_size or 0, len(self.cosine), len(dense_entries))
        self.size = size
        self.background_alpha = background_alpha
        self.background = background(list(self.cosine.values()), size)
        # A query's cosines with memories in another script sit lower (or, for a query
        # with little meaning, higher) as a block: when every memory is here, each
        # script with at least three memories is centred on its own median, and the
        # spread is the pooled MAD around those centres.
        #: Memory ID → whether its text is CJK: every dense candidate when each script
        #: has its own background, else filled as the ranking asks (``_in_other_script``).
        self.script: dict[str, bool] = {}
        self.centres: dict[bool, float] = {}
        if self.background is not None and size <= min(len(self.cosine), HYBRID_SCRIPT_GROUPS_MAX):
            from statistics import median

            texts = {e.id: e.memory.text for e in nearest if e.id}
            self.script = {i: latin_share(texts[i]) < 0.5 for i in self.cosine}
            overall = self.background[0]
            for cjk in (False, True):
                group = [c for i, c in self.cosine.items() if self.script[i] == cjk]
                self.centres[cjk] = median(group) if len(group) >= 3 else overall
            residuals = [abs(c - self.centres[self.script[i]]) for i, c in self.cosine.items()]
            self.background = (overall, max(1.4826 * median(residuals), HYBRID_MIN_SPREAD))
            if HYBRID_SCRIPT_ALIGN and all(
                sum(1 for v in self.script.values() if v == cjk) >= 3 for cjk in (False, True)
            ):
                # Cross-language: a memory in the other script is ranked by how far it
                # stands above its own block, moved onto the query's block.
                mine = self.centres[self._query_cjk]
                level = self._outlier_level()
                for i, c in self.cosine.items():
                    shift = mine - self.centres[self.script[i]]
                    if shift > 0 and (self.z_score(i) or 0.0) >= level:
                        self.dense[i] = calibration.relevance(c + shift)
        # A memory the store did not return has at most the last returned cosine.
        self.dense_floor = 0.0 if dense_complete or not self.dense else min(self.dense.values())
        # Past the view: a keyword holder keeps the floor, as a search of that depth
        # gives it; the others (no candidates there) have their own cosines, below it.
        if beyond:
            held = {e.id for e in keyword_entries}
            take(e for e in beyond if e.id not in held)

        self.entries: dict[str, Entry] = {e.id: e for e in dense_entries if e.id}
        self.keyword: dict[str, float] = {}
        scored = list(keyword_entries)
        if keyword_stats is not None and keyword_stats.df is not None:
            # The collection's document frequencies are known: a dense candidate the
            # store did not rank among its best keyword holders gets its keyword score too.
            # So does a memory in the periods the query names.
            listed = {e.id for e in scored}
            for entry in (*dense_entries, *(period_entries or ())):
                if entry.id and entry.id not in listed:
                    listed.add(entry.id)
                    scored.append(entry)
        if query and scored:
            scores = self._lexical_scores(scored, len(keyword_entries), keyword_scores, keyword_stats)
            for entry, score in zip(scored, scores, strict=True):
                if score > 0:
                    self.keyword[entry.id] = score
                    self.entries.setdefault(entry.id, entry)
        self.tokens: dict[str, float] = {}
        typed = asked_about(query) if query else None
        #: The candidates that give the type of answer the question asks for (search/answer_types.py).
        self.typed = (
            frozenset(i for i, e in self.entries.items() if states(e.memory.text, typed))
            if typed
            else frozenset()
        )
        self._scores = {memory_id: self._compute(memory_id) for memory_id in self.entries}
        #: The scores before the token re-rank (what chose its targets).
        self.first_scores = dict(self._scores)
        # Ties in the order results give them (newest first): the candidates worth a
        # token-level look must not depend on the order the store listed them in, and a
        # store that cut its keyword holders in that order left out only ones after them.
        self.order = sorted(self._scores, key=lambda i: (-self._scores[i], self.entries[i].newest_first))

    def _lexical_scores(
        self,
        scored: list[Entry],
        given: int,
        known: Sequence[float] | None,
        stats: KeywordStats | None,
    ) -> list[float]:
        """``lexical_scores`` of ``scored``, whose first ``given`` are the keyword
        candidates and ``known`` their scores if the caller has them: with the
        collection's document frequencies a memory's score does not depend on the
        others scored beside it, so only the dense candidates added after them are
        scored here (a second scoring of the 300 candidates was most of a hybrid
        search's own work at 10k memories)."""
        if known is None or len(known) != given:
            return lexical_scores(scored, self.query, stats)
        if len(scored) == given:
            return list(known)
        if stats is None or stats.df is None:
            return lexical_scores(scored, self.query, stats)
        return [*known, *lexical_scores(scored[given:], self.query, stats)]

    def _mix(self, memory_id: str, relevance: float) -> float:
        if self.time_weight:
            hit = 1.0 if _in_periods(self.entries[memory_id], self.periods) else 0.0
            relevance = (1.0 - self.time_weight) * relevance + self.time_weight * hit
        return relevance

    def score(self, memory_id: str) -> float:
        """The candidate's fused relevance in [0, 1]."""
        return self._scores[memory_id]

    def _in_other_script(self, memory_id: str) -> bool:
        cjk = self.script.get(memory_id)
        if cjk is None:
            cjk = self.script[memory_id] = latin_share(self.entries[memory_id].memory.text) < 0.5
        return cjk != self._query_cjk

    def _compute(self, memory_id: str) -> float:
        dense = self.dense.get(memory_id, self.dense_floor)
        keyword = self.keyword.get(memory_id, 0.0)
        token = self.tokens.get(memory_id)
        if token is not None and self._in_other_script(memory_id):
            token = None  # the word pieces cannot read it: their weight goes to dense
        if token is None:
            relevance = (self.w_dense + self.w_tokens) * dense + self.w_keyword * keyword
        else:
            relevance = self.w_dense * dense + self.w_keyword * keyword + self.w_tokens * token
        relevance = max(relevance, self.semantic_floor * dense)
        if memory_id in self.typed:
            relevance += HYBRID_TYPED_LIFT * (1.0 - relevance)
        return min(max(self._mix(memory_id, relevance), 0.0), 1.0)

    def rerank_targets(self, options: SearchOptions, depth: int = HYBRID_RERANK_DEPTH) -> list[Entry]:
        """The best ``depth`` candidates that pass the filters (and, for the kind
        fallback, the best others too): the ones token similarity should score."""
        if self.w_tokens <= 0 or depth <= 0:
            return []
        chosen: list[Entry] = []
        others: list[Entry] = []
        for memory_id in self.order:
            entry = self.entries[memory_id]
            if matches_filters(entry, options):
                if len(chosen) < depth:
                    chosen.append(entry)
            elif (
                options.kind
                and options.kind_fallback
                and len(others) < depth
                and matches_filters(entry, replace(options, kind=""))
            ):
                others.append(entry)
            if len(chosen) >= depth and (not options.kind_fallback or len(others) >= depth):
                break
        return chosen + others

    def set_token_similarities(self, similarities: dict[str, float]) -> None:
        """Token similarities of re-ranked candidates. Values from :func:`token_similarity`
        carry each query piece's best cosine: given together, the pieces are
        re-weighted by how rarely these candidates match them."""
        similarities = weighted_piece_means(similarities)
        for memory_id, value in similarities.items():
            if memory_id in self.entries:
                self.tokens[memory_id] = min(max(float(value), 0.0), 1.0)
                self._scores[memory_id] = self._compute(memory_id)
        for worked_out in ("_evident_level", "_token_background"):  # the scores moved: worked out again
            self.__dict__.pop(worked_out, None)

    def z_score(self, memory_id: str) -> float | None:
        """How many background spreads the candidate's cosine stands above this
        query's median cosine (None without a background or a cosine)."""
        cosine = self.cosine.get(memory_id)
        if cosine is None or self.background is None:
            return None
        centre, spread = self.background
        script = self.script.get(memory_id)
        if script is not None:
            centre = self.centres.get(script, centre)
        return (cosine - centre) / spread

    def relevant(self, memory_id: str) -> bool:
        """The relevance floor: a candidate stays if it has evidence of its own
        (:meth:`_evident`), or if it scores at least as much as one that has: a
        result never hides a memory that scores more than one it shows."""
        if self._evident(memory_id):
            return True
        level = self._evident_level
        return level is not None and self._scores[memory_id] >= level

    def _evident(self, memory_id: str) -> bool:
        """A keyword match (score ≥ ``MIN_KEYWORD_SCORE``), or a fused relevance above
        an unrelated memory's with a cosine that stands out of this query's
        background (module constants)."""
        alpha = self.background_alpha
        if alpha is None or self.keyword.get(memory_id, 0.0) >= MIN_KEYWORD_SCORE or memory_id in self.typed:
            return True
        if self._scores[memory_id] <= HYBRID_UNRELATED_RELEVANCE:
            return False
        if self.background is None or self._as_close_as_an_answer(memory_id):
            return True
        z = self.z_score(memory_id)
        if z is None:
            return False
        level = self._outlier_level()
        return z >= level or self._both_models_stand_it_out(memory_id, z, level)

    def _both_models_stand_it_out(self, memory_id: str, z: float, level: float) -> bool:
        """Whether the word pieces' similarity agrees with the cosine's ``z``: each
        stands the memory out of its own background by ``HYBRID_AGREEMENT_MIN_Z``
        spreads, and together (Stouffer's combined z) by the outlier ``level``. The
        pieces' background is the re-ranked candidates' in the query's script: the
        whole collection up to ``HYBRID_RERANK_DEPTH`` memories, past it the best
        ones, which sets it higher and so errs toward hiding."""
        token = self.tokens.get(memory_id)
        pieces = self._token_background
        if token is None or pieces is None or z < HYBRID_AGREEMENT_MIN_Z or self._in_other_script(memory_id):
            return False
        centre, spread = pieces
        token_z = (token - centre) / spread
        return token_z >= HYBRID_AGREEMENT_MIN_Z and (z + token_z) / math.sqrt(2) >= level

    @cached_property
    def _token_background(self) -> tuple[float, float] | None:
        """(centre, spread) of the token similarities of the candidates the query's
        word pieces can read (None: too few, or no pieces at all)."""
        if self.w_tokens <= 0:
            return None
        return background([t for i, t in self.tokens.items() if not self._in_other_script(i)])

    def _as_close_as_an_answer(self, memory_id: str) -> bool:
        """Whether the memory's cosine is at least the calibration's median answer's
        (a calibrated relevance of ``HYBRID_ANSWER_RELEVANCE``): as close to the query
        as the memory that answers a question typically is to it. A few memories on
        one topic (four in Chinese among thirty in English) make their own background,
        out of which the answer to a question on that topic cannot stand."""
        dense = self.dense.get(memory_id)
        return bool(self.calibration.model) and dense is not None and dense >= HYBRID_ANSWER_RELEVANCE

    @cached_property
    def _evident_level(self) -> float | None:
        """The least score of a candidate with evidence of its own, less the share
        that counts as a tie (``HYBRID_LEVEL_TIE``), and never an unrelated memory's
        or less (None: no candidate has any). Scores change with the token re-rank,
        which drops it to be worked out again."""
        least = min((s for i, s in self._scores.items() if self._evident(i)), default=None)
        if least is None:
            return None
        return max(least * (1.0 - HYBRID_LEVEL_TIE), math.nextafter(HYBRID_UNRELATED_RELEVANCE, 1.0))

    def _outlier_level(self) -> float:
        alpha = self.background_alpha if self.background_alpha is not None else HYBRID_BACKGROUND_ALPHA
        return max(HYBRID_MIN_Z, outlier_level(self.size, alpha or 1.0))

    def keyword_needed(
        self,
        results: Sequence[Entry],
        options: SearchOptions,
        limit: int,
        cutoff: float,
        after_key: NewestFirst | None,
    ) -> float | None:
        """The least keyword score at which a holder the store left out could still
        change these ``results`` (``limit`` of them); None when none could.

        The store left out holders scoring at most ``cutoff`` (one ranked exactly
        that comes after ``after_key`` in the results' order of equal scores,
        ``Entry.newest_first``; None: anywhere). Such a holder is no dense
        candidate: its dense side is the nearest ones' floor, the token re-rank never
        saw it, it may sit in a period the query names (counted as if it did, unless
        the store listed the memories in those periods: ``period_entries``)
        and be lifted by its episode (its event_time is not known here). It matters
        if it could (1) be one of the ``HYBRID_RERANK_DEPTH`` re-rank targets, which
        are chosen by score, then newest first (the targets, and the weights of their
        word pieces, would differ), (2) enter the results, past the relevance floor,
        the similarity threshold and the last result, or (3) be one of the seeds that
        lift their episode."""
        margin = 1e-9
        floor_drops = self.background_alpha is not None and self.background is not None
        # Kept from: a keyword match, or the score of a candidate with evidence of its
        # own (a holder with no cosine has none of its own below a keyword match).
        kept_from = MIN_KEYWORD_SCORE if floor_drops else 0.0
        evident_level = self._evident_level if floor_drops else None
        if evident_level is not None:
            reach = self._keyword_for(evident_level - margin)
            if reach is not None:
                kept_from = min(kept_from, reach)
        needed: list[float] = []

        def at_least(level: float | None) -> None:
            if level is not None:
                needed.append(level)

        # (1) The re-rank targets.
        if self.tokens:
            if len(self.order) < HYBRID_RERANK_DEPTH:
                needed.append(0.0)
            else:
                last_target = self.first_scores[self.order[HYBRID_RERANK_DEPTH - 1]]
                level = self._keyword_for(last_target - margin)
                if level is not None and level <= cutoff + margin and not self._behind(cutoff, after_key):
                    needed.append(level)
        # (2) The results.
        full = limit > 0 and len(results) >= limit
        if not (full and self._after_results(results[limit - 1], options, cutoff, after_key)):
            level_2: float | None = kept_from
            if options.similarity_threshold > 0:
                level_2 = _max_level(
                    level_2, self._keyword_for(self._unlifted(options.similarity_threshold) - margin)
                )
            if full:
                last = results[limit - 1].score or 0.0
                level_2 = _max_level(level_2, self._keyword_for(self._unlifted(last) - margin))
            at_least(level_2)
        # (3) The seeds of the episode lift.
        if self._lifts():
            kept = sorted((s for i, s in self._scores.items() if self.relevant(i)), reverse=True)
            level_3: float | None = kept_from
            if len(kept) >= HYBRID_EPISODE_SEEDS:
                level_3 = _max_level(level_3, self._keyword_for(kept[HYBRID_EPISODE_SEEDS - 1] - margin))
            at_least(level_3)
        if not needed:
            return None
        level = min(needed)
        return level if level <= cutoff + margin else None

    def _pre_rerank(self, keyword: float) -> float:
        """The score of a memory that is no dense candidate and was not re-ranked,
        with this keyword score, counted as in the period the query names (unless
        every memory in it is known)."""
        linear = (self.w_dense + self.w_tokens) * self.dense_floor + self.w_keyword * keyword
        relevance = max(linear, self.semantic_floor * self.dense_floor)
        if self.time_weight:
            relevance = (1.0 - self.time_weight) * relevance + self._left_out_lift
        return min(max(relevance, 0.0), 1.0)

    def _keyword_for(self, score: float) -> float | None:
        """The least keyword score in [0, 1] at which :meth:`_pre_rerank` reaches
        ``score`` (None: not even at 1)."""
        if self._pre_rerank(0.0) >= score:
            return 0.0
        if self._pre_rerank(1.0) < score or self.w_keyword <= 0:
            return None
        tw = self.time_weight
        relevance = (score - self._left_out_lift) / (1.0 - tw) if tw else score
        base = (self.w_dense + self.w_tokens) * self.dense_floor
        return min(max((relevance - base) / self.w_keyword, 0.0), 1.0)

    def _lifts(self) -> bool:
        return HYBRID_EPISODE_WEIGHT > 0 and any(
            e.memory.event_time is not None for e in self.entries.values()
        )

    def _unlifted(self, score: float) -> float:
        """The least score before the episode lift that may reach ``score`` after it."""
        if not self._lifts():
            return score
        top = max(self._scores.values(), default=0.0)
        if score > top:
            return score
        return (score - HYBRID_EPISODE_WEIGHT * top) / (1.0 - HYBRID_EPISODE_WEIGHT)

    def _ties_below(self, cutoff: float, after_key: NewestFirst | None) -> float | None:
        """The score (before the re-rank) of a holder left out ranked at the cutoff,
        when it tells them apart from the kept: the store cut that tie in the results'
        order (``after_key``), no lift of theirs is unknown, and scores rise with the
        keyword score there, so a holder ranked below the cutoff scores below it.
        None otherwise (a lower keyword score may tie with the cutoff's)."""
        margin = 1e-9
        linear = (self.w_dense + self.w_tokens) * self.dense_floor + self.w_keyword * cutoff
        if (
            after_key is None
            or self._left_out_lift
            or linear <= self.semantic_floor * self.dense_floor + margin
        ):
            return None
        return self._pre_rerank(cutoff)

    def _behind(self, cutoff: float, after_key: NewestFirst | None) -> bool:
        """Whether every left-out holder is behind ``HYBRID_RERANK_DEPTH`` candidates in
        the targets' order (score, then newest first): those scoring more than one at
        the cutoff, and those tied with it that come before ``after_key``."""
        best = self._ties_below(cutoff, after_key)
        if best is None or after_key is None:
            return False
        margin = 1e-9
        ahead = sum(
            1
            for memory_id, score in self.first_scores.items()
            if score > best + margin
            or (score >= best - margin and self.entries[memory_id].newest_first <= after_key)
        )
        return ahead >= HYBRID_RERANK_DEPTH

    def _after_results(
        self, last: Entry, options: SearchOptions, cutoff: float, after_key: NewestFirst | None
    ) -> bool:
        """Whether every left-out holder comes after ``last``, the last result, in the
        results' order: it scores at most what ``last`` does, and, scoring as much,
        comes after it among equals (newest first). Not when the order of equals is
        another (by event time, or the preferred kind first) or an episode may lift it."""
        if options.order_by_event_time or options.kind or self._lifts():
            return False
        best = self._ties_below(cutoff, after_key)
        if best is None or after_key is None or best > last.score:
            return False
        return best < last.score or last.newest_first <= after_key

    def _episode_lift(self, candidates: list[_Pair], options: SearchOptions, kept: set[str]) -> list[_Pair]:
        """Lift the memories sharing an event_time with one of the best candidates
        that pass the relevance floor (``kept``)."""
        weight, seeds = HYBRID_EPISODE_WEIGHT, HYBRID_EPISODE_SEEDS
        if weight <= 0 or seeds <= 0 or len(candidates) < 2:
            return candidates
        seed_options = replace(options, kind="") if options.kind and options.kind_fallback else options
        best: dict[datetime, float] = {}
        taken = 0
        for score, entry in sorted(candidates, key=itemgetter(0), reverse=True):
            if taken >= seeds:
                break
            if entry.id not in kept or not matches_filters(entry, seed_options):
                continue
            taken += 1
            if entry.memory.event_time is not None:
                when = utc(entry.memory.event_time)
                best[when] = max(best.get(when, 0.0), score)
        if not best:
            return candidates
        lifted: list[_Pair] = []
        for score, entry in candidates:
            seed = best.get(utc(entry.memory.event_time)) if entry.memory.event_time is not None else None
            if seed is not None and seed > score:
                score = min(score + weight * (seed - score), 1.0)
            lifted.append((score, entry))
        return lifted

    def results(self, options: SearchOptions, *, default_max: int = DEFAULT_MAX_RESULTS) -> list[Entry]:
        """Filters, kind fallback, order, dedup and truncation as in :func:`keyword_search`,
        after the episode lift. ``options.similarity_threshold`` (if > 0) applies to the
        final score."""
        limit = options.max_results if options.max_results > 0 else default_max
        threshold = options.similarity_threshold
        candidates = [(score, self.entries[i]) for i, score in self._scores.items()]
        kept = {memory_id for memory_id in self._scores if self.relevant(memory_id)}
        lifted = self._episode_lift(candidates, options, kept)
        candidates = [(score, entry) for score, entry in lifted if entry.id in kept]
        if threshold > 0:
            candidates = [p for p in candidates if p[0] >= threshold]
        return finish(candidates, options, limit)
