"""The client/server SQL stores' shared base (MySQL/MariaDB, PostgreSQL):
where to connect comes from one resolution, ``dsn`` argument > ``<env_dsn>``
> the reference's separate variables ``<env_prefix>_HOST`` … > defaults, and
error messages name the setting a person changes to fix it."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TypeVar

from .sql import SQLStore

Target = TypeVar("Target")


def resolve_target(
    dsn: str | None,
    env: Mapping[str, str],
    env_dsn: str,
    dsn_label: str,
    parse: Callable[[str, str], Target],
    from_env: Callable[[Mapping[str, str]], Target],
) -> Target:
    """``parse(dsn)`` > ``parse($env_dsn)`` > ``from_env(env)``; ``parse`` is
    told where its DSN came from (``dsn_label`` or ``env_dsn``) for its errors."""
    if dsn:
        return parse(dsn, dsn_label)
    if env.get(env_dsn):
        return parse(env[env_dsn], env_dsn)
    return from_env(env)


def env_setting(env: Mapping[str, str], prefix: str, name: str, default: str) -> str:
    """``$<prefix>_<name>``, or ``default`` when unset or empty."""
    return env.get(f"{prefix}_{name}") or default


class ServerSQLStore(SQLStore):
    """Base of the client/server SQL stores, which are configured by a DSN or
    by the reference's separate variables ``<env_prefix>_HOST`` … (``env_dsn``
    taking priority)."""

    env_prefix = ""
    env_dsn = ""
    #: Where the DSN came from ("the DSN" argument or ``env_dsn``), or None
    #: when the separate variables were used: error messages name the fix.
    _dsn_source: str | None = None

    def _resolve(
        self,
        dsn: str | None,
        env: Mapping[str, str] | None,
        resolve: Callable[[str | None, Mapping[str, str], str, str], Target],
    ) -> Target:
        """Where to connect: ``resolve(dsn, env, env_prefix, env_dsn)`` over
        ``env`` (default: the process environment); remembers which source won."""
        env = os.environ if env is None else env
        target = resolve(dsn, env, self.env_prefix, self.env_dsn)
        self._dsn_source = "the DSN" if dsn else (self.env_dsn if env.get(self.env_dsn) else None)
        return target

    def _setting(self, *fields: str) -> str:
        """How a person changes ``fields``: the variables, or the parts of the DSN."""
        if self._dsn_source:
            return f"the {' and '.join(f.lower() for f in fields)} in {self._dsn_source}"
        return " and ".join(f"{self.env_prefix}_{f}" for f in fields)

    def describe(self) -> str:
        table = f"{self.table.schema}.{self.table.name}" if self.table.schema else self.table.name
        return f"{self.name} ({self.location}, table {table})"
