"""The six agent-facing memory tools and the rules that pick which to expose.

Port of the reference's ``memory/tool`` package and of ``Tools()`` (reference
§3). Every tool is an OpenAI-style function tool. Its arguments are declared
once, as a dataclass (``arguments.py``), from which both the JSON schema the
model sees and the checking of what it sends are derived (``specs.py``).
A tool never raises (``base.py``): any problem is a JSON ``{"error": ...}``
result the model can read. ``memory.py`` holds what each tool does and
``selection.py`` which tools a service offers.
"""

from __future__ import annotations

from .arguments import DEFAULT_LOAD_LIMIT, MAX_LOAD_LIMIT
from .base import (
    MAX_ARGUMENTS_BYTES,
    MAX_ARGUMENTS_DEPTH,
    Handler,
    Tool,
    ToolError,
    ToolName,
    ToolResult,
    parse_arguments,
    unknown_tool_result,
)
from .memory import (
    DEFAULT_CREATORS,
    DEFAULT_MAX_TEXT_LENGTH,
    build_search_options,
    entry_to_result,
    new_add_tool,
    new_clear_tool,
    new_delete_tool,
    new_load_tool,
    new_search_tool,
    new_update_tool,
)
from .selection import (
    AGENTIC_DEFAULT_ENABLED,
    ALL_TOOLS,
    AUTO_DEFAULT_ENABLED,
    AUTO_DEFAULT_EXPOSED,
    ToolSettings,
    build_tools,
    enabled_tool_names,
    select_tool_names,
)
from .specs import KINDS, MAX_FIELD_LENGTH, MAX_ID_LENGTH, MAX_ITEM_LENGTH, MAX_LIST_ITEMS

# The tool names as plain constants (the MCP server and settings use these).
ADD = ToolName.ADD
UPDATE = ToolName.UPDATE
DELETE = ToolName.DELETE
CLEAR = ToolName.CLEAR
SEARCH = ToolName.SEARCH
LOAD = ToolName.LOAD

__all__ = [
    "ADD",
    "AGENTIC_DEFAULT_ENABLED",
    "ALL_TOOLS",
    "AUTO_DEFAULT_ENABLED",
    "AUTO_DEFAULT_EXPOSED",
    "CLEAR",
    "DEFAULT_CREATORS",
    "DEFAULT_LOAD_LIMIT",
    "DEFAULT_MAX_TEXT_LENGTH",
    "DELETE",
    "KINDS",
    "LOAD",
    "MAX_ARGUMENTS_BYTES",
    "MAX_ARGUMENTS_DEPTH",
    "MAX_FIELD_LENGTH",
    "MAX_ID_LENGTH",
    "MAX_ITEM_LENGTH",
    "MAX_LIST_ITEMS",
    "MAX_LOAD_LIMIT",
    "SEARCH",
    "UPDATE",
    "Handler",
    "Tool",
    "ToolError",
    "ToolName",
    "ToolResult",
    "ToolSettings",
    "build_search_options",
    "build_tools",
    "enabled_tool_names",
    "entry_to_result",
    "new_add_tool",
    "new_clear_tool",
    "new_delete_tool",
    "new_load_tool",
    "new_search_tool",
    "new_update_tool",
    "parse_arguments",
    "select_tool_names",
    "unknown_tool_result",
]
