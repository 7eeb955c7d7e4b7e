"""Which memory tools a service offers, and to whom (reference §3.5, §3.6)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import ConfigError
from .base import Tool, ToolName
from .memory import DEFAULT_CREATORS

#: All tool names, sorted (the order ``Tools()`` returns them in).
ALL_TOOLS: tuple[str, ...] = tuple(sorted(name.value for name in ToolName))

#: Enabled by default without an extractor (agentic mode), reference §3.5.
AGENTIC_DEFAULT_ENABLED = frozenset(
    n.value for n in (ToolName.ADD, ToolName.UPDATE, ToolName.SEARCH, ToolName.LOAD)
)
#: Enabled by default with an extractor (auto mode): what the extractor may use.
AUTO_DEFAULT_ENABLED = frozenset(
    n.value for n in (ToolName.ADD, ToolName.UPDATE, ToolName.DELETE, ToolName.SEARCH)
)
#: In auto mode only these are shown to the agent unless explicitly exposed.
AUTO_DEFAULT_EXPOSED = frozenset(n.value for n in (ToolName.SEARCH, ToolName.LOAD))


@dataclass
class ToolSettings:
    """Explicit tool choices; anything not mentioned follows the mode's defaults.

    - ``enabled[name]``: turn a tool on or off (in auto mode, "enabled" also
      means the extractor may use it).
    - ``exposed[name]``: show or hide an enabled tool to the agent. Exposing a
      disabled tool does nothing.
    - ``custom[name]``: a creator ``service -> Tool`` replacing the default; it
      enables the tool unless ``enabled[name]`` is explicitly False.

    Unknown names raise ``ConfigError``; explicit settings win over the
    defaults regardless of the order they were written in.
    """

    enabled: dict[str, bool] = field(default_factory=dict)
    exposed: dict[str, bool] = field(default_factory=dict)
    custom: dict[str, Callable[[Any], Tool]] = field(default_factory=dict)

    def validate(self) -> None:
        for label, mapping in (("enabled", self.enabled), ("exposed", self.exposed), ("custom", self.custom)):
            if not isinstance(mapping, Mapping):
                raise ConfigError(f"tool settings {label!r} must be a mapping of tool name to value")
            unknown = sorted(str(name) for name in mapping if name not in ALL_TOOLS)
            if unknown:
                raise ConfigError(
                    f"unknown memory tool name(s) in {label}: {', '.join(unknown)}; "
                    f"valid names are: {', '.join(ALL_TOOLS)}"
                )
        for label, mapping in (("enabled", self.enabled), ("exposed", self.exposed)):
            for name, value in mapping.items():
                if not isinstance(value, bool):
                    raise ConfigError(f"tool setting {label}[{name!r}] must be true or false, got {value!r}")
        for name, creator in self.custom.items():
            if creator is not None and not callable(creator):
                raise ConfigError(f"custom tool creator for {name!r} must be callable (service -> Tool)")


def enabled_tool_names(settings: ToolSettings, auto_mode: bool) -> set[str]:
    """Enabled tools: in auto mode, the operations the extractor may perform."""
    settings.validate()
    enabled = set(AUTO_DEFAULT_ENABLED if auto_mode else AGENTIC_DEFAULT_ENABLED)
    enabled.update(name for name, creator in settings.custom.items() if creator is not None)
    for name, on in settings.enabled.items():
        if on:
            enabled.add(name)
        else:
            enabled.discard(name)
    return enabled


def select_tool_names(settings: ToolSettings, auto_mode: bool) -> list[str]:
    """The tools shown to the agent, sorted by name."""
    enabled = enabled_tool_names(settings, auto_mode)
    selected = []
    for name in ALL_TOOLS:
        if name not in enabled or settings.exposed.get(name) is False:
            continue
        if auto_mode and not (settings.exposed.get(name) is True or name in AUTO_DEFAULT_EXPOSED):
            continue
        selected.append(name)
    return selected


def build_tools(service: Any, settings: ToolSettings | None, auto_mode: bool) -> list[Tool]:
    """Create the selected tools (each creator called once), sorted by name."""
    settings = settings or ToolSettings()
    tools = []
    for name in select_tool_names(settings, auto_mode):
        creator = settings.custom.get(name) or DEFAULT_CREATORS[name]
        tool = creator(service)
        if tool is None:
            raise ConfigError(f"the creator for tool {name!r} returned None instead of a Tool")
        tools.append(tool)
    return tools
