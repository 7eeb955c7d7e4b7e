"""What is specific to the Redis store: key layout, configuration, errors, and
a server that dies and comes back under a running process."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest

from memchat.engine import BackendError, ConfigError, MemoryService, Metadata, UserKey, memory_id
from memchat.engine.vectors import NO_EMBEDDER
from tests.support import require

pytest.importorskip("redis", reason="the redis package is not installed: pip install 'memchat[redis]'")

import redis
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st

from backends import create
from backends.redis import RedisStore, escape_key_part, user_keys

KEY = UserKey("memory-chat", "user")
SHARED_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
PASSWORD = "s3cret-Pa55word"
FIX = "start Redis or set REDIS_URL/REDIS_ADDR"

# Pairs the reference's raw ``mem:{app:user}`` would map to one key.
COLLIDING_PAIRS = [
    (UserKey("a:b", "c"), UserKey("a", "b:c")),
    (UserKey("app", "x}:{y"), UserKey("app", "x%7D:{y")),
    (UserKey("a", "b"), UserKey("a", "b%")),
    (UserKey("app", "u"), UserKey("app}", "u")),
]

INJECTIONS = [
    "'; DROP TABLE memories; --",
    "*",
    "KEYS * ; FLUSHALL",
    "user:*",
    "[a-z]?\\*",
    "mem:{memory-chat:user}",
    "}:deleted",
    # Control characters are refused in app and user (tests/conformance/test_input_validation.py);
    # these printable look-alikes still must not reach other keys.
    "line\u2028sep\u00a0nbsp\u200bzero-width",
    "ユーザー 🙂",
    "%3A%7B",
]


# -- key layout (no server needed) -----------------------------------------


def test_keys_follow_the_reference_shape_with_one_prefix_colon() -> None:
    key = UserKey("memory-chat", "alice")
    assert user_keys("memchat", key).active == "memchat:mem:{memory-chat:alice}"
    assert user_keys("memchat:", key).active == "memchat:mem:{memory-chat:alice}"
    assert user_keys("team:a", key).deleted == "team:a:mem:{memory-chat:alice}:deleted"
    assert user_keys("", key).active == "mem:{memory-chat:alice}"  # the reference's own key


@pytest.mark.parametrize(("one", "other"), COLLIDING_PAIRS)
def test_pairs_that_collide_in_the_reference_get_different_keys(one, other) -> None:
    a, b = user_keys("p", one), user_keys("p", other)
    assert len({a.active, a.deleted, b.active, b.deleted}) == 4


def _hash_tag(key: str) -> str:
    start = key.index("{")
    return key[start + 1 : key.index("}", start)]


@given(app=st.text(min_size=1, max_size=40), user=st.text(min_size=1, max_size=40))
def test_escaping_is_reversible_and_leaves_one_hash_tag_per_user(app: str, user: str) -> None:
    for part in (app, user):
        escaped = escape_key_part(part)
        assert unquote(escaped, errors="surrogatepass") == part
        assert not set(escaped) & set(":{}*?[]\\ ")
        assert escaped.isprintable()
    keys = user_keys("memchat", UserKey(app, user))
    for k in (keys.active, keys.deleted):
        assert k.count("{") == 1 and k.count("}") == 1
    assert _hash_tag(keys.active) == _hash_tag(keys.deleted)
    # The key can be read back unambiguously: the mapping is injective.
    esc_app, esc_user = _hash_tag(keys.active).split(":")
    assert (unquote(esc_app, errors="surrogatepass"), unquote(esc_user, errors="surrogatepass")) == (
        app,
        user,
    )


def test_plain_names_stay_readable() -> None:
    assert escape_key_part("memory-chat_v2.1") == "memory-chat_v2.1"
    assert escape_key_part("張三") == "張三"
    assert escape_key_part("*") == "%2A"
    assert escape_key_part("a b:{c}") == "a%20b%3A%7Bc%7D"


@pytest.mark.parametrize("prefix", ["bad{prefix", "bad}", "new\nline"])
def test_a_prefix_that_would_break_the_hash_tag_is_rejected(prefix) -> None:
    with pytest.raises(ConfigError, match="invalid Redis key prefix"):
        RedisStore("redis://127.0.0.1:6379/0", key_prefix=prefix, env={})


# -- configuration ----------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "env", "location"),
    [
        (None, {}, "redis://localhost:6379/0"),
        (None, {"REDIS_ADDR": "cache.example:6380"}, "redis://cache.example:6380/0"),
        (
            None,
            {"REDIS_URL": "redis://u.example:7000/3", "REDIS_ADDR": "a.example:1"},
            "redis://u.example:7000/3",
        ),
        ("redis://arg.example:1/2", {"REDIS_URL": "redis://u.example:7000/3"}, "redis://arg.example:1/2"),
        (None, {"REDIS_URL": "", "REDIS_ADDR": "a.example:1"}, "redis://a.example:1/0"),
        (None, {"REDIS_ADDR": "redis://full.example:9/1"}, "redis://full.example:9/1"),
    ],
)
def test_url_has_priority_over_redis_addr(url, env, location) -> None:
    store = RedisStore(url, env=env)
    assert store.location == location
    assert store.describe() == f"redis ({location}, key prefix 'memchat')"


def test_key_prefix_option_beats_the_environment() -> None:
    assert RedisStore(env={"REDIS_KEY_PREFIX": "from-env"}).key_prefix == "from-env"
    assert RedisStore(key_prefix="opt", env={"REDIS_KEY_PREFIX": "from-env"}).key_prefix == "opt"
    assert RedisStore(env={}).key_prefix == "memchat"
    assert RedisStore(env={"REDIS_KEY_PREFIX": ""}).keys_for(KEY).active == "mem:{memory-chat:user}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{PASSWORD}@db.example:6390/4", "redis://:***@db.example:6390/4"),
        (f"redis://alice:{PASSWORD}@db.example", "redis://alice:***@db.example:6379/0"),
        (f"rediss://db.example:6390/1?password={PASSWORD}", "rediss://:***@db.example:6390/1"),
        (f"unix:///run/redis.sock?db=2&password={PASSWORD}", "unix:///run/redis.sock?db=2&password=***"),
    ],
)
def test_describe_masks_the_password(url, shown) -> None:
    store = RedisStore(url, env={})
    assert shown in store.describe()
    assert PASSWORD not in store.describe() and PASSWORD not in store.location


@pytest.mark.parametrize(
    "url",
    [
        "http://db.example:6379",
        "localhost:6379",
        f"redis://:{PASSWORD[:4]}/{PASSWORD[5:]}@db.example:6379",  # unescaped / in a password
        "redis://db.example:99999",
        "redis://db.example:6379/not-a-number",
        "redis://[::1",
    ],
)
def test_a_malformed_url_is_one_config_error_without_the_password(url) -> None:
    with pytest.raises(ConfigError) as info:
        RedisStore(url, env={})
    message = str(info.value)
    assert message.startswith("invalid Redis address in the url option:")
    assert "\n" not in message and PASSWORD[5:] not in message and PASSWORD[:4] not in message
    with pytest.raises(ConfigError, match="in REDIS_URL"):
        RedisStore(env={"REDIS_URL": url})


def test_the_registry_builds_it_and_it_declares_its_capabilities() -> None:
    store = create("redis", url="redis://127.0.0.1:6379/0", key_prefix="x")
    assert isinstance(store, RedisStore) and store.name == "redis"
    caps = store.capabilities
    assert caps.transactions and caps.persistent and caps.multi_process and caps.vector_search


async def test_an_unreachable_server_is_one_clear_error_without_the_password() -> None:
    port = _free_port()
    store = RedisStore(f"redis://:{PASSWORD}@127.0.0.1:{port}/0", env={})
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        await MemoryService(store).add(KEY, "anything")
    assert time.monotonic() - started < 10
    _assert_clear(str(info.value), f"redis://:***@127.0.0.1:{port}/0")
    await store.close()


# -- against the shared server ----------------------------------------------


def _reachable(url: str) -> bool:
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2) as client:
            return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


@pytest.fixture
async def raw() -> AsyncIterator[aioredis.Redis]:
    require(_reachable(SHARED_URL), f"Redis is not reachable at {RedisStore(SHARED_URL).location}")
    client = aioredis.Redis.from_url(SHARED_URL, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def make_store(raw: aioredis.Redis) -> AsyncIterator[Callable[..., RedisStore]]:
    prefix = f"memchat-test:{uuid.uuid4().hex}:"
    stores: list[RedisStore] = []

    def make(**options) -> RedisStore:
        store = RedisStore(SHARED_URL, **{"key_prefix": prefix, "env": {}, **options})
        stores.append(store)
        return store

    yield make
    for store in stores:
        await store.close()
    keys = [k async for k in raw.scan_iter(match=prefix + "*")]
    if keys:
        await raw.delete(*keys)


async def test_entries_are_json_in_two_hashes_per_user(make_store, raw) -> None:
    store = make_store()
    svc = MemoryService(store, soft_delete=True)
    when = datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=UTC)
    kept = await svc.add(
        KEY, "User met Alice", topics=["people"], metadata=Metadata("episode", when, ["Alice"], "Kyoto")
    )
    gone = await svc.add(KEY, "User likes coffee")
    await svc.delete(KEY, gone.id)
    keys = store.keys_for(KEY)
    assert await raw.hkeys(keys.active) == [kept.id]
    assert await raw.hkeys(keys.deleted) == [gone.id]
    data = json.loads(await raw.hget(keys.active, kept.id))
    assert data["id"] == kept.id and (data["app_name"], data["user_id"]) == (KEY.app, KEY.user)
    assert data["memory"] == {
        "memory": "User met Alice",
        "topics": ["people"],
        "kind": "episode",
        "event_time": "2024-05-01T12:30:00.123456+00:00",
        "participants": ["Alice"],
        "location": "Kyoto",
    }
    assert datetime.fromisoformat(data["created_at"]) == kept.created_at
    assert data["deleted_at"] is None
    assert json.loads(await raw.hget(keys.deleted, gone.id))["deleted_at"] is not None
    # Soft clear moves every active entry to the tombstones; hard clear drops both keys.
    assert await store.clear(KEY, deleted_at=datetime.now(UTC)) == 1
    assert await raw.exists(keys.active) == 0 and await raw.hlen(keys.deleted) == 2
    assert await store.clear(KEY, deleted_at=None) == 0
    assert await raw.exists(keys.active, keys.deleted) == 0
    await svc.close()


@pytest.mark.parametrize(("one", "other"), COLLIDING_PAIRS)
async def test_reference_colliding_users_stay_apart(make_store, one, other) -> None:
    svc = MemoryService(make_store())
    a = await svc.add(one, "same words")
    b = await svc.add(other, "same words")
    assert [e.id for e in await svc.read(one)] == [a.id]
    assert [e.id for e in await svc.read(other)] == [b.id]
    assert await svc.clear(one) == 1
    assert await svc.count(other) == 1
    await svc.close()


async def test_a_glob_user_id_matches_only_its_own_keys(make_store, raw) -> None:
    store = make_store()
    svc = MemoryService(store, soft_delete=True)
    star = UserKey("memory-chat", "*")
    users = [star, UserKey("memory-chat", "alice"), UserKey("memory-chat", "*:x"), UserKey("*", "*")]
    for key in users:
        entry = await svc.add(key, f"secret of {key.user}")
        await svc.add(key, f"second of {key.user}")
        await svc.delete(key, entry.id)
    own = store.keys_for(star)
    assert "*" not in own.active
    # A pattern built from the user's key (as an operator would) sees only that user.
    for pattern in (own.active + "*", own.active):
        found = {k async for k in raw.scan_iter(match=pattern)}
        mine = {own.active, own.deleted, own.vectors, own.version, own.active + ":recent"}
        # The keyword index's and the recent set's keys (backends/redis_index.py) carry
        # the same base and tag.
        assert all(k in mine or k.startswith(own.active + ":kw:") for k in found) and own.active in found
        assert set(await raw.keys(pattern)) == found
    assert [e.memory.text for e in await svc.read(star, include_deleted=True)] == [
        "second of *",
        "secret of *",
    ]
    await svc.close()


@pytest.mark.parametrize("text", INJECTIONS, ids=range(len(INJECTIONS)))
async def test_injection_strings_are_stored_verbatim_and_isolated(make_store, raw, text) -> None:
    store = make_store()
    svc = MemoryService(store)
    hostile = UserKey(text, text)
    bystander = UserKey("memory-chat", "bystander")
    await svc.add(bystander, "bystander's fact")
    entry = await svc.add(hostile, f"memory {text}", topics=[text, "plain"])
    assert entry.id == memory_id(f"memory {text}", text, text)
    [stored] = await svc.read(hostile)
    assert (stored.app, stored.user, stored.memory.text) == (text, text, f"memory {text}")
    assert stored.memory.topics == (text.strip(), "plain")
    data = json.loads(await raw.hget(store.keys_for(hostile).active, entry.id))
    assert (data["app_name"], data["user_id"], data["memory"]["memory"]) == (text, text, f"memory {text}")
    assert "bystander's fact" not in [e.memory.text for e in await svc.search(hostile, "bystander")]
    assert await svc.clear(hostile) == 1
    assert [e.memory.text for e in await svc.read(bystander)] == ["bystander's fact"]
    await svc.close()


async def test_reads_in_a_section_see_its_own_writes_and_an_error_writes_nothing(make_store) -> None:
    store = make_store()
    svc = MemoryService(store)
    first = await svc.add(KEY, "first fact")
    second = await svc.add(KEY, "second fact")

    async def work(tx):
        await tx.remove(first.id)
        assert await tx.get(first.id) is None
        assert await tx.count_active() == 1
        await tx.put(first)
        assert await tx.get(first.id) == first
        assert await tx.count_active() == 2
        await tx.remove(second.id)
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await store.atomic(KEY, work)
    assert {e.id for e in await svc.read(KEY)} == {first.id, second.id}
    await svc.close()


async def test_a_concurrent_write_from_another_client_makes_the_section_run_again(make_store, raw) -> None:
    store = make_store()
    svc = MemoryService(store, limit=0)
    entry = await svc.add(KEY, "shared fact")
    intruder = await MemoryService(make_store(), limit=0).open()
    runs = 0

    async def work(tx):
        nonlocal runs
        runs += 1
        seen = await tx.count_active()
        if runs == 1:  # another process writes this user between our read and our commit
            await intruder.add(KEY, "written by someone else")
        await tx.remove(entry.id)
        return seen

    assert await store.atomic(KEY, work) == 2
    assert runs == 2
    assert [e.memory.text for e in await svc.read(KEY)] == ["written by someone else"]
    await intruder.close()
    await svc.close()


async def test_a_corrupt_value_is_a_clear_error(make_store, raw) -> None:
    store = make_store()
    await raw.hset(store.keys_for(KEY).active, "bogus", "not json")
    with pytest.raises(BackendError, match=r"memory bogus of .* is not a memchat entry"):
        await store.list(KEY)


# -- servers this module starts ---------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server subprocess on a loopback port; restartable on the same port."""

    def __init__(self, workdir: Path, *options: str) -> None:
        self.port = _free_port()
        self.workdir = workdir
        self.options = options
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "no",
            "--dir",
            str(self.workdir),
        ]
        if "--appendonly" not in self.options:
            args += ["--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(
            ["redis-server", *args, *self.options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with code {self.process.returncode}")
            if self._answers():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port} within 10 s")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                reply = conn.recv(64)
        except OSError:
            return False
        return reply.startswith((b"+PONG", b"-NOAUTH"))  # not -LOADING

    def kill(self) -> None:
        """SIGKILL: the server vanishes without a goodbye, like a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    require(shutil.which("redis-server") is not None, "redis-server is not installed")
    servers: list[RedisServer] = []

    def start(*options: str) -> RedisServer:
        server = RedisServer(tmp_path / f"redis-{len(servers)}", *options)
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()


def _assert_clear(message: str, location: str) -> None:
    assert message.startswith(f"redis backend at {location}: "), message
    assert "\n" not in message and "Traceback" not in message and 'File "' not in message
    assert PASSWORD not in message
    assert FIX in message


@pytest.mark.parametrize("persist", [False, True], ids=["nothing-on-disk", "append-only-file"])
async def test_a_server_that_dies_and_comes_back_needs_no_restart_of_the_process(
    start_server, persist
) -> None:
    options = ("--requirepass", PASSWORD)
    if persist:
        options += ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    server = start_server(*options)
    location = f"redis://:***@127.0.0.1:{server.port}/0"
    store = RedisStore(f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0", key_prefix="t", env={})
    svc = MemoryService(store)
    others = [UserKey("memory-chat", f"other-{i}") for i in range(6)]
    before = await svc.add(KEY, "added before the crash")
    # Several pooled connections, all of which the crash will break.
    await asyncio.gather(*(svc.add(k, "a fact") for k in others))

    server.kill()
    for call in (lambda: svc.add(KEY, "added during the outage"), lambda: svc.read(KEY)):
        started = time.monotonic()
        with pytest.raises(BackendError) as info:
            await call()
        assert time.monotonic() - started < 10
        _assert_clear(str(info.value), location)

    server.start()  # the same port, the same process, the same store object
    expected = [before.id] if persist else []
    assert [e.id for e in await svc.read(KEY)] == expected
    counts = await asyncio.gather(*(svc.count(k) for k in others))
    assert counts == [1 if persist else 0] * len(others)
    after = await svc.add(KEY, "added after the restart")
    assert [e.id for e in await svc.read(KEY)] == [after.id, *expected]
    await svc.close()


async def test_wrong_and_missing_passwords_are_distinct_clear_errors(start_server) -> None:
    server = start_server("--requirepass", PASSWORD)
    wrong = RedisStore(f"redis://:not-{PASSWORD}@127.0.0.1:{server.port}/0", env={})
    with pytest.raises(BackendError) as info:
        await wrong.open()
    message = str(info.value)
    assert message.startswith(f"redis backend at redis://:***@127.0.0.1:{server.port}/0: connecting failed:")
    assert "rejected the user name or password" in message and "REDIS_URL" in message
    assert PASSWORD not in message and "\n" not in message

    missing = RedisStore(f"redis://127.0.0.1:{server.port}/0", env={})
    with pytest.raises(BackendError) as info:
        await MemoryService(missing).read(KEY)
    message = str(info.value)
    assert "requires a password and none was given" in message and "REDIS_URL" in message
    assert "\n" not in message

    right = RedisStore(f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0", env={})
    async with MemoryService(right) as svc:
        await svc.add(KEY, "let in")
        assert await svc.count(KEY) == 1
    for store in (wrong, missing, right):
        assert PASSWORD not in store.describe()
        await store.close()


# -- vectors -------------------------------------------------------------------------


def test_a_users_vector_keys_share_its_hash_tag() -> None:
    keys = user_keys("memchat", UserKey("memory-chat", "alice"))
    assert keys.vectors == "memchat:mem:{memory-chat:alice}:vec"
    assert keys.version == "memchat:mem:{memory-chat:alice}:version"


async def test_memories_stored_before_vectors_get_them_on_open(make_store, raw) -> None:
    from memchat.engine.vectors import META_EMBEDDER
    from tests.conformance.test_vectors import HashEmbedder

    key = UserKey("memory-chat", "alice")
    store = make_store()
    keys = store.keys_for(key)
    old = {
        "id": "m1", "app_name": key.app, "user_id": key.user,
        "memory": {"memory": "User likes green tea", "topics": ["drinks"], "kind": "fact",
                   "event_time": None, "participants": [], "location": ""},
        "created_at": "2025-01-01T00:00:00.000000+00:00", "updated_at": "2025-01-01T00:00:00.000000+00:00",
        "deleted_at": None,
    }  # fmt: skip
    # What the store wrote before it kept vectors: two hashes, no vector, no version.
    await raw.hset(keys.active, "m1", json.dumps(old))
    await raw.hset(keys.deleted, "m0", json.dumps({**old, "id": "m0", "deleted_at": old["updated_at"]}))
    embedder = HashEmbedder()
    async with MemoryService(store, embedder=embedder, soft_delete=True) as svc:
        [entry] = await svc.read(key)
        assert entry.memory.topics == ("drinks",)
        query = embedder.vector("User likes green tea")
        [hit] = await store.vector_candidates(key, query, 5)
        assert hit.id == "m1" and hit.score == pytest.approx(1.0, abs=1e-5)
        await svc.restore(key, "m0")
        assert {e.id for e in await store.vector_candidates(key, query, 5)} == {"m0", "m1"}
    assert set(await raw.hkeys(keys.vectors)) == {"m0", "m1"}
    client = aioredis.Redis.from_url(SHARED_URL)
    try:
        blob = await client.hget(keys.vectors, "m1")
    finally:
        await client.aclose()
    assert len(blob) == 384 * 4  # float32
    assert "test-hash-embedder" in (await store.read_meta(META_EMBEDDER) or "")


async def test_the_fill_in_reads_only_its_own_prefix_even_with_glob_characters(make_store) -> None:
    from tests.conformance.test_vectors import HashEmbedder

    key = UserKey("memory-chat", "alice")
    base = make_store().key_prefix
    starred, plain = make_store(key_prefix=base + "a*"), make_store(key_prefix=base + "ab")
    async with MemoryService(plain, embedder=NO_EMBEDDER) as svc:
        await svc.add(key, "a memory under the other prefix")
    assert await starred.count_missing_vectors() == 0
    assert await starred.entries_missing_vectors(10) == []
    assert await plain.count_missing_vectors() == 1
    async with MemoryService(starred, embedder=HashEmbedder()) as svc:
        await svc.add(key, "User likes tea")
    assert await plain.count_missing_vectors() == 1  # untouched by the other store's fill-in


async def test_memories_written_without_the_keyword_index_are_found_and_indexed(make_store, raw) -> None:
    """A store from before the index (or a memchat that does not keep it): the first
    search scans as before, finds everything, and rebuilds the user's index."""
    from dataclasses import replace

    from backends.redis import encode_entry
    from memchat.engine import SearchOptions
    from memchat.engine.model import Memory

    store = make_store()
    svc = MemoryService(store)
    key = UserKey("memory-chat", "legacy")
    entry = await svc.add(key, "Alice has a cat")
    keys = store.keys_for(key)
    legacy = replace(entry, id="f" * 64, memory=Memory(text="Alice plays the cello"))
    await raw.hset(keys.active, legacy.id, encode_entry(legacy))  # the entry only, as before the index
    keyword = SearchOptions(mode="keyword")
    assert [e.memory.text for e in await svc.search(key, "cello", keyword)] == ["Alice plays the cello"]
    assert int(await raw.hget(keys.active + ":kw:s3", "active")) == 2
    slot = await raw.hget(keys.active + ":kw:slot", "f" * 64)
    assert await raw.hget(keys.active + ":kw:id", slot) == "f" * 64
    assert await raw.strlen(keys.active + ":kw:q:k:cello") == 20  # one posting
    assert [e.memory.text for e in await svc.search(key, "cat", keyword)] == ["Alice has a cat"]
    await svc.clear(key)  # a hard clear takes the index with it
    assert not [k async for k in raw.scan_iter(match=keys.active + ":kw:*")]
    await svc.close()


async def test_a_version_1_index_is_replaced_and_its_keys_dropped(make_store, raw) -> None:
    """Version 1 kept plain sets (no term counts) under kw:t: with kw:stats; the first
    search after the upgrade rebuilds the index as version 3 and drops the old keys."""
    from memchat.engine import SearchOptions

    store = make_store()
    svc = MemoryService(store)
    key = UserKey("memory-chat", "v1-user")
    await svc.add(key, "Alice has a cat")
    await svc.add(key, "Alice drinks green tea")
    keys = store.keys_for(key)
    base = keys.active + ":kw:"
    async for name in raw.scan_iter(match=base + "*"):  # what version 1 left behind
        await raw.delete(name)
    await raw.sadd(base + "t:k:cat", "stale-id")
    await raw.hset(base + "df", mapping={"k:cat": 1})
    await raw.hset(base + "stats", mapping={"active": 2})
    keyword = SearchOptions(mode="keyword")
    assert [e.memory.text for e in await svc.search(key, "cat", keyword)] == ["Alice has a cat"]
    remaining = {k[len(base) :] async for k in raw.scan_iter(match=base + "*")}
    assert not {"df", "stats", "t:k:cat"} & remaining
    assert {"s3", "q", "q:k:cat", "q:k:tea", "slot", "id"} <= remaining
    assert [e.memory.text for e in await svc.search(key, "green tea", keyword)] == ["Alice drinks green tea"]
    await svc.close()


async def test_a_version_2_index_is_rebuilt_on_open_with_a_progress_line(make_store, raw) -> None:
    """A store whose index is of version 2 (a hash per term under kw:p:) is rebuilt
    on open, every user, with the progress line of the SQL stores; nothing is lost."""
    from backends.redis_index import INDEX_META, INDEX_VERSION
    from memchat.engine import SearchOptions

    store = make_store()
    svc = MemoryService(store)
    texts = {"one": ["Alice has a cat", "Alice drinks green tea"], "two": ["Bob plays chess"]}
    for user, added in texts.items():
        for text in added:
            await svc.add(UserKey("memory-chat", user), text)
    await svc.close()
    for user in texts:  # what version 2 left: its keys only, and no version recorded
        base = store.keys_for(UserKey("memory-chat", user)).active + ":kw:"
        async for name in raw.scan_iter(match=base + "*"):
            await raw.delete(name)
        await raw.hset(base + "p:k:cat", "stale-id", "1 0 4 0")
        await raw.hset(base + "terms", mapping={"k:cat": 1})
        await raw.hset(base + "s2", mapping={"active": 2})
    await raw.hdel(store._meta_key, INDEX_META)

    told = []
    reopened = MemoryService(make_store(), progress=told.append)
    await reopened.open()
    indexing = [state for state in told if state.label == "indexing"]
    assert indexing[0].done == 0 and indexing[-1].finished and indexing[-1].total == 3
    assert indexing[-1].message() == "Indexing 3 memories for search… 100%"
    assert await raw.hget(store._meta_key, INDEX_META) == INDEX_VERSION
    base = store.keys_for(UserKey("memory-chat", "one")).active + ":kw:"
    remaining = {k[len(base) :] async for k in raw.scan_iter(match=base + "*")}
    assert not {"p:k:cat", "terms", "s2"} & remaining
    assert {"s3", "q", "q:k:cat", "slot", "id"} <= remaining
    keyword = SearchOptions(mode="keyword")
    found = await reopened.search(UserKey("memory-chat", "one"), "cat", keyword)
    assert [e.memory.text for e in found] == ["Alice has a cat"]
    found = await reopened.search(UserKey("memory-chat", "two"), "chess", keyword)
    assert [e.memory.text for e in found] == ["Bob plays chess"]
    await reopened.close()


async def test_a_deleted_memory_leaves_the_postings_and_its_slot_is_used_again(make_store, raw) -> None:
    """Removing a memory from the middle of a term's postings keeps the others
    (the last record moves into its place), and the next memory takes its slot."""
    from memchat.engine import SearchOptions

    store = make_store()
    svc = MemoryService(store)
    key = UserKey("memory-chat", "slots")
    added = [await svc.add(key, f"Alice likes tea number {word}") for word in ("one", "two", "three", "four")]
    keys = store.keys_for(key)
    tea = keys.active + ":kw:q:k:tea"
    assert await raw.strlen(tea) == 4 * 20
    second_slot = await raw.hget(keys.active + ":kw:slot", added[1].id)
    await svc.delete(key, added[1].id)
    assert await raw.strlen(tea) == 3 * 20
    assert await raw.hget(keys.active + ":kw:slot", added[1].id) is None
    keyword = SearchOptions(mode="keyword", max_results=10)
    found = {e.memory.text for e in await svc.search(key, "tea", keyword)}
    assert found == {f"Alice likes tea number {word}" for word in ("one", "three", "four")}
    fifth = await svc.add(key, "Bob likes tea number five")
    assert await raw.hget(keys.active + ":kw:slot", fifth.id) == second_slot
    assert await raw.llen(keys.active + ":kw:free") == 0
    assert len(await svc.search(key, "tea", keyword)) == 4
    assert [e.memory.text for e in await svc.search(key, "five", keyword)] == ["Bob likes tea number five"]
    await svc.update(key, added[0].id, "Alice likes coffee now")  # its tea posting goes, coffee comes
    assert await raw.strlen(tea) == 3 * 20
    assert [e.memory.text for e in await svc.search(key, "coffee", keyword)] == ["Alice likes coffee now"]
    await svc.close()


async def test_the_newest_memories_come_from_the_recent_set_and_a_missing_one_is_rebuilt(
    make_store, raw
) -> None:
    """Reading the newest N ranges the recent set instead of reading the whole hash;
    memories written without it (an older memchat) are read in full once, and the
    set is rebuilt."""
    from backends.redis import encode_entry

    store = make_store()
    svc = MemoryService(store)
    key = UserKey("memory-chat", "recent-user")
    for text in ["first memory", "second memory", "third memory", "fourth memory"]:
        await svc.add(key, text)
    keys = store.keys_for(key)
    recent = keys.active + ":recent"
    assert await raw.zcard(recent) == 4
    assert [e.memory.text for e in await svc.read(key, 2)] == ["fourth memory", "third memory"]

    newest = (await svc.read(key, 1))[0]
    await raw.delete(recent)  # as a memchat without the set would leave it
    from dataclasses import replace

    legacy = replace(newest, id="e" * 64)
    await raw.hset(keys.active, legacy.id, encode_entry(legacy))
    assert len(await svc.read(key, 2)) == 2  # read in full, not from the empty set
    assert await raw.zcard(recent) == 5  # rebuilt
    await svc.delete(key, newest.id)
    assert await raw.zcard(recent) == 4
    assert newest.id not in [e.id for e in await svc.read(key, 10)]
    await svc.close()


async def test_many_postings_are_ranked_in_the_client_exactly_as_the_script_ranks(
    make_store, monkeypatch
) -> None:
    """From RANK_HERE_FROM postings a search ranks the holders in this process over
    the packed records (the Lua script held single-threaded Redis for tens of ms at
    100k memories); the results are the script's, with the candidates capped low
    too, and a chosen slot that a write gave away meanwhile sends it to the script."""
    import memchat.engine.retrieval as retrieval
    from backends import redis_index
    from memchat.engine import SearchOptions
    from tests.conformance.test_vectors import HashEmbedder

    key = UserKey("memory-chat", "ranked-here")
    subjects = ["tea", "coffee", "the piano", "chess", "Berlin", "my sister", "running", "jazz"]
    svc = MemoryService(make_store(), embedder=HashEmbedder())
    for i in range(48):
        extra = (" every morning", " with my sister", " on Sundays, tea in hand", "")[i % 4]
        topics = ["drinks"] * (i % 3 == 0)
        await svc.add(key, f"I like {subjects[i % len(subjects)]}{extra} #{i}", topics=topics)
    queries = ["tea", "I like tea", "my sister", "like piano with brother", "Sundays tea jazz", "drinks"]
    modes = [SearchOptions(mode="keyword", max_results=5), SearchOptions(max_results=5)]

    async def results() -> list[list[tuple[str, float]]]:
        found = [await svc.search(key, q, o) for q in queries for o in modes]
        return [[(e.id, round(e.score, 9)) for e in entries] for entries in found]

    ranked_here: list[int] = []
    rank_here = redis_index._rank_here

    async def counted(*args, **kwargs):
        ranked_here.append(1)
        return await rank_here(*args, **kwargs)

    monkeypatch.setattr(redis_index, "_rank_here", counted)
    for cap in (300, 5, 2):
        monkeypatch.setattr(retrieval, "KEYWORD_CANDIDATES", cap)
        monkeypatch.setattr(redis_index, "RANK_HERE_FROM", 10**9)
        by_script = await results()
        assert not ranked_here and any(by_script)
        monkeypatch.setattr(redis_index, "RANK_HERE_FROM", 0)
        assert await results() == by_script
        assert len(ranked_here) >= len(queries)
        ranked_here.clear()

    # A chosen slot whose ID is gone when read (a write freed it): the script ranks.
    client = await svc.store._connected()
    hmget = client.hmget
    gone: list[str] = []

    async def one_gone(name, keys, *args):
        found = await hmget(name, keys, *args)
        if not name.endswith(":kw:id"):  # the entries' own reads stay whole
            return found
        gone.append(keys[0])
        return [None, *found[1:]]

    monkeypatch.setattr(client, "hmget", one_gone)
    assert await results() == by_script
    assert gone
    await svc.close()


async def test_a_version_3_index_gets_the_event_time_set_on_open(make_store, raw) -> None:
    """Version 3 kept no set of event times: opened, the store rebuilds its index,
    and the memories of a period are listed from the new set."""
    from datetime import UTC, datetime, timedelta

    from backends.redis_index import INDEX_META, INDEX_VERSION, index_keys
    from memchat.engine import Metadata

    key = UserKey("memory-chat", "dated")
    store = make_store()
    svc = MemoryService(store)
    may = datetime(2023, 5, 1, tzinfo=UTC)
    for day in range(1, 11):
        await svc.add(key, f"Walked the dog, day {day}", metadata=Metadata(event_time=may.replace(day=day)))
    await svc.add(key, "Undated")
    await svc.close()
    when = index_keys(store.keys_for(key).active).when
    assert await raw.zcard(when) == 10
    await raw.delete(when)  # what version 3 left
    await raw.hset(store._meta_key, INDEX_META, "3")

    reopened = make_store()
    await reopened.open()
    assert await raw.hget(store._meta_key, INDEX_META) == INDEX_VERSION
    found = await reopened.memories_in_periods(key, [(may.replace(day=3), may.replace(day=6))], 100)
    assert found is not None
    assert sorted(e.memory.text for e in found) == [f"Walked the dog, day {d}" for d in (3, 4, 5)]
    assert await reopened.memories_in_periods(key, [(may, may + timedelta(days=40))], 5) is None
    await reopened.close()
