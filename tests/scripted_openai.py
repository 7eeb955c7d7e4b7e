"""A scripted OpenAI-compatible chat server for tests (stdlib only).

It speaks the real wire format of ``POST /v1/chat/completions`` so the real
``openai`` SDK (or anything else OpenAI-compatible) can be pointed at it::

    with ScriptedOpenAI() as server:
        server.reply_tool_calls([("call_1", "memory_add", '{"memory": "likes tea"}')])
        server.reply_text("Noted, you like tea.", chunks=3)
        config = ModelConfig(model="test-model", api_key="sk-test", base_url=server.base_url)
        ...                               # two requests: a tool-call round, then a text round
        server.requests[1]["messages"]    # what the client sent in the second round

Every request takes the next scripted reply from a FIFO queue:

``reply_text(text, chunks=3, *, usage=None, chunk_delay=0.0, cut=False)``
    An assistant answer. Streamed as ``chunks`` roughly equal ``delta.content``
    pieces (at least one), then a chunk with ``finish_reason="stop"``.
    ``chunk_delay`` sleeps between streamed pieces; ``cut=True`` drops the
    connection after the text pieces (no finish, no ``[DONE]``) to simulate a
    stream that breaks off mid-answer.
``reply_tool_calls(calls, *, text="", fragments=3, usage=None)``
    ``calls`` is a list of ``(id, name, arguments_json_text)``; the arguments
    are sent verbatim (they may be malformed on purpose). Streamed, ``text``
    (if any) comes first; then the first delta of each call carries
    ``index, id, type, function.name`` and empty arguments, followed by the
    arguments split into ``fragments`` pieces, with several calls interleaved
    (call 0 piece 1, call 1 piece 1, call 0 piece 2, ...); the final chunk has
    ``finish_reason="tool_calls"``.
``reply_error(status, message, headers=None)``
    An HTTP error with the OpenAI error body
    ``{"error": {"message", "type", "code"}}`` and optional extra headers
    (e.g. ``{"Retry-After": "1"}`` with a 429).
``reply_delay(seconds)``
    The *next* queued reply (or the fallback) is sent only after ``seconds``;
    use it with a short client timeout to test timeouts.

When the queue is empty a request gets a 500 whose message says
"ScriptedOpenAI: script exhausted" (and ``unscripted`` counts such requests).

Streaming follows the request: ``"stream": true`` → ``text/event-stream``
(chunked) of ``data: {chat.completion.chunk}`` lines, a usage chunk (empty
``choices`` + ``usage``) when ``stream_options.include_usage`` is set, then
``data: [DONE]``; otherwise one ``chat.completion`` JSON object. Usage
defaults to ``prompt_tokens = len(json.dumps(messages)) // 4`` and
``completion_tokens = max(1, len(text + arguments) // 4)``; pass
``usage=(prompt, completion)`` to pin it.

Inspect what the client sent with ``requests`` (the decoded JSON bodies, in
order, including rejected ones) and ``headers`` (the matching request headers,
lower-cased names). ``ScriptedOpenAI(reject_stream_options=True)`` imitates a
server that answers 400 to any request carrying ``stream_options`` (without
consuming the script). Other paths get a 404 (also without consuming it).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ScriptedOpenAI"]

CHAT_PATH = "/v1/chat/completions"


@dataclass
class _Reply:
    kind: str  # "text" | "tools" | "error" | "delay"
    text: str = ""
    chunks: int = 3
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    fragments: int = 3
    usage: tuple[int, int] | None = None
    chunk_delay: float = 0.0
    cut: bool = False
    status: int = 200
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def _split(text: str, pieces: int) -> list[str]:
    """``text`` in ``pieces`` roughly equal consecutive parts (fewer if it is short)."""
    pieces = max(1, min(pieces, len(text))) if text else 1
    size, extra = divmod(len(text), pieces)
    parts, start = [], 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        parts.append(text[start:end])
        start = end
    return parts


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}


class ScriptedOpenAI:
    """See the module docstring."""

    def __init__(self, *, reject_stream_options: bool = False) -> None:
        self.reject_stream_options = reject_stream_options
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.unscripted = 0
        self._queue: deque[_Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # -- scripting -------------------------------------------------------

    def reply_text(
        self,
        text: str,
        chunks: int = 3,
        *,
        usage: tuple[int, int] | None = None,
        chunk_delay: float = 0.0,
        cut: bool = False,
    ) -> ScriptedOpenAI:
        return self._push(
            _Reply("text", text=text, chunks=chunks, usage=usage, chunk_delay=chunk_delay, cut=cut)
        )

    def reply_tool_calls(
        self,
        calls: list[tuple[str, str, str]],
        *,
        text: str = "",
        fragments: int = 3,
        usage: tuple[int, int] | None = None,
    ) -> ScriptedOpenAI:
        return self._push(
            _Reply("tools", text=text, calls=list(calls), fragments=fragments, usage=usage, chunks=2)
        )

    def reply_error(self, status: int, message: str, headers: dict[str, str] | None = None) -> ScriptedOpenAI:
        return self._push(_Reply("error", status=status, message=message, headers=dict(headers or {})))

    def reply_delay(self, seconds: float) -> ScriptedOpenAI:
        return self._push(_Reply("delay", seconds=seconds))

    def _push(self, reply: _Reply) -> ScriptedOpenAI:
        with self._lock:
            self._queue.append(reply)
        return self

    @property
    def pending(self) -> int:
        """How many scripted replies (delays included) are still queued."""
        with self._lock:
            return len(self._queue)

    # -- lifecycle -------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "use ScriptedOpenAI as a context manager (or call start())"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedOpenAI:
        handler = type("_Handler", (_Handler,), {"script": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="ScriptedOpenAI", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()  # wakes handlers sleeping in reply_delay / chunk_delay
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving (called from handler threads) ---------------------------

    def _next(self) -> tuple[float, _Reply | None]:
        delay = 0.0
        with self._lock:
            while self._queue:
                reply = self._queue.popleft()
                if reply.kind == "delay":
                    delay += reply.seconds
                    continue
                return delay, reply
            self.unscripted += 1
            return delay, None

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server is closing; False if it is."""
        return not self._closing.wait(seconds) if seconds > 0 else not self._closing.is_set()

    def _completion_id(self) -> str:
        with self._lock:
            self._counter += 1
            return f"chatcmpl-scripted-{self._counter}"


class _Handler(BaseHTTPRequestHandler):
    script: ScriptedOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    # -- plumbing --------------------------------------------------------

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error_body(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        error = {
            "message": message,
            "type": _ERROR_TYPES.get(status, "server_error"),
            "param": None,
            "code": None,
        }
        self._send_json(status, {"error": error}, headers)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _sse(self, payload: Any) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self._write_chunk(f"data: {text}\n\n".encode())

    def do_GET(self) -> None:
        self._send_error_body(404, f"ScriptedOpenAI: unknown path GET {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsable": raw.decode(errors="replace")}
        script = self.script
        with script._lock:
            script.requests.append(body)
            script.headers.append({k.lower(): v for k, v in self.headers.items()})

        if self.path.rstrip("/") != CHAT_PATH:
            self._send_error_body(404, f"ScriptedOpenAI: unknown path POST {self.path}")
            return
        if script.reject_stream_options and "stream_options" in body:
            self._send_error_body(400, "Unrecognized request argument supplied: stream_options")
            return

        delay, reply = script._next()
        if not script._sleep(delay):
            return
        try:
            if reply is None:
                self._send_error_body(
                    500,
                    f"ScriptedOpenAI: script exhausted (no reply queued for request #{len(script.requests)})",
                )
            elif reply.kind == "error":
                self._send_error_body(reply.status, reply.message, reply.headers)
            elif body.get("stream"):
                self._stream(body, reply)
            else:
                self._complete(body, reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. a timeout); nothing left to do

    # -- replies ---------------------------------------------------------

    @staticmethod
    def _usage(body: dict[str, Any], reply: _Reply) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = len(json.dumps(body.get("messages", []))) // 4
            completion = max(1, len(reply.text + "".join(c[2] for c in reply.calls)) // 4)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _complete(self, body: dict[str, Any], reply: _Reply) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
        if reply.kind == "tools":
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in reply.calls
            ]
        completion = {
            "id": self.script._completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if reply.kind == "tools" else "stop",
                }
            ],
            "usage": self._usage(body, reply),
        }
        self._send_json(200, completion)

    def _stream(self, body: dict[str, Any], reply: _Reply) -> None:
        script = self.script
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        base = {
            "id": script._completion_id(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", ""),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        self._sse(chunk({"role": "assistant", "content": ""}))
        if reply.text:
            for piece in _split(reply.text, reply.chunks):
                if not script._sleep(reply.chunk_delay):
                    return
                self._sse(chunk({"content": piece}))
        if reply.cut:
            self.close_connection = True
            self.wfile.flush()
            return  # no terminating chunk: the client sees an incomplete body

        if reply.kind == "tools":
            for index, (cid, name, _args) in enumerate(reply.calls):
                first = {
                    "index": index,
                    "id": cid,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                self._sse(chunk({"tool_calls": [first]}))
            pieces = [_split(args, reply.fragments) if args else [] for _cid, _name, args in reply.calls]
            for step in range(max((len(p) for p in pieces), default=0)):
                for index, parts in enumerate(pieces):
                    if step < len(parts):
                        self._sse(
                            chunk({"tool_calls": [{"index": index, "function": {"arguments": parts[step]}}]})
                        )
            self._sse(chunk({}, "tool_calls"))
        else:
            self._sse(chunk({}, "stop"))

        options = body.get("stream_options") or {}
        if options.get("include_usage"):
            self._sse({**base, "choices": [], "usage": self._usage(body, reply)})
        self._sse("[DONE]")
        self._write_chunk(b"")  # zero-length chunk ends the chunked body
