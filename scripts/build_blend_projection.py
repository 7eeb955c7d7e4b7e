"""Build the projection of the default embedder's blend (memchat/engine/embedding/blend.py).

    .venv/bin/python scripts/build_blend_projection.py    # writes memchat/engine/data/e5_use_blend.npy

The blend puts multilingual-e5-small's and USE multilingual's unit vectors side
by side, weighted (896 dimensions); the projection keeps the 384 directions that
carry most of such vectors' energy, so the blend fits the stores' 384-d
vectors. Those directions are the top right singular vectors (not centred:
the projection should keep dot products, mean included) of the blends of a
corpus of both languages and both sides of a search:

* English conversation: the LoCoMo observations and questions
  (``../shared/data/locomo``, the public conversations settings are chosen on),
  questions embedded as queries;
* Chinese: the sentences of the product document (``../shared/seed``) and the
  2,000 most frequent words of two or more characters in jieba's dictionary.

No paraphrase benchmark text is in it. The output is data shipped with the
package; blend.py checks its sha256, and the store identity of the default
embedder names it, so a rebuilt projection re-embeds stores on open. Rebuilding
gives the same ranking but not necessarily the same bytes (LAPACK's SVD may flip
signs): update BLEND_SHA256 then.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from memchat.engine.embedding.blend import BLEND_PATH, side_by_side  # noqa: E402
from memchat.engine.embedding.e5 import E5Embedder  # noqa: E402
from memchat.engine.embedding.files import sha256_of  # noqa: E402
from memchat.engine.embedding.protocol import DEFAULT_DIMENSION  # noqa: E402
from memchat.engine.embedding.use import USEEmbedder  # noqa: E402

CHINESE_WORDS = 2000


def chinese_texts(seed: Path) -> list[str]:
    import jieba

    sentences: list[str] = []
    for path in sorted(seed.glob("*.txt")):
        parts = re.split(r"[。！？!?\n]", path.read_text(encoding="utf-8"))
        sentences += [p.strip() for p in parts if len(p.strip()) >= 4 and re.search(r"[\u4e00-\u9fff]", p)]
    dictionary = Path(jieba.__file__).with_name("dict.txt")
    counted = []
    for line in dictionary.read_text(encoding="utf-8").splitlines():
        word, count = line.split()[:2]
        if len(word) >= 2:
            counted.append((int(count), word))
    words = [w for _, w in sorted(counted, reverse=True)[:CHINESE_WORDS]]
    return sentences + words


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locomo", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    parser.add_argument("--seed", default=str(ROOT.parent / "shared" / "seed"))
    args = parser.parse_args()
    import recall_locomo  # type: ignore[import-not-found]

    conversations = recall_locomo.load(Path(args.locomo))
    passages = [t for c in conversations for t, _, _ in c["observations"]] + chinese_texts(Path(args.seed))
    queries = [q for c in conversations for q, _ in c["questions"]]
    e5, use = E5Embedder(), USEEmbedder()
    rows = [
        side_by_side(e5.embed_sync(passages), use.embed_rows(passages)),
        side_by_side(e5.embed_query_sync(queries), use.embed_rows(queries)),
    ]
    corpus = np.vstack(rows)
    # The blend's rows share one large common direction (cosines of unrelated texts are
    # about 0.7): kept exactly, as the first axis. The other 383 are the principal axes
    # of what is left, where texts differ, so the projection spends its dimensions there.
    mean = corpus.mean(axis=0)
    common = mean / np.linalg.norm(mean)
    residual = corpus - np.outer(corpus @ common, common)
    _, singular, axes = np.linalg.svd(residual, full_matrices=False)
    kept = float((singular[: DEFAULT_DIMENSION - 1] ** 2).sum() / (singular**2).sum())
    projection = np.vstack([common, axes[: DEFAULT_DIMENSION - 1]]).T.astype(np.float16)
    BLEND_PATH.parent.mkdir(parents=True, exist_ok=True)
    np.save(BLEND_PATH, projection)
    print(
        f"{len(passages)} passages and {len(queries)} queries; "
        f"variance kept beside the common axis {kept:.3f}; "
        f"{BLEND_PATH} ({BLEND_PATH.stat().st_size / 1e6:.2f} MB), sha256 {sha256_of(BLEND_PATH)}"
    )


if __name__ == "__main__":
    main()
