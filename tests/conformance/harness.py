"""How the conformance suite reaches each backend.

A harness gives every test its own empty namespace on a backend (a fresh
file, database table, key prefix…) and can build any number of store objects
on that same namespace, in this process or from a picklable spec in another.
Adding a backend to the suite = adding one harness here; the tests stay as
they are.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends import create
from backends.base import Store


@dataclass
class Harness:
    name: str
    #: Options for ``backends.create`` naming this test's namespace.
    options: dict[str, Any] = field(default_factory=dict)
    #: Stores without shared storage (inmemory) hand out one instance.
    shared_instance: Store | None = None

    def make_store(self) -> Store:
        if self.shared_instance is not None:
            return self.shared_instance
        return create(self.name, **self.options)

    def spec(self) -> tuple[str, dict[str, Any]]:
        """Picklable recipe another OS process can pass to ``create``."""
        return self.name, dict(self.options)


def _inmemory(tmp_path: Path) -> Harness:
    return Harness("inmemory", shared_instance=create("inmemory"))


def _sqlite(tmp_path: Path) -> Harness:
    return Harness("sqlite", {"dsn": f"sqlite:///{tmp_path / f'mem-{uuid.uuid4().hex[:8]}.db'}"})


#: name → builder of a fresh harness. Order is the order tests run in.
HARNESSES: dict[str, Callable[[Path], Harness]] = {
    "inmemory": _inmemory,
    "sqlite": _sqlite,
}


def multi_process_names() -> list[str]:
    """Backends whose store declares that several processes may share it."""
    from backends import store_class

    return [n for n in HARNESSES if store_class(n).capabilities.multi_process]
