"""The dense calibration's two anchors for an embedder (memchat/engine/search/dense.py).

    .venv/bin/python benchmarks/calibrate_dense.py             # the default embedder
    .venv/bin/python benchmarks/calibrate_dense.py --embedder e5

Per data set, the median cosine of a question with the memories that do not
answer it (``unrelated``) and with those that do (every evidence memory of a
LoCoMo question counts); the anchors average the two data sets alike — the
first paraphrase set (``data/paraphrase.json``) and LoCoMo's four tuning
conversations (26, 30, 41, 42; 43 is held out) — and put ``answer`` twice as
far above ``unrelated`` as the median answer: relevance 0.1 and 0.9.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import paraphrase  # noqa: E402
import recall_locomo  # noqa: E402

from memchat.engine.embedding import create_embedder  # noqa: E402

TUNING = ("26", "30", "41", "42")


def _unit(rows: list[list[float]]) -> np.ndarray:
    matrix = np.asarray(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _medians(embedder, groups) -> tuple[float, float]:
    """(median unrelated cosine, median answer cosine) over ``groups`` of
    (memory texts, [(question, indices of its answers)])."""
    unrelated: list[float] = []
    answers: list[float] = []
    query = getattr(embedder, "embed_query_sync", embedder.embed_sync)
    for texts, questions in groups:
        memories = _unit(embedder.embed_sync(texts))
        vectors = _unit(query([q for q, _ in questions]))
        for (_, wanted), vector in zip(questions, vectors, strict=True):
            for index, cosine in enumerate(memories @ vector):
                (answers if index in wanted else unrelated).append(float(cosine))
    return statistics.median(unrelated), statistics.median(answers)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="default", help="default, e5 or minilm")
    parser.add_argument("--locomo", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    args = parser.parse_args()
    embedder = create_embedder(args.embedder, env={})

    data = paraphrase.load(paraphrase.DATA)
    groups = []
    for user, memories in data.memories.items():
        ids = [m[0] for m in memories]
        asked = [(q.text, {ids.index(q.answer)}) for q in data.questions if q.user == user]
        groups.append(([m[1] for m in memories], asked))
    sets = {"paraphrase": _medians(embedder, groups)}

    groups = []
    for conversation in recall_locomo.load(Path(args.locomo)):
        if conversation["name"] not in TUNING:
            continue
        ids = [i for _, i, _ in conversation["observations"]]
        asked = [(q, {n for n, i in enumerate(ids) if i & wanted}) for q, wanted in conversation["questions"]]
        groups.append(([t for t, _, _ in conversation["observations"]], asked))
    sets["locomo"] = _medians(embedder, groups)

    for name, (unrelated, answer) in sets.items():
        print(f"{name}: unrelated {unrelated:.3f}, answer median {answer:.3f}")
    unrelated = statistics.mean(u for u, _ in sets.values())
    answer = statistics.mean(a for _, a in sets.values())
    anchor = unrelated + 2 * (answer - unrelated)
    print(f"{embedder.name}: unrelated={unrelated:.3f} (→ 0.1), answer={anchor:.3f} (→ 0.9)")


if __name__ == "__main__":
    main()
