"""Auto extraction: memories made in the background from the conversation (reference §6).

- ``ModelExtractor``: one model call with the write tools, existing memories
  shown under local numbers (``extractor.py``, ``prompt.py``);
  ``RuleBasedExtractor``: the same with no model (``rules.py``).
- Checkers: ``message_threshold``, ``time_interval``, ``all_of``, ``any_of``.
- Update policies: ``merge_similar`` (default), ``preserve_history``, ``append_only``.
- ``AutoMemory``: the worker pool a MemoryService runs in auto mode
  (``worker.py``; its docstring has the queue and watermark rules).

::

    extractor = ModelExtractor(chat_model, checkers=[message_threshold(4)])
    service = MemoryService(store, extractor=extractor, auto_memory=AutoMemoryConfig(workers=2))
    service.add_extraction_listener(print)           # ExtractionStarted / ExtractionFinished
    service.enqueue_auto_memory_job(key, "session-1", history)   # after each turn; never blocks
    await service.close()                            # drains (bounded), then closes the store
"""

from .checkers import all_of, any_of, message_threshold, time_interval
from .extractor import (
    ModelCallbacks,
    ModelExtractor,
    ModelRequest,
    ModelResponse,
    ToolCallData,
    filter_messages,
    parse_operations,
)
from .policy import apply_policy, reconcile
from .rules import RuleBasedExtractor
from .types import (
    APPEND_ONLY,
    MERGE_SIMILAR,
    POLICIES,
    PRESERVE_HISTORY,
    Checker,
    Extraction,
    ExtractionContext,
    ExtractionError,
    ExtractionEvent,
    ExtractionFinished,
    ExtractionStarted,
    ExtractionStatus,
    Extractor,
    JobState,
    Operation,
    OperationType,
    UpdatePolicy,
)
from .worker import AutoMemory, AutoMemoryConfig

__all__ = [
    "APPEND_ONLY",
    "MERGE_SIMILAR",
    "POLICIES",
    "PRESERVE_HISTORY",
    "AutoMemory",
    "AutoMemoryConfig",
    "Checker",
    "Extraction",
    "ExtractionContext",
    "ExtractionError",
    "ExtractionEvent",
    "ExtractionFinished",
    "ExtractionStarted",
    "ExtractionStatus",
    "Extractor",
    "JobState",
    "ModelCallbacks",
    "ModelExtractor",
    "ModelRequest",
    "ModelResponse",
    "Operation",
    "OperationType",
    "RuleBasedExtractor",
    "ToolCallData",
    "UpdatePolicy",
    "all_of",
    "any_of",
    "apply_policy",
    "filter_messages",
    "message_threshold",
    "parse_operations",
    "reconcile",
    "time_interval",
]
