"""A real chat-completions server on 127.0.0.1 whose answers a test scripts (no model behind it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(content: str | None, finish_reason: str = "stop", tool_calls=None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choice = {"index": 0, "message": message, "finish_reason": finish_reason}
    return {"id": "c1", "object": "chat.completion", "choices": [choice]}


class ChatServer:
    """/v1/chat/completions on an ephemeral port; `answer(body)` makes each reply's payload.

    `failures` lists statuses to answer, one per request, before answering normally again.
    """

    def __init__(self):
        self.requests: list[tuple[dict[str, str], dict]] = []
        self.answer: Callable[[dict], dict] = lambda body: completion("hello")
        self.failures: list[int] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append((dict(self.headers), body))
                    status = server.failures.pop(0) if server.failures else 200
                if self.path != "/v1/chat/completions":
                    status = 404
                payload = server.answer(body) if status == 200 else {"error": "scripted failure"}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep the test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()
