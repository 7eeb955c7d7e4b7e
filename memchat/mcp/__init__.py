"""``memchat mcp``: the memory tools and memories over the Model Context Protocol.

``server.py`` adapts ``MemoryService.tools()`` to MCP, ``http.py`` adds the
bearer-token HTTP transport, ``tokens.py`` keeps the tokens (hashed),
``run.py`` starts a server, ``commands.py`` is the CLI. Importing this package
loads no MCP SDK; starting a server does (``pip install 'memchat[mcp]'``).
"""
