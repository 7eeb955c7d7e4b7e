"""memchat: a terminal chat with long-term memory, and the memory engine behind it."""

__version__ = "0.1.0"
