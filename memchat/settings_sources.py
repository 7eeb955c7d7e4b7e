"""Where settings come from, and how their text becomes values: the config
file's place and TOML, durations ("90s", "3m") and booleans ("yes", "off").
Errors are one sentence (a ConfigError; the engine's model is imported only
when there is one to raise). Standard library only, like memchat/settings.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memchat.engine.model import ConfigError

CONFIG_NAME = "memchat.toml"


def config_error(message: str) -> ConfigError:
    """A ConfigError (the engine's model is imported only when there is one to raise)."""
    from memchat.engine.model import ConfigError

    return ConfigError(message)


def find_config(cwd: Path, environ: Mapping[str, str]) -> Path | None:
    explicit = environ.get("MEMCHAT_CONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise config_error(f"MEMCHAT_CONFIG points to {path}, which does not exist")
        return path
    candidates = [cwd / CONFIG_NAME]
    user = user_config_path()
    if user is not None:
        candidates.append(user)
    return next((p for p in candidates if p.is_file()), None)


def user_config_path() -> Path | None:
    """``~/.config/memchat/memchat.toml`` on Linux (the platform's user config folder)."""
    try:
        from platformdirs import user_config_path as platform_config_folder

        return platform_config_folder("memchat", appauthor=False) / CONFIG_NAME
    except Exception:  # platformdirs missing is not fatal: the local file still counts
        return None


def read_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    import tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise config_error(f"{path} is not valid TOML ({exc}): fix or remove it") from exc
    except OSError as exc:
        raise config_error(f"cannot read {path}: {exc.strerror}") from exc


BOOLS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")


def parse_duration(value: Any, label: str = "duration") -> float:
    """Seconds from 90, 1.5, "90", "90s", "3m", "1h30m" or "500ms"."""
    if isinstance(value, bool):
        raise config_error(f"{label} must be a duration such as 90s, 3m or 1h, not {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower().replace(" ", "")
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise config_error(f"{label} must be a duration such as 90s, 3m or 1h, not {value!r}")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * scale[unit] for number, unit in parts)
