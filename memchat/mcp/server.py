"""The memory tools and memories over the Model Context Protocol.

A thin adapter: the tools are ``MemoryService.tools()`` — the chat's six
tools with their names, descriptions, JSON schemas, enable/disable rules,
validation and error texts — and every call goes through ``Tool.run``. This
module only says who is calling (the key), publishes the memories as
resources, and tells subscribed clients when they change.

Who is calling: over stdio, the user and app the server was started with;
over HTTP, the (app, user) of the bearer token of that very request
(``memchat/mcp/http.py``), never anything the client sends in its arguments.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

import mcp_types as types
from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp.shared.exceptions import MCPError

from memchat.engine import Entry, MemchatError, MemoryNotFoundError, MemoryService, UserKey
from memchat.engine.timeparse import format_rfc3339
from memchat.engine.tools import (
    ADD,
    CLEAR,
    DELETE,
    LOAD,
    SEARCH,
    UPDATE,
    entry_to_result,
    unknown_tool_result,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

SERVER_NAME = "memchat"
MEMORIES_URI = "memchat://memories"
MEMORY_URI_PREFIX = MEMORIES_URI + "/"
MEMORY_URI_TEMPLATE = MEMORY_URI_PREFIX + "{memory_id}"
#: Memories per page of resources/list.
PAGE_SIZE = 100
#: Seconds between looks for changes made outside this server (see MemoryMCP.watch).
WATCH_INTERVAL = 2.0
#: Connections subscribed with resources/subscribe (2025 clients) kept at most.
MAX_SUBSCRIBERS = 1024
#: Tools after whose success the memories have changed.
WRITES = frozenset({ADD, UPDATE, DELETE, CLEAR})
#: MCP's hints about each tool (the model-facing text stays the engine's).
ANNOTATIONS: dict[str, types.ToolAnnotations] = {
    ADD: types.ToolAnnotations(title="Add a memory", idempotent_hint=True, open_world_hint=False),
    UPDATE: types.ToolAnnotations(title="Update a memory", destructive_hint=True, open_world_hint=False),
    DELETE: types.ToolAnnotations(title="Delete a memory", destructive_hint=True, open_world_hint=False),
    CLEAR: types.ToolAnnotations(title="Delete all memories", destructive_hint=True, open_world_hint=False),
    SEARCH: types.ToolAnnotations(title="Search memories", read_only_hint=True, open_world_hint=False),
    LOAD: types.ToolAnnotations(title="Load recent memories", read_only_hint=True, open_world_hint=False),
}
INSTRUCTIONS = (
    "Long-term memory about the user, shared with the memchat chat app and the user's other agents. "
    "Search it before answering questions that may depend on what you know about the user; add or "
    "update memories when the user tells you something durable about themselves."
)
#: The claims a token's AccessToken carries (memchat/mcp/http.py fills them in).
APP_CLAIM, USER_CLAIM = "memchat_app", "memchat_user"


class MemoryMCP:
    """One MCP server over one MemoryService. ``key``: the caller on stdio;
    None for HTTP, where every request brings its own token."""

    def __init__(self, service: MemoryService, *, key: UserKey | None = None) -> None:
        self.service = service
        self.key = key
        self.tools = {tool.name: tool for tool in service.tools()}
        #: 2026-07-28 clients listen on a stream per subscription; each user has
        #: their own bus, so nobody hears of another user's changes.
        self._listeners: dict[UserKey, tuple[InMemorySubscriptionBus, ListenHandler]] = {}
        #: Earlier clients subscribe with resources/subscribe: per connection,
        #: (key, the session to notify through, the URIs).
        self._subscribers: dict[int, tuple[UserKey, Any, set[str]]] = {}
        #: The watcher's last look at each subscribed user's memories: (count, newest change).
        self._fingerprints: dict[UserKey, tuple[int, Any]] = {}
        #: Service calls under way; a client that leaves does not cut them short.
        self._inflight: set[asyncio.Future[Any]] = set()
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=_version(),
            title="memchat memory",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=self._listen,
        )

    async def _completed(self, work: Awaitable[T]) -> T:
        """Run a call on the service to its end even if the client goes away (the SDK then
        cancels the handler): a write cut off inside its transaction would leave the
        backend's connection half-closed, and the process hanging on exit."""
        task = asyncio.ensure_future(work)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        return await asyncio.shield(task)

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the calls still under way; before closing the service."""
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=timeout)

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions(resources_changed=True))

    # -- who is calling ------------------------------------------------------
    def key_for(self, ctx: ServerRequestContext[Any, Any]) -> UserKey:
        request = ctx.request
        if request is None:  # stdio (or in process): the server's own user
            if self.key is None:
                raise MCPError(types.INVALID_REQUEST, "this server needs a bearer token on every request")
            return self.key
        user = request.scope.get("user")
        claims = (user.access_token.claims or {}) if isinstance(user, AuthenticatedUser) else {}
        app, name = claims.get(APP_CLAIM), claims.get(USER_CLAIM)
        if not isinstance(app, str) or not isinstance(name, str):
            # The HTTP layer answers 401 before this; never fall back to a default user.
            raise MCPError(types.INVALID_REQUEST, "the request carries no valid bearer token")
        return UserKey(app=app, user=name)

    # -- tools ---------------------------------------------------------------
    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.parameters,
                    annotations=ANNOTATIONS.get(tool.name),
                )
                for tool in self.tools.values()
            ]
        )

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        key = self.key_for(ctx)
        tool = self.tools.get(params.name)
        if tool is None:
            result = unknown_tool_result(params.name, self.tools)
        else:
            # As JSON text, so the arguments meet the chat's own bounded parser
            # (size, depth) and get its error sentences, not the SDK's.
            result = await self._completed(tool.run(_as_json(params.arguments), key))
        log.debug("%s for %s: %s", params.name, key, "error" if result.is_error else "ok")
        if not result.is_error and params.name in WRITES:
            await self._changed(key)
        return types.CallToolResult(
            content=[types.TextContent(text=result.content)], is_error=result.is_error
        )

    # -- resources -------------------------------------------------------------
    async def _list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        key = self.key_for(ctx)
        cursor = params.cursor if params is not None else None
        offset = _offset(cursor)
        entries = await self._service_call(self.service.read, key)
        page = entries[offset : offset + PAGE_SIZE]
        resources = []
        if offset == 0:
            resources.append(
                types.Resource(
                    uri=MEMORIES_URI,
                    name="memories",
                    title=f"Your memories ({len(entries)})",
                    description=f"Every memory of user {key.user} in app {key.app}, newest first, as JSON.",
                    mime_type="application/json",
                )
            )
        resources.extend(_memory_resource(e) for e in page)
        more = offset + PAGE_SIZE < len(entries)
        return types.ListResourcesResult(
            resources=resources, next_cursor=str(offset + PAGE_SIZE) if more else None
        )

    async def _list_resource_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=MEMORY_URI_TEMPLATE,
                    name="memory",
                    title="One memory",
                    description="One memory by its id (as memory_search and memory_load return it), as JSON.",
                    mime_type="application/json",
                )
            ]
        )

    async def _read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        key = self.key_for(ctx)
        uri = str(params.uri)
        if uri == MEMORIES_URI:
            entries = await self._service_call(self.service.read, key)
            body: Any = {"count": len(entries), "memories": [_resource_view(e) for e in entries]}
        elif uri.startswith(MEMORY_URI_PREFIX):
            memory_id = uri.removeprefix(MEMORY_URI_PREFIX)
            body = _resource_view(await self._service_call(self.service.get, key, memory_id))
        else:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown resource {uri[:200]!r}: read {MEMORIES_URI} or {MEMORY_URI_TEMPLATE}",
            )
        text = json.dumps(body, ensure_ascii=False)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=text)]
        )

    async def _service_call(self, method: Any, *args: Any) -> Any:
        """A service read for a resource; its failure is one sentence to the client."""
        try:
            return await self._completed(method(*args))
        except MemoryNotFoundError as exc:
            raise MCPError(types.INVALID_PARAMS, f"no such memory: {exc}") from exc
        except MemchatError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from exc

    # -- change notifications --------------------------------------------------
    def _listener(self, key: UserKey) -> tuple[InMemorySubscriptionBus, ListenHandler]:
        if key not in self._listeners:
            bus = InMemorySubscriptionBus()
            self._listeners[key] = (bus, ListenHandler(bus))
        return self._listeners[key]

    async def _listen(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        _, handler = self._listener(self.key_for(ctx))
        return await handler(ctx, params)

    async def _subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        key = self.key_for(ctx)
        connection = _connection_of(ctx)
        if id(connection) not in self._subscribers and len(self._subscribers) >= MAX_SUBSCRIBERS:
            # Clients that left without unsubscribing are only noticed when a send fails:
            # the oldest goes first rather than the table growing without end.
            self._subscribers.pop(next(iter(self._subscribers)))
        _, _, uris = self._subscribers.setdefault(id(connection), (key, ctx.session, set()))
        uris.add(str(params.uri))
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        entry = self._subscribers.get(id(_connection_of(ctx)))
        if entry is not None:
            entry[2].discard(str(params.uri))
        return types.EmptyResult()

    async def _changed(self, key: UserKey) -> None:
        """Tell the user's subscribers that their memories changed (never anybody else's)."""
        self._fingerprints.pop(key, None)  # the watcher takes the new state as its baseline
        if key in self._listeners:
            bus, _ = self._listeners[key]
            await bus.publish(ResourceUpdated(uri=MEMORIES_URI))
            await bus.publish(ResourcesListChanged())
        for connection, (owner, session, uris) in list(self._subscribers.items()):
            if owner != key or MEMORIES_URI not in uris:
                continue
            try:
                await session.send_resource_updated(MEMORIES_URI)
            except Exception:  # the client went away: forget it
                log.debug("dropping a resource subscriber", exc_info=True)
                self._subscribers.pop(connection, None)

    async def watch(self, interval: float = WATCH_INTERVAL) -> None:
        """Announce changes made elsewhere (the chat, the CLI, another server) to the users
        who listen, by looking every ``interval`` seconds at how many memories they have
        and when the newest changed. Runs until cancelled."""
        while True:
            await asyncio.sleep(interval)
            keys = set(self._listeners) | {owner for owner, _, uris in self._subscribers.values() if uris}
            for key in keys:
                try:
                    latest = await self._completed(self.service.read(key, 1))
                    count = await self._completed(self.service.count(key))
                except Exception:  # a backend that is down: the next look tries again
                    log.debug("watching %s failed", key, exc_info=True)
                    continue
                fingerprint = (count, latest[0].updated_at if latest else None)
                known = self._fingerprints.get(key)
                self._fingerprints[key] = fingerprint
                if known is not None and known != fingerprint:
                    await self._changed(key)
                    self._fingerprints[key] = fingerprint


def _connection_of(ctx: Any) -> Any:
    # The SDK builds a ServerSession per request; the connection under it is what
    # stays the same for one client (no public accessor yet in mcp 2.3).
    return getattr(ctx.session, "_connection", ctx.session)


def _resource_view(entry: Entry) -> dict[str, Any]:
    """The tools' view of a memory, plus when it last changed (for a client's list)."""
    return {**entry_to_result(entry), "updated": format_rfc3339(entry.updated_at, fractional=True)}


def _memory_resource(entry: Entry) -> types.Resource:
    text = " ".join(entry.memory.text.split())
    return types.Resource(
        uri=MEMORY_URI_PREFIX + entry.id,
        name=entry.id[:12],
        title=text[:80] + ("…" if len(text) > 80 else ""),
        description=", ".join(entry.memory.topics) or None,
        mime_type="application/json",
    )


def _offset(cursor: str | None) -> int:
    if not cursor:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise MCPError(types.INVALID_PARAMS, "invalid cursor: pass the nextCursor of the previous page")
    return int(cursor)


def _as_json(arguments: Any) -> Any:
    if arguments is None:
        return None
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return arguments  # Tool.run checks a mapping just the same


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memchat")
    except PackageNotFoundError:
        return "0"
