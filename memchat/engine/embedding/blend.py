"""The default embedder's one vector: multilingual-e5-small and USE multilingual v3
blended, in the 384 dimensions every store already has.

Two models that learnt from different data miss different paraphrases. e5 is
the better of the two alone (LoCoMo, Chinese); USE crosses languages and reads
some English paraphrases e5 does not (benchmarks/README.md, "Offline embedder
comparison" and "Thirtieth session"). Their blend ranks by

    (1 − s) · cos_e5 / σ_e5 + s · cos_use / σ_use

each model's cosine in units of its own spread across one query's memories
(σ, the median per-query standard deviation on LoCoMo: 0.037 and 0.117; e5's
cosines are compressed), USE's share ``s`` = 0.35. That sum is the cosine of
the two unit vectors side by side, each scaled by the square root of its
weight (896 dimensions). A fixed projection (``data/e5_use_blend.npy``,
896 × 384, built by ``scripts/build_blend_projection.py``: the principal axes
of such vectors of English conversation and Chinese text) brings it back to
384, keeping 98 % of its energy, so a store's vector, its index and its
dimension stay as they were; the rows are unit length again after it.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from ..model import ConfigError
from ..products import rows_times_rows
from .e5 import E5_IDENTITY
from .files import check_file
from .protocol import DEFAULT_DIMENSION
from .use import USE_DIMENSION, USE_IDENTITY

#: Each model's typical spread of cosines across one query's memories.
E5_SPREAD = 0.037
USE_SPREAD = 0.117
#: USE's share of the blended similarity.
USE_SHARE = 0.35
#: The projection: float16, (384 + 512) × 384.
BLEND_PATH = Path(__file__).parents[1] / "data" / "e5_use_blend.npy"
BLEND_SHA256 = "19dd573a9345c6cf9ba986715d6120e7d4e500ef8f28124517f99bfbdf245bc8"
BLEND_MODEL = "multilingual-e5-small+use-multilingual-v3"
BLEND_IDENTITY = f"{E5_IDENTITY}+{USE_IDENTITY}/blend-{BLEND_SHA256[:12]}/{DEFAULT_DIMENSION}"


def side_by_side_weights() -> tuple[float, float]:
    """The factors of e5's and USE's unit vectors side by side (their squares sum to 1)."""
    e5 = (1.0 - USE_SHARE) / E5_SPREAD
    use = USE_SHARE / USE_SPREAD
    return math.sqrt(e5 / (e5 + use)), math.sqrt(use / (e5 + use))


def side_by_side(e5_rows: Any, use_rows: Any) -> Any:
    """The 896-d blend of unit rows of both models (float32), before the projection."""
    import numpy as np

    a, b = side_by_side_weights()
    e5 = np.asarray(e5_rows, dtype=np.float32).reshape(-1, DEFAULT_DIMENSION)
    use = np.asarray(use_rows, dtype=np.float32).reshape(-1, USE_DIMENSION)
    return np.hstack([a * e5, b * use])


class BlendProjection:
    """The shipped projection, loaded lazily (thread-safe) and checked."""

    def __init__(self, path: Path | None = None, sha256: str | None = None) -> None:
        self.path = path or BLEND_PATH
        self.sha256 = BLEND_SHA256 if sha256 is None else sha256
        self._lock = threading.Lock()
        self._matrix: Any = None

    def load(self) -> None:
        if self._matrix is not None:
            return
        with self._lock:
            if self._matrix is not None:
                return
            import numpy as np

            check_file(self.path, self.sha256, "the offline embedder's blend projection", "reinstall memchat")
            matrix = np.load(self.path).astype(np.float32)
            if matrix.shape != (DEFAULT_DIMENSION + USE_DIMENSION, DEFAULT_DIMENSION):
                raise ConfigError(
                    f"the blend projection {self.path} has the wrong shape {matrix.shape}: reinstall memchat"
                )
            self._matrix = np.ascontiguousarray(matrix.T)  # 384 × 896: one row per output

    def project(self, e5_rows: Any, use_rows: Any) -> Any:
        """Unit rows (float32, n × 384) of the blend."""
        import numpy as np

        self.load()
        # Off BLAS's threads (engine/products.py): a query's product is small.
        rows = rows_times_rows(side_by_side(e5_rows, use_rows), self._matrix)
        return rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)
