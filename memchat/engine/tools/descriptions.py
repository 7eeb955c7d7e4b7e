"""What the model reads about each memory tool: when to call it and what it does."""

from __future__ import annotations

_SCOPE = "It only sees and changes the memories of the current user in this app."
_READ = (
    "When the user's request may depend on something remembered about them, "
    "call it directly; do not ask for permission first."
)
_WRITE = (
    "When the user clearly asks you to remember, correct or forget something, "
    "do it right away without asking for confirmation."
)
_CAPTURE = (
    "Store concise, self-contained facts that will save asking the user again: preferences, "
    "background, relationships, plans and important events. Do not store guesses, duplicates of "
    "existing memories, small talk or trivia, or sensitive data (passwords, financial, health "
    "details) unless the user explicitly asks."
)
_DESTRUCTIVE = "Destructive: use it only when the user explicitly asks to remove or reset memory."

ADD_DESCRIPTION = " ".join(
    [
        "Add a durable memory about the user, written as a brief third-person statement "
        "(e.g. 'Alice is allergic to peanuts').",
        "Use memory_kind 'fact' for stable attributes and 'episode' for something that happened "
        "at a specific time, with an absolute event_time and, when known, participants and location.",
        "If a stored memory already covers this, use memory_update instead of adding a near-duplicate.",
        _SCOPE,
        _WRITE,
        _CAPTURE,
    ]
)
UPDATE_DESCRIPTION = " ".join(
    [
        "Update an existing memory: replace its text (and topics) with a corrected or refined version.",
        "Find the memory_id first with memory_search or memory_load.",
        "Prefer this over adding a new memory when new information corrects or refines a stored one.",
        "Topics are replaced, not merged: send the full list you want to keep.",
        "The memory's id may change after an update; use the memory_id returned in the response.",
        _SCOPE,
        _WRITE,
    ]
)
DELETE_DESCRIPTION = " ".join(
    [
        "Delete one memory by its memory_id (find it with memory_search or memory_load).",
        "Use it for memories that are wrong, obsolete or that the user withdraws; "
        "prefer memory_update when the memory should stay but needs correcting.",
        _SCOPE,
        _WRITE,
        _DESTRUCTIVE,
    ]
)
CLEAR_DESCRIPTION = " ".join(
    [
        "Delete all memories of the user.",
        "Use it only when the user asks to forget everything or to reset their memory.",
        _SCOPE,
        _DESTRUCTIVE,
    ]
)
SEARCH_DESCRIPTION = " ".join(
    [
        "Search the memories about the user.",
        "Returns memories ranked by relevance, each with id, memory text, topics, kind (fact/episode), "
        "event_time, participants, location and a relevance score (higher is more relevant).",
        "Use short keyword queries (e.g. 'Alice hiking trip' rather than 'When did Alice go hiking?').",
        "For a multi-part question, search for each part separately and combine the results.",
        "Check participants to make sure a memory is about the right person.",
        "For time questions ('when did X happen', 'what did the user do in May 2023'), use "
        "time_after/time_before and consider order_by_event_time=true.",
        "kind is only a soft preference with automatic fallback to the other kind; omit it when unsure.",
        _SCOPE,
        _READ,
    ]
)
LOAD_DESCRIPTION = " ".join(
    [
        "Load the most recently updated memories about the user, newest first, for a broad overview.",
        "Each includes id, text, topics, kind (fact/episode), event_time, participants and location.",
        "Use memory_search instead when looking for something specific.",
        _SCOPE,
        _READ,
    ]
)
