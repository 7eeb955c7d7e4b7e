"""Paraphrase recall: does search find a memory when the question uses other words?

    .venv/bin/python benchmarks/paraphrase.py --check                 # validate the data only
    .venv/bin/python benchmarks/paraphrase.py                         # inmemory, sqlite, sqlitevec
    .venv/bin/python benchmarks/paraphrase.py --backends redis,pgvector --misses
    python benchmarks/paraphrase.py --embedder minilm,e5              # pure cosine, no engine
    .venv/bin/python benchmarks/paraphrase.py --data benchmarks/data/paraphrase_second.json
    .venv/bin/python benchmarks/paraphrase.py --data benchmarks/data/paraphrase_third.json
    .venv/bin/python benchmarks/paraphrase.py --data benchmarks/data/paraphrase_fourth.json

The data (``benchmarks/data/paraphrase.json``; ``paraphrase_second.json`` is a
second set of the same kind, written later by someone who never saw the first
one's texts, to check that settings chosen on the first carry over; ``paraphrase_third.json``
a third, written blind too, whose questions vary in style: short search-style
queries, "the user's …", requests, casual and misspelt phrasing; ``paraphrase_fourth.json``
a fourth of the same kind, about two other people, written blind later to check
the third's changes; ``paraphrase_fifth.json`` to ``paraphrase_eighteenth.json``
fourteen more, each measured as written before anything was changed for it: each
file's description says so; the seventh's and later sets' memories name the user
in mixed styles, "The user…" and the name, as an extractor writes them) holds
two users' memories — an
English speaker (a few of her memories in Chinese) and a Chinese speaker (a
few in English), with distractors: similar topics, other people — and
questions, each naming the one memory that answers it. **No question shares a
content word with its answer**: English words are lower-cased, stopwords
dropped and Snowball-stemmed; Chinese is segmented with jieba (both ``cut``
and ``cut_for_search``, so a compound's parts count too), stopwords dropped;
numbers count as words. The check runs before every measurement and a
violation stops the script with the offending words.

Groups: ``en`` (English question, English memory), ``zh`` (Chinese question,
Chinese memory) and ``cross`` (question and memory in different languages),
reported separately; ``all`` is every question.

Engine mode (default), per backend, through the public API: each user's
memories are added with ``MemoryService.add`` (``event_time`` for episodes) and
each question is asked three ways —

* ``search``: ``svc.search(key, q, SearchOptions(max_results=3))``, the
  library/CLI default;
* ``hybrid``: ``svc.search(key, q, SearchOptions(max_results=3, hybrid_search=True))``;
* ``tool``: the ``memory_search`` tool from ``svc.tools()`` (its first 3 results);
* ``cli``: the real command ``memchat memory search QUESTION --memory NAME
  --app … --user … --limit 3 --json``, run in-process with
  ``typer.testing.CliRunner`` on ``memchat.cli.app``; it opens the store
  itself from the environment variables it reads (settings.BACKEND_VARIABLES:
  ``SQLITE_MEMORY_DSN``, ``SQLITEVEC_MEMORY_DSN``, ``REDIS_URL`` (+
  ``REDIS_KEY_PREFIX``), ``MYSQL_DSN``, ``MYSQLVEC_DSN``, ``POSTGRES_DSN``,
  ``PGVECTOR_DSN``, ``CHROMA_BASE_URL`` + ``CHROMA_COLLECTION``), with its own
  embedder and default search mode, exactly as a user's shell would. With
  this path, all paths share that one namespace: the memories are added once
  through the library on the store those variables name. The SQL servers'
  CLI uses its default table, so MySQL/MariaDB and PostgreSQL get a throwaway
  database (``memchat_para_<hex>``, dropped afterwards). ``inmemory`` has no
  CLI figure: its store lives for one command.

hit@k = the answer is among the first k results. Backends other than
inmemory/sqlite/sqlitevec are reached through the conformance harness
(``tests/conformance/harness.py``), which starts or finds their servers.

Embedder mode (``--embedder NAME[,NAME…]``): pure cosine ranking of each
user's memories with an embedder from ``benchmarks/embedder_compare.py`` —
no engine, no keywords — so embedders can be compared on their own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATA = Path(__file__).resolve().parent / "data" / "paraphrase.json"
KS = (1, 3)
GROUPS = ("all", "en", "zh", "cross")
APP = "paraphrase-bench"

# ---------------------------------------------------------------------------
# Data and the no-shared-word check
# ---------------------------------------------------------------------------

#: Function words. Everything else — nouns, verbs, adjectives, numbers — is a content word.
EN_STOPWORDS = frozenset(
    """
    a an the and or but if of in on at to for with by from as into onto about over under up down out off
    than then so too very just also not no nor only same such both each few more most other some any all
    is are am be been being was were do does did doing done have has had having will would shall should can
    could may might must ought i me my mine myself you your yours yourself he him his himself she her hers
    herself it its itself we us our ours ourselves they them their theirs themselves this that these those
    what which who whom whose when where why how there here s t d ll m re ve
    """.split()  # noqa: SIM905
)

ZH_STOPWORDS = frozenset(
    """
    我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 的 地 得 之 了 着 过 吗 呢 吧 啊 呀 哦 嘛 么
    是 在 有 和 与 跟 及 或 或者 也 都 就 还 又 才 很 太 最 更 不 没 没有 别 要 会 能 可以 可能
    什么 啥 哪 哪里 哪儿 哪个 哪些 哪种 哪类 哪位 哪天 哪座 哪项 哪本 哪条 哪支 谁 怎么 怎么样 怎样 为什么
    几 多少 这 那 这个 那个 这些 那些 一 个 一个 一些 一种 一下 上 下 中 里 对 从 把 被 给 向 于 为 以
    所以 因为 如果 然后 但是 而 而且 并 等 呢 吗 ？ 。 ， 、 ！ ： ； 《 》
    """.split()  # noqa: SIM905
)

_ZH_GLUE_HEAD = "我你您他她它"
_ZH_GLUE_TAIL = "的了着过吗呢吧"
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD_RE = re.compile(r"[a-z0-9]+")

_stemmer: Any = None


def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        import snowballstemmer

        _stemmer = snowballstemmer.stemmer("english")
    return _stemmer.stemWord(word)


def language(text: str) -> str:
    """ "zh" when Chinese characters make up a good part of the text, else "en"."""
    cjk = len(_CJK_RE.findall(text))
    latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return "zh" if cjk and 2 * cjk >= latin else "en"


def content_words(text: str) -> set[str]:
    """The content words of ``text``: stemmed English words and numbers, and
    jieba's Chinese words (cut and cut-for-search), stopwords removed."""
    import jieba

    jieba.setLogLevel(60)
    normalised = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    latin = re.sub(r"n't\b", " not", normalised)
    latin = re.sub(r"'s\b", " ", latin)
    words = {_stem(w) for w in _LATIN_WORD_RE.findall(latin) if w not in EN_STOPWORDS}
    words.discard("")
    for token in [*jieba.lcut(normalised), *jieba.lcut_for_search(normalised)]:
        token = token.strip()
        if token and _CJK_RE.search(token) and token not in ZH_STOPWORDS:
            words.add(token)
            # jieba sometimes glues a pronoun or particle on ("我养"): count the core too.
            core = token.lstrip(_ZH_GLUE_HEAD).rstrip(_ZH_GLUE_TAIL)
            if core and core != token and core not in ZH_STOPWORDS:
                words.add(core)
    return words


@dataclass
class Question:
    user: str
    text: str
    answer: str
    group: str


@dataclass
class Dataset:
    #: user → [(memory id, text, event_time or None)]
    memories: dict[str, list[tuple[str, str, datetime | None]]]
    questions: list[Question]
    texts: dict[str, str] = field(default_factory=dict)  # memory id → text

    def summary(self) -> str:
        n_mem = sum(len(m) for m in self.memories.values())
        by_lang = {"en": 0, "zh": 0}
        for mems in self.memories.values():
            for _, text, _ in mems:
                by_lang[language(text)] += 1
        q_lang = {"en": 0, "zh": 0}
        for q in self.questions:
            q_lang[language(q.text)] += 1
        groups = {g: sum(q.group == g for q in self.questions) for g in GROUPS[1:]}
        return (
            f"{n_mem} memories (en {by_lang['en']}, zh {by_lang['zh']}) for {len(self.memories)} users; "
            f"{len(self.questions)} questions (en {q_lang['en']}, zh {q_lang['zh']}; "
            + ", ".join(f"{g} {n}" for g, n in groups.items())
            + ")"
        )


def load(path: Path = DATA) -> Dataset:
    raw = json.loads(path.read_text(encoding="utf-8"))
    memories: dict[str, list[tuple[str, str, datetime | None]]] = {}
    texts: dict[str, str] = {}
    owner: dict[str, str] = {}
    for user, body in raw["users"].items():
        rows = []
        for m in body["memories"]:
            if m["id"] in texts:
                raise SystemExit(f"paraphrase data: memory id {m['id']} is used twice")
            when = m.get("event_time")
            stamp = datetime.fromisoformat(when).replace(tzinfo=UTC) if when else None
            rows.append((m["id"], m["text"], stamp))
            texts[m["id"]] = m["text"]
            owner[m["id"]] = user
        memories[user] = rows
    questions = []
    for q in raw["questions"]:
        if q["answer"] not in texts:
            raise SystemExit(f"paraphrase data: question {q['q']!r} names unknown memory {q['answer']}")
        if owner[q["answer"]] != q["user"]:
            raise SystemExit(
                f"paraphrase data: question {q['q']!r} asks {q['user']} about another user's memory"
            )
        ql, ml = language(q["q"]), language(texts[q["answer"]])
        questions.append(Question(q["user"], q["q"], q["answer"], ql if ql == ml else "cross"))
    return Dataset(memories, questions, texts)


def check(data: Dataset) -> list[str]:
    """Every violation of the rules, as one line each (empty: the data is valid)."""
    problems = []
    seen: set[tuple[str, str]] = set()
    for q in data.questions:
        if (q.user, q.text) in seen:
            problems.append(f"duplicate question {q.text!r}")
        seen.add((q.user, q.text))
        qwords = content_words(q.text)
        if not qwords:
            problems.append(f"question {q.text!r} has no content word at all")
        shared = qwords & content_words(data.texts[q.answer])
        if shared:
            problems.append(
                f"question {q.text!r} shares {sorted(shared)} with its answer {q.answer}: "
                f"{data.texts[q.answer]!r}"
            )
    return problems


def check_or_exit(data: Dataset) -> None:
    problems = check(data)
    if problems:
        print("paraphrase data: questions must share no content word with their answer:", file=sys.stderr)
        for line in problems:
            print("  " + line, file=sys.stderr)
        raise SystemExit(1)


# ---------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------


@dataclass
class Score:
    hits: dict[str, dict[int, int]] = field(default_factory=lambda: {g: dict.fromkeys(KS, 0) for g in GROUPS})
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))
    misses: list[tuple[Question, list[str]]] = field(default_factory=list)

    def add(self, q: Question, ranked: Sequence[str]) -> None:
        for group in ("all", q.group):
            self.counts[group] += 1
            for k in KS:
                self.hits[group][k] += q.answer in list(ranked)[:k]
        if q.answer not in list(ranked)[: max(KS)]:
            self.misses.append((q, list(ranked)[: max(KS)]))

    def rate(self, group: str, k: int) -> float | None:
        return self.hits[group][k] / self.counts[group] if self.counts[group] else None

    def cells(self) -> list[str]:
        out = []
        for group in GROUPS:
            r1, r3 = self.rate(group, 1), self.rate(group, 3)
            out.append("–" if r1 is None else f"{r1:.2f} / {r3:.2f}")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {g: {"n": self.counts[g], **{f"hit@{k}": self.rate(g, k) for k in KS}} for g in GROUPS}


def table_header(first: Sequence[str]) -> list[str]:
    cols = [*first, *(f"{g} hit@1 / @3" for g in GROUPS)]
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]


def print_misses(label: str, score: Score, data: Dataset) -> None:
    if not score.misses:
        return
    print(f"\nmissed in the top 3 — {label}:")
    for q, ranked in score.misses:
        got = "; ".join(f"{mid} {data.texts.get(mid, '?')[:40]}" for mid in ranked) or "nothing"
        print(f"  [{q.group}] {q.text}  → want {q.answer} {data.texts[q.answer][:40]!r}; got {got}")


# ---------------------------------------------------------------------------
# Embedder mode: pure cosine
# ---------------------------------------------------------------------------


def cosine_score(data: Dataset, embedder: Any) -> Score:
    """Rank each user's memories by cosine with ``embedder`` (an adapter from
    embedder_compare.py: ``passages(texts)`` and ``queries(texts)`` → unit rows)."""
    import numpy as np

    score = Score()
    for user, mems in data.memories.items():
        ids = [m[0] for m in mems]
        matrix = np.asarray(embedder.passages([m[1] for m in mems]), dtype=np.float32)
        questions = [q for q in data.questions if q.user == user]
        queries = np.asarray(embedder.queries([q.text for q in questions]), dtype=np.float32)
        for q, vector in zip(questions, queries, strict=True):
            order = np.argsort(-(matrix @ vector), kind="stable")[: max(KS)]
            score.add(q, [ids[i] for i in order])
    return score


# ---------------------------------------------------------------------------
# Engine mode: the public API on a backend
# ---------------------------------------------------------------------------


def store_options(name: str, tmp: Path) -> dict[str, Any]:
    """Options for ``backends.create`` naming a fresh namespace on ``name``."""
    if name == "inmemory":
        return {}
    if name in ("sqlite", "sqlitevec"):
        return {"dsn": f"sqlite:///{tmp / f'paraphrase-{name}-{time.monotonic_ns()}.db'}"}
    import pytest

    from tests.conformance.harness import HARNESSES

    try:
        return dict(HARNESSES[name](tmp).options)
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:
        raise RuntimeError(str(exc)) from None


PATHS = ("search", "hybrid", "tool", "cli")


class CliUnavailable(RuntimeError):
    """The CLI cannot reach this backend's data (inmemory: one store per command)."""


def cli_namespace(name: str, tmp: Path) -> tuple[dict[str, str], Callable[[], None]]:
    """The environment variables with which ``memchat memory search --memory
    NAME`` opens a fresh namespace on ``name``, and how to remove it afterwards."""
    import uuid

    def nothing() -> None:
        return None

    if name == "inmemory":
        raise CliUnavailable("inmemory: the store lives for one CLI command")
    if name in ("sqlite", "sqlitevec"):
        dsn = f"sqlite:///{tmp / f'paraphrase-cli-{name}-{time.monotonic_ns()}.db'}"
        return {"SQLITE_MEMORY_DSN" if name == "sqlite" else "SQLITEVEC_MEMORY_DSN": dsn}, nothing
    options = store_options(name, tmp)
    if name == "redis":
        return {"REDIS_URL": options["url"], "REDIS_KEY_PREFIX": options["key_prefix"]}, nothing
    if name == "chromadb":
        return {"CHROMA_BASE_URL": options["url"], "CHROMA_COLLECTION": options["collection"]}, nothing
    if name == "pgvector":  # a throwaway server (or MEMCHAT_TEST_PGVECTOR_DSN's): its default table
        return {"PGVECTOR_DSN": options["dsn"]}, nothing
    # mysql, mysqlvec, postgres: the CLI uses the default table, so a throwaway database.
    base = options["dsn"]
    database = f"memchat_para_{uuid.uuid4().hex[:12]}"
    dsn = base.rsplit("/", 1)[0] + "/" + database
    if name in ("mysql", "mysqlvec"):
        from backends.mysql import parse_dsn

        def admin(sql: str) -> None:
            import pymysql

            args = {**parse_dsn(base).connect_args(), "connect_timeout": 5}
            args["database"] = args.pop("db")
            conn = pymysql.connect(**args)
            try:
                with conn.cursor() as cur:
                    cur.execute(sql)
                conn.commit()
            finally:
                conn.close()

        admin(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
        env = {"MYSQL_DSN" if name == "mysql" else "MYSQLVEC_DSN": dsn}
        return env, lambda: admin(f"DROP DATABASE IF EXISTS `{database}`")
    from backends.postgres import parse_dsn as pg_dsn

    def pg_admin(sql: str) -> None:
        import psycopg

        with psycopg.connect(**{**pg_dsn(base).params, "connect_timeout": 5}, autocommit=True) as conn:
            conn.execute(sql)

    pg_admin(f'CREATE DATABASE "{database}"')
    return {"POSTGRES_DSN": dsn}, lambda: pg_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


async def engine_scores(
    name: str, data: Dataset, tmp: Path, paths: Sequence[str] = PATHS
) -> dict[str, Score]:
    import os

    from backends import create
    from memchat.engine import MemoryService, Metadata

    paths = list(paths)
    env: dict[str, str] | None = None
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    if "cli" in paths:
        try:
            env, cleanup = cli_namespace(name, tmp)
        except CliUnavailable as exc:
            print(f"  no cli path: {exc}", file=sys.stderr)
            paths.remove("cli")
    scores = {path: Score() for path in paths}
    try:
        for user, mems in data.memories.items():
            key = _user_key(user)
            if env is None:
                store = create(name, **store_options(name, tmp))
            else:  # the store the CLI opens: the same variables
                store = create(name, env={**os.environ, **env})
            svc = MemoryService(store, limit=0)
            try:
                await svc.open()
                ids: dict[str, str] = {}
                for mid, text, when in mems:
                    entry = await svc.add(key, text, metadata=Metadata(event_time=when) if when else None)
                    ids[entry.id] = mid
                questions = [q for q in data.questions if q.user == user]
                await _ask(svc, key, ids, questions, scores, name=name, env=env)
            finally:
                try:
                    await svc.clear(key)
                finally:
                    await svc.close()
    finally:
        cleanup()
    return scores


def _user_key(user: str) -> Any:
    from memchat.engine import UserKey

    return UserKey(APP, f"{user}-{time.monotonic_ns()}")


async def _ask(
    svc: Any,
    key: Any,
    ids: dict[str, str],
    questions: list[Question],
    scores: dict[str, Score],
    *,
    name: str = "",
    env: dict[str, str] | None = None,
) -> None:
    """Each question through the paths in ``scores``; ``ids`` maps engine ids to the data's."""
    from memchat.engine import SearchOptions

    tool = next(t for t in svc.tools() if t.name == "memory_search")

    async def search(question: str) -> list[str]:
        return [ids.get(e.id, "?") for e in await svc.search(key, question, SearchOptions(max_results=3))]

    async def hybrid(question: str) -> list[str]:
        found = await svc.search(key, question, SearchOptions(max_results=3, hybrid_search=True))
        return [ids.get(e.id, "?") for e in found]

    async def by_tool(question: str) -> list[str]:
        content = json.loads(await tool.call({"query": question}, key))
        if "error" in content:
            raise RuntimeError(f"memory_search failed: {content['error']}")
        return [ids.get(r["id"], "?") for r in content.get("results", [])]

    async def by_cli(question: str) -> list[str]:
        from typer.testing import CliRunner

        from memchat.cli import app

        args = ["memory", "search", question, "--memory", name, "--app", key.app, "--user", key.user]
        args += ["--limit", "3", "--json"]
        # The command runs its own event loop (asyncio.run): in a worker thread, not this loop's.
        result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env, catch_exceptions=True)
        if result.exit_code != 0:
            detail = (result.stderr or result.output or repr(result.exception)).strip()
            raise RuntimeError(f"memchat memory search exited {result.exit_code}: {detail}")
        return [ids.get(entry["id"], "?") for entry in json.loads(result.stdout)]

    runners: dict[str, Callable[[str], Awaitable[list[str]]]] = {
        "search": search,
        "hybrid": hybrid,
        "tool": by_tool,
        "cli": by_cli,
    }
    for q in questions:
        for path in scores:
            scores[path].add(q, await runners[path](q.text))


# ---------------------------------------------------------------------------


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--check", action="store_true", help="validate the data and stop")
    parser.add_argument(
        "--backends", default="inmemory,sqlite,sqlitevec", help="engine mode: comma-separated names"
    )
    parser.add_argument(
        "--embedder", default="", help="embedder mode: names from embedder_compare.py (e.g. minilm,e5,use)"
    )
    parser.add_argument(
        "--paths", default=",".join(PATHS), help=f"engine mode: comma-separated, of {', '.join(PATHS)}"
    )
    parser.add_argument("--misses", action="store_true", help="list the questions missed in the top 3")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    data = load(Path(args.data))
    check_or_exit(data)
    print(data.summary(), file=sys.stderr)
    if args.check:
        print("data OK: no question shares a content word with its answer")
        return

    results: dict[str, Any] = {}
    if args.embedder:
        from embedder_compare import make_embedder  # type: ignore[import-not-found]

        lines = table_header(["embedder (pure cosine)"])
        for name in [n.strip() for n in args.embedder.split(",") if n.strip()]:
            embedder = make_embedder(name)
            score = cosine_score(data, embedder)
            results[name] = score.as_dict()
            lines.append(f"| {embedder.label} | " + " | ".join(score.cells()) + " |")
            if args.misses:
                print_misses(name, score, data)
    else:
        lines = table_header(["backend", "path"])
        with tempfile.TemporaryDirectory() as tmp:
            for name in [b.strip() for b in args.backends.split(",") if b.strip()]:
                print(f"… {name}", file=sys.stderr, flush=True)
                try:
                    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
                    scores = await engine_scores(name, data, Path(tmp), paths)
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    lines.append(f"| {name} | unavailable: {error} |" + " |" * len(GROUPS))
                    results[name] = {"error": f"{type(exc).__name__}: {exc}"}
                    continue
                results[name] = {path: s.as_dict() for path, s in scores.items()}
                for path, score in scores.items():
                    lines.append(f"| {name} | {path} | " + " | ".join(score.cells()) + " |")
                    if args.misses:
                        print_misses(f"{name} {path}", score, data)
    n = {g: sum(1 for q in data.questions if g == "all" or q.group == g) for g in GROUPS}
    groups = ", ".join(f"{g} {n[g]}" for g in GROUPS[1:])
    print(f"\nparaphrase recall, {len(data.questions)} questions ({groups})\n")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    asyncio.run(main())
