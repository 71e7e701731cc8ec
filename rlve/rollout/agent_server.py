"""An OpenAI-compatible endpoint that serves agents the run's model and records every token.

A run with agent environments (rlve.envs.agent) starts one `AgentGateway` on 127.0.0.1 in its
event loop. Each episode opens a session; its agent gets `AgentEndpoint(base_url, api_key)`,
`<root>/s/<session>/v1` and a key of its own, and calls, unchanged but for those two settings:
- `POST .../v1/chat/completions`: messages, tools (rendered by the model's chat template, tool
  calls returned as `tool_calls`), `n`, `max_tokens` / `max_completion_tokens`, `temperature`;
- `GET .../v1/models`;
- `POST <root>/s/<session>/rl/reward` with `{"reward": x}` (the episode's) or
  `{"reward": x, "call": k}` (earned by the k-th call, 0-based).
Every request needs `Authorization: Bearer <the session's key>` (401), a session the run opened
and has not closed (404), a JSON body of at most `max_body_bytes` (400, 413). The run's sampling
settings win: the temperature always, the token limit where the agent asks for more; the response
says what was used (`rlve`). Sessions are served concurrently: a session's lock covers only its
own bookkeeping, never a generation. `stream=true` gets the finished answer as OpenAI's chunks
(rlve.rollout.agent_stream).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import resource
import secrets
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rlve.envs.agent import AgentEndpoint
from rlve.inference.engine import Engine, EngineFatalError, GenerationRequest, SamplingConfig
from rlve.rollout.agent_messages import BadMessages, assistant_message, template_messages
from rlve.rollout.agent_record import AgentRecord
from rlve.rollout.agent_stream import StreamedCompletion, stream_request
from rlve.rollout.chat_tokens import ChatTemplateError, ChatTokens
from rlve.types import Message

MODEL_NAME = "rlve-policy"
"""the model id `/v1/models` lists (any name an agent sends is served by the run's model)"""
MAX_BODY_BYTES = 8 << 20
MAX_CHOICES = 16
"""most completions one request may ask for (`n`)"""


def raise_open_file_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (each session holds a
    socket at both ends: 512 sessions pass the common soft limit of 1,024); returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        return wanted
    return soft


class RequestError(Exception):
    """A request the endpoint refuses: HTTP `status`, and the one line the agent is told."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class AgentSession:
    """One episode's session: who may call, with what settings, and what was recorded."""

    sid: str
    key: str
    engine: Engine
    sampling: SamplingConfig
    seed: int
    max_seq_len: int | None = None
    max_calls: int = 64
    record: AgentRecord = field(default_factory=AgentRecord)
    messages: list[Message] = field(default_factory=list)
    """the last call's conversation and its first answer (the episode's completion)"""
    episode_rewards: list[float] = field(default_factory=list)
    call_rewards: dict[int, float] = field(default_factory=dict)
    requests: int = 0
    tool_calls: int = 0
    """tool calls returned to the agent (what a tool environment's rubric counts as its own)"""
    in_flight: set[asyncio.Task] = field(default_factory=set)
    """the generations running for it, cancelled when it closes"""
    out_of_room: bool = False
    """a call was refused because its conversation left no room under max_seq_len"""
    fatal: EngineFatalError | None = None
    """the engine can serve no more: the episode re-raises it and the run stops"""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _chats: dict[str, ChatTokens] = field(default_factory=dict)

    def chat(self, tools: list[dict] | None) -> ChatTokens:
        """The chat template with these tools (one per distinct tool list)."""
        key = json.dumps(tools, sort_keys=True)
        if key not in self._chats:
            self._chats[key] = ChatTokens(self.engine.tokenizer, tools)
        return self._chats[key]


class AgentGateway:
    """The endpoint and its open sessions (see the module's docstring)."""

    def __init__(self, max_body_bytes: int = MAX_BODY_BYTES):
        self.max_body_bytes = max_body_bytes
        self.sessions: dict[str, AgentSession] = {}
        self.root = ""
        self.socket: socket.socket | None = None
        self._server: Any = None
        self._task: asyncio.Task | None = None
        self.app = Starlette(routes=[
            Route("/s/{sid}/v1/chat/completions", self._chat_completions, methods=["POST"]),
            Route("/s/{sid}/v1/models", self._models, methods=["GET"]),
            Route("/s/{sid}/rl/reward", self._reward, methods=["POST"]),
        ])  # fmt: skip

    async def start(self) -> None:
        """Serve on a free port of 127.0.0.1 in the running event loop."""
        import uvicorn

        raise_open_file_limit()
        # IPPROTO_TCP named, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that
        # say so, and with it on every answer waited 40 ms for the client's delayed ACK
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.socket = sock
        config = uvicorn.Config(self.app, log_level="warning", backlog=4096,
                                timeout_keep_alive=30, lifespan="off")  # fmt: skip
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
            await asyncio.sleep(0.01)
        self.root = f"http://127.0.0.1:{sock.getsockname()[1]}"

    def open(self, engine: Engine, sampling: SamplingConfig, seed: int,
             max_seq_len: int | None = None, max_calls: int = 64) -> AgentSession:  # fmt: skip
        """A new session on `engine`, with the run's sampling settings."""
        session = AgentSession(secrets.token_urlsafe(12), secrets.token_urlsafe(32), engine,
                               sampling, seed, max_seq_len, max_calls)  # fmt: skip
        self.sessions[session.sid] = session
        return session

    def close(self, session: AgentSession) -> None:
        """Later requests of the session get 404, its generations still running are cancelled
        (their requests answered 404); what it recorded stays with the caller."""
        self.sessions.pop(session.sid, None)
        for task in session.in_flight:
            task.cancel()

    def endpoint(self, session: AgentSession) -> AgentEndpoint:
        return AgentEndpoint(f"{self.root}/s/{session.sid}/v1", session.key, MODEL_NAME)

    # ---- the routes -------------------------------------------------------------------------

    async def _models(self, request: Request) -> JSONResponse:
        return await self._answer(request, lambda session, body: {
            "object": "list", "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "rlve"}],
        }, needs_body=False)  # fmt: skip

    async def _reward(self, request: Request) -> JSONResponse:
        async def post(session: AgentSession, body: dict) -> dict:
            reward, call = body.get("reward"), body.get("call")
            if isinstance(reward, bool) or not isinstance(reward, int | float) \
                    or not math.isfinite(reward):  # fmt: skip
                raise RequestError(400, f"reward must be a finite number, got {reward!r}")
            if call is None:
                session.episode_rewards.append(float(reward))
            elif isinstance(call, int) and not isinstance(call, bool) \
                    and 0 <= call < session.record.calls:  # fmt: skip
                session.call_rewards[call] = session.call_rewards.get(call, 0.0) + float(reward)
            else:
                raise RequestError(400, f"call must be the index of a call made so far "
                                   f"(0..{session.record.calls - 1}), got {call!r}")  # fmt: skip
            return {"ok": True}

        return await self._answer(request, post)

    async def _chat_completions(self, request: Request) -> Response:
        return await self._answer(request, self._complete)

    async def _answer(self, request: Request, handler, needs_body: bool = True) -> Response:
        try:
            session = self._session(request)
            body = await self._body(request) if needs_body else {}
            result = handler(session, body)
            if asyncio.iscoroutine(result):
                result = await result
            if isinstance(result, StreamedCompletion):
                return StreamingResponse(result.events(), media_type="text/event-stream")
            return JSONResponse(result)
        except RequestError as error:
            return _error(error.status, str(error))
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():
                raise  # the server itself is stopping
            return _error(404, "the session closed while this request was running")

    def _session(self, request: Request) -> AgentSession:
        session = self.sessions.get(request.path_params["sid"])
        given = request.headers.get("authorization", "")
        if session is None:
            raise RequestError(404, "no open session at this URL (never opened, or its "
                               "episode has ended)")  # fmt: skip
        if not hmac.compare_digest(given.encode(), f"Bearer {session.key}".encode()):
            raise RequestError(401, "this session needs its key (Authorization: Bearer <key>)")
        return session

    async def _body(self, request: Request) -> dict:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise RequestError(413, f"the body is larger than {self.max_body_bytes} bytes")
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > self.max_body_bytes:
                raise RequestError(413, f"the body is larger than {self.max_body_bytes} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise RequestError(400, f"the body is not JSON ({type(exc).__name__})") from exc
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object")
        return body

    async def _complete(self, session: AgentSession, body: dict) -> dict:
        session.requests += 1
        if session.requests > session.max_calls:
            raise RequestError(429, f"this session made its {session.max_calls} calls")
        try:
            stream, include_usage = stream_request(body)
        except ValueError as exc:
            raise RequestError(400, str(exc)) from exc
        tools = body.get("tools") or None
        if tools is not None and not (isinstance(tools, list)
                                      and all(isinstance(t, dict) for t in tools)):  # fmt: skip
            raise RequestError(400, "tools must be a list of objects")
        n = body.get("n", 1)
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_CHOICES:
            raise RequestError(400, f"n must be an integer in 1..{MAX_CHOICES}, got {n!r}")
        engine = session.engine
        chat = None
        try:
            if engine.tokenizer is not None:
                chat = session.chat(tools)
            messages = template_messages(body.get("messages"), chat is None
                                         or not chat.tools_in_system)  # fmt: skip
            async with session.lock:
                plan = session.record.plan(chat, messages) if chat is not None else None
        except (BadMessages, ChatTemplateError) as exc:
            raise RequestError(400, str(exc)) from exc
        sampling = self._sampling(session, body, len(plan.prompt_ids) if plan else 0)
        first_call = session.record.calls
        tasks = [asyncio.ensure_future(self._choice(session, chat, messages, plan, sampling,
                                                    tools, k)) for k in range(n)]  # fmt: skip
        session.in_flight.update(tasks)
        try:
            choices = await asyncio.gather(*tasks)
        finally:
            session.in_flight.difference_update(tasks)
        prompt_tokens = len(plan.prompt_ids) if plan else 0
        completion = {
            "id": f"chatcmpl-{session.sid}-{first_call}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": MODEL_NAME,
            "choices": [choice for choice, _ in choices],
            "usage": {"prompt_tokens": prompt_tokens,
                      "completion_tokens": sum(tokens for _, tokens in choices),
                      "total_tokens": prompt_tokens + sum(tokens for _, tokens in choices)},
            "rlve": {"temperature": sampling.temperature, "max_tokens": sampling.max_tokens,
                     "top_p": sampling.top_p},
        }  # fmt: skip
        return StreamedCompletion(completion, include_usage) if stream else completion

    def _sampling(self, session: AgentSession, body: dict, prompt_len: int) -> SamplingConfig:
        """The run's sampling settings; the agent's token limit only where it asks for fewer."""
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        limit = session.sampling.max_tokens
        if asked is not None:
            if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
                raise RequestError(400, f"max_tokens must be a positive integer, got {asked!r}")
            limit = min(limit, asked)
        if session.max_seq_len is not None and prompt_len:
            room = session.max_seq_len - prompt_len
            if room < 1:
                session.out_of_room = True
                raise RequestError(
                    400,
                    f"the conversation is {prompt_len} tokens, and the run's "
                    f"max_seq_len is {session.max_seq_len}: no room to answer",
                )
            limit = min(limit, room)
        stop = body.get("stop")
        stop = [stop] if isinstance(stop, str) else stop
        if stop is not None and not (isinstance(stop, list)
                                     and all(isinstance(s, str) for s in stop)):  # fmt: skip
            raise RequestError(400, "stop must be a string or a list of strings")
        return session.sampling.with_overrides(max_tokens=limit, stop=stop)

    async def _choice(self, session, chat, messages, plan, sampling, tools, k) -> tuple[dict, int]:
        """Sample one choice, record it, and return it with its token count."""
        seed = session.seed * 1000 + session.requests * MAX_CHOICES + k
        request = GenerationRequest(messages, sampling.with_overrides(seed=seed),
                                    prompt_ids=list(plan.prompt_ids) if plan else None,
                                    tools=tools)  # fmt: skip
        try:
            generation = await session.engine.generate(request)
        except EngineFatalError as exc:
            session.fatal = exc
            raise RequestError(503, "the model's engine stopped") from exc
        except Exception as exc:  # a request the engine lost: this call fails, visibly
            raise RequestError(503, f"the model did not answer: {type(exc).__name__}") from exc
        call_id = f"call_{session.requests}_{k}"
        reply = assistant_message(generation.text, tools is not None, call_id)
        async with session.lock:
            if plan is not None:
                shown = template_messages([reply], not chat.tools_in_system)
                session.record.record(
                    plan, generation, chat.render(messages + shown, generation_prompt=False)
                )
            if k == 0:
                session.messages = [*messages, reply]
            session.tool_calls += len(reply.get("tool_calls") or [])
        finish = "tool_calls" if reply.get("tool_calls") else generation.finish_reason
        choice = {"index": k, "message": reply, "finish_reason": finish, "logprobs": None}
        return choice, len(generation.token_ids)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request"}},
                        status_code=status)  # fmt: skip
