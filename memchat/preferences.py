"""Remembering what a person changes at run time (the TUI's theme, streaming,
tool panels) in their config file, so the next start looks the same.

The file is edited line by line: comments, order and every other key stay as
they were; a missing section or key is added. Nothing here imports the UI.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

#: ``[section]`` headers (also ``[section] # comment``).
_SECTION = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")


def toml_value(value: bool | int | float | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string is JSON's string syntax


def update_toml(text: str, values: Mapping[tuple[str, str], bool | int | float | str]) -> str:
    """``text`` with each ``(section, key)`` set to its value."""
    lines = text.splitlines()
    for (section, key), value in values.items():
        line = f"{key} = {toml_value(value)}"
        key_line = re.compile(rf"^\s*{re.escape(key)}\s*=")
        start = next(
            (i for i, text in enumerate(lines) if (m := _SECTION.match(text)) and m[1].strip() == section),
            None,
        )
        if start is None:
            if lines and lines[-1].strip():
                lines.append("")
            lines += [f"[{section}]", line]
            continue
        end = next((i for i in range(start + 1, len(lines)) if _SECTION.match(lines[i])), len(lines))
        found = next((i for i in range(start + 1, end) if key_line.match(lines[i])), None)
        if found is not None:
            lines[found] = line
        else:
            insert = end
            while insert > start + 1 and not lines[insert - 1].strip():
                insert -= 1  # before the blank lines that end the section
            lines.insert(insert, line)
    return "\n".join(lines) + "\n"


def save_preferences(
    path: str | os.PathLike[str], values: Mapping[tuple[str, str], bool | int | float | str]
) -> None:
    """Write ``values`` into the config file at ``path`` (created with its
    folder if missing), atomically: a crash never leaves half a file."""
    target = Path(path)
    text = target.read_text(encoding="utf-8") if target.is_file() else ""
    updated = update_toml(text, values)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(updated)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
