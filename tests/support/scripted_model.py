"""A scripted chat model: an OpenAI-compatible completions endpoint on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: ``(request body, round) -> assistant message``; round 0 is the first completion of a turn.
Step = Callable[[dict[str, Any], int], dict[str, Any]]


class ScriptedModel:
    """An OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1 that answers from a script.

    ``script[n]`` answers the completions of user turn ``n`` (1-based: the user messages in the
    request), and may read the request, as a model reads its context. Every request is kept,
    with its headers (names in lower case), for the test to assert on. A step that raises
    answers 500 with the error, so the loop fails, and the error is kept in ``errors``.
    """

    def __init__(self, script: dict[int, Step]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, name="scripted-model", daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with model._lock:
                    model.requests.append(body)
                    model.headers.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    message = model.answer(body)
                except Exception as exc:
                    model.errors.append(exc)
                    self._send(500, {"error": {"message": f"script failed: {exc!r}"}})
                    return
                reason = "tool_calls" if message.get("tool_calls") else "stop"
                self._send(
                    200,
                    {
                        "id": "chatcmpl-scripted",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep the test output to failures

        return Handler

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The scripted message for this request: its turn and its round within the turn."""
        messages = body["messages"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        rounds = sum(1 for m in messages[users[-1] :] if m["role"] == "assistant")
        return self.script[len(users)](body, rounds)

    def turn_requests(self, turn: int) -> list[dict[str, Any]]:
        """The requests of user turn ``turn`` (1-based)."""
        return [r for r in self.requests if sum(m["role"] == "user" for m in r["messages"]) == turn]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """An assistant message calling one tool."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def say(text: str) -> dict[str, Any]:
    """An assistant message that answers."""
    return {"role": "assistant", "content": text}
