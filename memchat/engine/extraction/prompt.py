"""The extractor's system prompt and tool declarations (reference §6.3).

The prompt follows the structure of the reference's ``defaultPrompt``: role,
instructions, guidelines, episodic-memory rules, memory types, examples,
common mistakes and a checklist. One difference is deliberate: existing
memories are listed with short local numbers (``[1]``, ``[2]``…), never with
their real IDs, and the tools take those numbers as ``memory_id``, so the model
cannot invent or garble an ID.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..model import Entry, utc
from ..tools import new_add_tool, new_clear_tool, new_delete_tool, new_update_tool
from .types import (
    APPEND_ONLY,
    OPERATION_TOOLS,
    PRESERVE_HISTORY,
    OperationType,
)

DEFAULT_PROMPT = """You are a memory manager for a personal assistant. You read a conversation and keep \
the long-term memories about the user accurate and complete, labelling every memory as a FACT or an \
EPISODE. Today's date is {current_date}; resolve every relative time ("yesterday", "last week", \
"two years ago") to an absolute date.

<instructions>
1. Extract everything noteworthy that any speaker says about the user and the people in their life, \
as many small, atomic memories.
2. Classify each one: an EPISODE is something that happened or will happen at a time; a FACT is a \
stable attribute, preference, relationship, skill or opinion.
3. Check the existing memories before adding. Paraphrases and repeats of an existing memory are not \
new: emit nothing for them. Use memory_update when an existing memory is wrong, incomplete or \
superseded, and memory_delete when it must be removed. Refer to an existing memory by its number in \
brackets, e.g. memory_id "2".
4. Call several tools in parallel when there are several changes. When nothing is worth remembering, \
call no tool.
</instructions>

<guidelines>
- Completeness: capture every durable detail; atomicity: one piece of information per memory.
- Deduplication: compare with the existing memories; never add a near-duplicate.
- No subject prefix: write "Enjoys hiking", not "User enjoys hiking". Name other people explicitly \
("Sister Ana lives in Lisbon").
- Be specific: keep titles, names, counts, places, pets, emotions and reasons.
- Topics: short, concrete tags; reuse the topic names of existing memories.
- Update only on a genuine change; delete only when the user asks to forget something or a memory \
was extracted by mistake; clear only when the user explicitly asks to forget everything.
- Write memories in the language the user writes in.
- Skip greetings, small talk, questions to the assistant and one-off requests.
</guidelines>

<episodic_memory_rules>
- Episodes must have memory_kind "episode" and an absolute ISO event_time (YYYY-MM-DD); resolve \
relative words in the text too. When unsure between episode and fact, prefer an episode with event_time.
- Facts with a time context also set event_time.
- Convert durations to start dates ("has lived here for 3 years" -> "Moved here around <the year 3 years \
before today>").
- Put the people involved in participants and the place in location. One event per episode.
</episodic_memory_rules>

<memory_types>
Facts: name, age, job, employer, home town, languages, skills, preferences, dislikes, diet, allergies, \
family, friends, pets, goals, opinions, habits.
Episodes: trips, moves, job changes, purchases, meetings, celebrations, illnesses, achievements, plans \
with a date.
</memory_types>

<examples>
User: "I'm Zhang San, I write Go at work and I love hiking."
-> memory_add("Name is Zhang San", topics ["identity"]); memory_add("Writes Go at work", topics \
["work", "programming"]); memory_add("Loves hiking", topics ["hobbies"])
User: "Yesterday I adopted a cat called Miso." (today is {current_date})
-> memory_add("Adopted a cat called Miso on <yesterday's date>", memory_kind "episode", event_time \
"<yesterday's date>", topics ["pets"])
Existing: [1] Lives in Berlin. User: "I moved to Paris last month."
-> memory_update(memory_id "1", "Lives in Paris (moved from Berlin)", topics ["location"])
Existing: [2] Likes coffee. User: "Forget that I like coffee."
-> memory_delete(memory_id "2")
</examples>

<common_mistakes>
- Bad: "Went to the concert yesterday". Good: "Went to a Coldplay concert on 2024-05-06".
- Bad: adding "Likes Go" when [3] already says "Enjoys programming in Go".
- Bad: memory_id "a1b2c3..." — use the number of the existing memory.
</common_mistakes>

<extraction_checklist>
Before answering: every new detail captured; no duplicates of existing memories; relative times \
resolved; episodes have event_time; updates and deletes refer to existing numbers.
</extraction_checklist>
"""

PRESERVE_HISTORY_POLICY = """
<update_policy>
Preserve history: use memory_update only to enrich an existing memory without contradicting it (adding \
detail while keeping everything it says). When something changed, add a new memory instead of \
rewriting the old one. Use memory_delete or memory_clear only when the user explicitly asks.
</update_policy>
"""

APPEND_ONLY_POLICY = """
<update_policy>
Append only: use only memory_add. Never update, delete or clear memories; record changes as new memories.
</update_policy>
"""

ACTION_DESCRIPTIONS = {
    OperationType.ADD: (
        "only for genuinely new information not already captured by an existing memory, "
        "even in different words"
    ),
    OperationType.UPDATE: (
        "fix or refresh an existing memory (by its number); prefer it to adding a near-duplicate"
    ),
    OperationType.DELETE: (
        "remove an existing memory (by its number) when the user asks to forget it, or it is "
        "outdated or contradicted"
    ),
    OperationType.CLEAR: "remove all memories, only when the user explicitly asks to forget everything",
}
PRESERVE_DELETE_DESCRIPTION = "remove an existing memory (by its number) only when the user explicitly asks"

_MEMORY_ID = {
    "type": "string",
    "description": 'The number of the existing memory, as listed in <existing_memories> (e.g. "2").',
}
_CREATORS = {
    OperationType.ADD: new_add_tool,
    OperationType.UPDATE: new_update_tool,
    OperationType.DELETE: new_delete_tool,
    OperationType.CLEAR: new_clear_tool,
}


def render_template(template: str, reference_date: datetime) -> str:
    """Fill ``{current_date}`` (or ``{{current_date}}``); unknown placeholders stay as they are."""
    day = utc(reference_date).strftime("%Y-%m-%d")
    return template.replace("{{current_date}}", day).replace("{current_date}", day)


def format_existing(number: int, entry: Entry) -> str:
    """``- [n] text (topics: a, b; kind=fact; event_time=YYYY-MM-DD; participants=A,B; location=X)``."""
    memory = entry.memory
    parts = []
    if memory.topics:
        parts.append("topics: " + ", ".join(memory.topics))
    if memory.kind:
        parts.append(f"kind={memory.kind}")
    if memory.event_time is not None:
        parts.append("event_time=" + utc(memory.event_time).strftime("%Y-%m-%d"))
    if memory.participants:
        parts.append("participants=" + ",".join(memory.participants))
    if memory.location:
        parts.append(f"location={memory.location}")
    suffix = f" ({'; '.join(parts)})" if parts else ""
    return f"- [{number}] {memory.text}{suffix}"


def build_system_prompt(
    template: str,
    reference_date: datetime | None,
    actions: Iterable[OperationType],
    existing: Sequence[Entry],
    policy: str,
) -> str:
    """Template, policy block, ``<available_actions>``, numbered ``<existing_memories>``."""
    text = render_template(template, reference_date or datetime.now(UTC))
    if policy == PRESERVE_HISTORY:
        text += PRESERVE_HISTORY_POLICY
    elif policy == APPEND_ONLY:
        text += APPEND_ONLY_POLICY
    text += "\n<available_actions>\n"
    actions = list(actions)
    if not actions:
        text += "No actions available.\n"
    for op in actions:
        description = ACTION_DESCRIPTIONS[op]
        if op == OperationType.DELETE and policy == PRESERVE_HISTORY:
            description = PRESERVE_DELETE_DESCRIPTION
        text += f"- {OPERATION_TOOLS[op]}: {description}\n"
    text += "</available_actions>\n"
    if existing:
        text += "\n<existing_memories>\n"
        text += "".join(format_existing(i, e) + "\n" for i, e in enumerate(existing, start=1))
        text += "</existing_memories>\n"
    return text


def allowed_operations(enabled: frozenset[str] | None, policy: str) -> list[OperationType]:
    """The operations offered to the model, in the order add, update, delete, clear:
    those whose tool is enabled (None: all), and only add under append_only."""
    ops = [OperationType.ADD, OperationType.UPDATE, OperationType.DELETE, OperationType.CLEAR]
    if enabled is not None:
        ops = [op for op in ops if OPERATION_TOOLS[op] in enabled]
    if policy == APPEND_ONLY:
        ops = [op for op in ops if op == OperationType.ADD]
    return ops


def tool_declarations(operations: Iterable[OperationType], policy: str = "") -> list[dict[str, Any]]:
    """Declaration-only copies of the agent's write tools, with memory_id being a local number."""
    declarations = []
    for op in operations:
        tool = _CREATORS[op](None)
        parameters = copy.deepcopy(tool.parameters)
        if "memory_id" in parameters.get("properties", {}):
            parameters["properties"]["memory_id"] = dict(_MEMORY_ID)
        description = ACTION_DESCRIPTIONS[op]
        if op == OperationType.DELETE and policy == PRESERVE_HISTORY:
            description = PRESERVE_DELETE_DESCRIPTION
        declarations.append(
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": description[:1].upper() + description[1:] + ".",
                    "parameters": parameters,
                },
            }
        )
    return declarations
