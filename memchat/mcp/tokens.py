"""Bearer tokens of the MCP server's HTTP mode: each maps to one (app, user).

A token is shown once, when it is made (``memchat mcp token create``); the
file keeps only a salted SHA-256 of its secret. The secrets are 256 random
bits, so a fast hash is enough: nobody can guess one, and the salt keeps two
files from sharing hashes. A token reads ``mcm_<id>_<secret>``: the public id
finds its record without comparing every hash, and names it in ``token list``
and ``token revoke``.

The file is JSON with mode 0600 next to the default SQLite database (the user
data folder) unless ``MEMCHAT_MCP_TOKENS`` / ``[mcp] tokens`` names another;
writes replace it atomically under an exclusive lock, and a running server
re-reads it when it changes, so a new or revoked token counts at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memchat.engine.model import ConfigError, UserKey

PREFIX = "mcm_"
ID_HEX = 8
_TOKEN = re.compile(rf"{PREFIX}([0-9a-f]{{{ID_HEX}}})_([A-Za-z0-9_-]{{20,100}})")
FILE_NAME = "mcp-tokens.json"
VERSION = 1


def default_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("memchat", appauthor=False) / FILE_NAME


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """What the file keeps of one token: never the token itself."""

    id: str
    app: str
    user: str
    created: str
    salt: str
    sha256: str

    @property
    def key(self) -> UserKey:
        return UserKey(app=self.app, user=self.user)

    def matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.sha256, _digest(self.salt, secret))


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode("ascii")).hexdigest()


class TokenStore:
    """The token file: create, list, revoke, and verify (cached until the file changes)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self._cache: tuple[tuple[int, int, int], dict[str, TokenRecord]] | None = None

    # -- reading ---------------------------------------------------------------
    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def _read(self) -> dict[str, TokenRecord]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"cannot read the MCP token file {self.path}: {exc.strerror}") from exc
        try:
            data = json.loads(text)
            return {r["id"]: TokenRecord(**r) for r in data.get("tokens", [])}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ConfigError(
                f"the MCP token file {self.path} is damaged ({type(exc).__name__}): "
                "move it away and create the tokens again with `memchat mcp token create`"
            ) from exc

    def records(self) -> list[TokenRecord]:
        """Every token, oldest first."""
        return sorted(self._records().values(), key=lambda r: r.created)

    def _records(self) -> dict[str, TokenRecord]:
        stamp = self._stamp()
        if stamp is None:
            self._cache = None
            return {}
        if self._cache is None or self._cache[0] != stamp:
            self._cache = (stamp, self._read())
        return self._cache[1]

    def verify(self, token: str) -> TokenRecord | None:
        """The record of a valid token (its ``key`` is the (app, user) it stands for),
        or None: a malformed, unknown, revoked or wrong token are alike to the caller."""
        match = _TOKEN.fullmatch(token.strip()) if isinstance(token, str) else None
        if match is None:
            return None
        try:
            record = self._records().get(match.group(1))
        except ConfigError:
            return None  # a damaged file admits nobody; the server said so when it started
        if record is None or not record.matches(match.group(2)):
            return None
        return record

    # -- writing ---------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, TokenRecord]]:
        """Read-modify-write under an exclusive lock (two `token create` at once both land)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            records = self._read()
            yield records
            self._write(records)

    def _write(self, records: dict[str, TokenRecord]) -> None:
        data = {
            "version": VERSION,
            "tokens": [
                {"id": r.id, "app": r.app, "user": r.user, "created": r.created, "salt": r.salt,
                 "sha256": r.sha256}
                for r in sorted(records.values(), key=lambda r: r.created)
            ],
        }  # fmt: skip
        fd, tmp = tempfile.mkstemp(prefix=".mcp-tokens-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=2)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._cache = None

    def create(self, key: UserKey) -> tuple[str, TokenRecord]:
        """A new token for ``key``: (the token, shown only now; its record)."""
        key.validate()
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_bytes(16).hex()
        with self._locked() as records:
            token_id = secrets.token_hex(ID_HEX // 2)
            while token_id in records:
                token_id = secrets.token_hex(ID_HEX // 2)
            record = TokenRecord(
                id=token_id,
                app=key.app,
                user=key.user,
                created=datetime.now(UTC).isoformat(timespec="seconds"),
                salt=salt,
                sha256=_digest(salt, secret),
            )
            records[token_id] = record
        return f"{PREFIX}{token_id}_{secret}", record

    def revoke(self, token_id: str) -> TokenRecord:
        """Remove the token with this id (or the token itself); ConfigError when there is none."""
        given = token_id.strip()
        match = _TOKEN.fullmatch(given)
        wanted = match.group(1) if match else given.removeprefix(PREFIX).lower()
        with self._locked() as records:
            record = records.pop(wanted, None)
            if record is None:
                raise ConfigError(
                    f"no MCP token has the id {wanted[: ID_HEX * 2]!r}: `memchat mcp token list` shows them"
                )
        return record
