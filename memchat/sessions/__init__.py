"""Saved conversations (sessions): the SessionStore seam and its stores, the
recorder that saves a conversation as it happens, history trimming for a
resumed session, and Markdown/JSON export.

Sits beside the agent, above ``backends``: it imports no UI, CLI or LLM client.
"""

from .model import SessionInfo, SessionNotFoundError, SessionRecord, make_title
from .store import INPUT_HISTORY, SessionStore

__all__ = [
    "INPUT_HISTORY",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionRecord",
    "SessionStore",
    "make_title",
]
