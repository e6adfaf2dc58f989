"""A scripted OpenAI-compatible chat server on loopback, for the LLM planner's tests.

Each request to ``POST /v1/chat/completions`` takes the next :class:`Reply` of the script (the
last one repeats when the script runs out): an answer with token counts, an HTTP error status,
or an answer that arrives only after a delay (longer than the client's timeout, it is a slow
server). Every request body is kept in ``requests`` so tests can read what the planner asked.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 20


class FakeOpenAI:
    """``with FakeOpenAI([Reply(...), ...]) as server: ... server.base_url ...``"""

    def __init__(self, script: list[Reply]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._served = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = outer._next(body, self.path)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    payload = json.dumps({"error": {"message": "scripted failure", "type": "server_error"}})
                else:
                    payload = json.dumps(
                        {
                            "id": f"chatcmpl-{outer._served}",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body.get("model", "fake"),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": reply.content},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {
                                "prompt_tokens": reply.prompt_tokens,
                                "completion_tokens": reply.completion_tokens,
                                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                            },
                        }
                    )
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload.encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a slow answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _next(self, body: dict[str, Any], path: str) -> Reply:
        with self._lock:
            self.requests.append({"path": path, **body})
            index = min(self._served, len(self.script) - 1)
            self._served += 1
            return self.script[index]

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
