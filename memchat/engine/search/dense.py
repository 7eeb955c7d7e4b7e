"""Dense scoring: cosine → calibrated relevance per embedder, and token-level similarity.

Raw cosines are not comparable across embedders: MiniLM's answers spread over
0.1–0.7, multilingual-e5's are compressed into 0.76–0.90 with unrelated text
at 0.72–0.84. Before a cosine is fused with keyword scores (or shown as a
score), it is mapped to a 0–1 relevance by a per-embedder calibration: a
ramp through two anchors measured on data (benchmarks/README.md, "Dense
calibration"):

* ``unrelated``: the median cosine of a query with the memories that do not
  answer it → relevance 0.1;
* ``answer``: twice as far above ``unrelated`` as the median cosine of a query
  with the memory that answers it (so that median answer sits at about half
  relevance, leaving room above it) → relevance 0.9.

Between the anchors the map is linear, which keeps the spacing of the
cosines where ranking happens (a logistic through the same anchors squashed
the top and cost 0.06 recall@5 on LoCoMo). Outside them it continues with a
shallow slope to 0 at cosine −1 and 1 at cosine 1, so the map is strictly
increasing: semantic search ranks exactly as the cosine does.

The anchors are data, declared in :data:`CALIBRATIONS` next to the model name
they belong to; an embedder may also carry its own as a ``calibration``
attribute (a :class:`DenseCalibration`). An embedder with neither gets the raw
cosine clipped to [0, 1] (:data:`UNCALIBRATED`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..products import rows_times_rows

__all__ = [
    "CALIBRATIONS",
    "UNCALIBRATED",
    "DenseCalibration",
    "TokenMatch",
    "calibration_for",
    "token_similarities",
    "token_similarity",
]


@dataclass(frozen=True, slots=True)
class DenseCalibration:
    """Cosine → relevance for one embedding model: 0.1 at ``unrelated``, 0.9 at ``answer``."""

    #: The model's name as it appears in ``Embedder.name`` (a substring match).
    model: str
    #: Median cosine of a query with memories that do not answer it.
    unrelated: float
    #: ``unrelated`` + 2 × (median cosine of a query with the memory that answers it − ``unrelated``).
    answer: float
    #: Whether the model reads CJK text (MiniLM does not: its weight then goes to keywords).
    reads_cjk: bool = True

    def relevance(self, cosine: float) -> float:
        low, high = self.unrelated, self.answer
        if not self.model or not -1.0 < low < high < 1.0:  # uncalibrated: the cosine itself
            return min(max(cosine, 0.0), 1.0)
        if cosine <= low:
            return max(_AT_UNRELATED * (cosine + 1.0) / (low + 1.0), 0.0)
        if cosine >= high:
            return min(_AT_ANSWER + (1.0 - _AT_ANSWER) * (cosine - high) / (1.0 - high), 1.0)
        return _AT_UNRELATED + (_AT_ANSWER - _AT_UNRELATED) * (cosine - low) / (high - low)


#: Relevance at the two anchors.
_AT_UNRELATED, _AT_ANSWER = 0.1, 0.9


#: Measured anchors per known model (benchmarks/README.md, "Dense calibration").
#: The first entry whose ``model`` appears in the embedder's name applies, so a
#: composite named after its dense model picks that model's anchors.
CALIBRATIONS: tuple[DenseCalibration, ...] = (
    # Before e5's entry: the blend's name holds e5's (embedding/blend.py).
    DenseCalibration(
        "multilingual-e5-small+use-multilingual-v3", unrelated=0.715, answer=0.911, reads_cjk=True
    ),
    DenseCalibration("multilingual-e5-small", unrelated=0.771, answer=0.933, reads_cjk=True),
    DenseCalibration("all-MiniLM-L6-v2", unrelated=0.243, answer=0.909, reads_cjk=False),
)

#: An embedder without measured anchors: its cosine, clipped to [0, 1].
UNCALIBRATED = DenseCalibration("", unrelated=0.0, answer=1.0, reads_cjk=True)


def calibration_for(embedder: Any) -> DenseCalibration:
    """The calibration of ``embedder``: its own ``calibration`` attribute, else the
    table's entry for the model it names (``dense_model`` if it has one, else ``name``)."""
    own = getattr(embedder, "calibration", None)
    if isinstance(own, DenseCalibration):
        return own
    name = str(getattr(embedder, "dense_model", None) or getattr(embedder, "name", "") or "").lower()
    for calibration in CALIBRATIONS:
        if calibration.model.lower() in name:
            return calibration
    return UNCALIBRATED


# ---------------------------------------------------------------------------
# Token-level similarity (late interaction over word pieces)
# ---------------------------------------------------------------------------

#: Exponent of a query piece's weight ``1 − mean best cosine`` over the re-ranked candidates.
PIECE_WEIGHT_POWER = 2.0


class TokenMatch(float):
    """A token similarity (the plain mean) that also keeps each query piece's best cosine."""

    best: Any

    def __new__(cls, value: float, best: Any) -> TokenMatch:
        match = super().__new__(cls, value)
        match.best = best
        return match


def token_similarity(query_tokens: Any, memory_tokens: Any) -> float:
    """Late interaction: mean over query pieces of the best cosine with a memory piece
    (a :class:`TokenMatch`, which :func:`weighted_piece_means` re-weights)."""
    if query_tokens is None or memory_tokens is None or not len(query_tokens) or not len(memory_tokens):
        return 0.0
    best = rows_times_rows(query_tokens, memory_tokens).max(axis=1)
    return TokenMatch(float(best.mean()), best)


def token_similarities(query_tokens: Any, memories_tokens: Sequence[Any]) -> list[float]:
    """:func:`token_similarity` of one query with many memories, in one matrix product
    (a search re-ranks up to 100 memories: one product instead of 100)."""
    import numpy as np

    sizes = [0 if m is None else len(m) for m in memories_tokens]
    if query_tokens is None or not len(query_tokens) or not any(sizes):
        return [token_similarity(query_tokens, m) for m in memories_tokens]
    stacked = np.concatenate([m for m, n in zip(memories_tokens, sizes, strict=True) if n])
    cosines = rows_times_rows(query_tokens, stacked)  # (query pieces, all memory pieces)
    starts = np.cumsum([0, *(n for n in sizes if n)])[:-1]
    best = np.maximum.reduceat(cosines, starts, axis=1)  # per memory: (query pieces,)
    out: list[float] = []
    column = 0
    for n in sizes:
        if not n:
            out.append(0.0)
            continue
        piece_best = best[:, column]
        out.append(TokenMatch(float(piece_best.mean()), piece_best))
        column += 1
    return out


def weighted_piece_means(similarities: dict[str, float]) -> dict[str, float]:
    """Re-weight the query pieces of :class:`TokenMatch` values given together:
    weight ``(1 − mean best cosine over the candidates)^p``, normalised to sum 1,
    so a piece every candidate matches (the speaker's name, "did") counts little."""
    matches = [v for v in similarities.values() if isinstance(v, TokenMatch)]
    if len(matches) < 2 or len(matches) != len(similarities) or PIECE_WEIGHT_POWER <= 0:
        return similarities
    import numpy as np

    if len({len(m.best) for m in matches}) != 1:
        return similarities
    best = np.stack([np.asarray(m.best, dtype=np.float64) for m in matches])
    weights = np.clip(1.0 - best.mean(axis=0), 1e-3, None) ** PIECE_WEIGHT_POWER
    weights /= weights.sum()
    return {memory_id: float(m.best @ weights) for memory_id, m in zip(similarities, matches, strict=True)}
