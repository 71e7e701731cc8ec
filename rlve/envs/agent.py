"""Agent environments: the episode is a user's agent program, trained unchanged.

The agent talks to the run's model through an OpenAI-compatible endpoint the run serves
(rlve.rollout.agent_server); every call is recorded token for token and trained on. It is either
- a Python async callable `agent(client, task) -> result`: `client` an `openai.AsyncOpenAI` on
  the episode's session, `task` an `AgentTask`; or
- a command line, run once per episode in a clean environment (nothing of the run's own, no
  secret: only PATH, LANG and the session's `OPENAI_BASE_URL`, `OPENAI_API_KEY`,
  `OPENAI_MODEL`), the task as JSON on its stdin; its result is its standard output.
The rubric scores the episode with the model's last conversation as the completion and the
agent's result in `state["agent_result"]`; rewards the agent posts to its session are added
(`posted_reward`). `load_environment("agent", agent=..., tasks="calculator")` takes the tasks,
and the rubric, of another environment.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rlve.envs.base import Environment, State
from rlve.envs.rubric import Rubric
from rlve.types import Message

MAX_OUTPUT_BYTES = 1 << 20
"""most bytes of a command agent's standard output read as its result (the rest is dropped)"""


@dataclass(frozen=True)
class AgentEndpoint:
    """Where an episode's agent calls the model: an OpenAI base URL and its session's key."""

    base_url: str
    api_key: str
    model: str


@dataclass(frozen=True)
class AgentTask:
    """What an agent is given: the example's prompt and its last user text (never its answer)."""

    question: str
    prompt: list[Message]
    example_id: int


Agent = Callable[[Any, AgentTask], Awaitable[Any]]

AGENT_ERRORS = ("fault", "score")
"""what an agent that raised after calling the model makes of its episode: a counted fault, not
trained on (for errors of the agent's own), or an episode the rubric scores and the run trains
(`stop/agent_error`), for agents that raise on the model's mistakes (the OpenAI Agents SDK
raises ModelBehaviorError on a call to a tool it does not have: as a fault, that mistake would
never cost the model anything)"""


def posted_reward(state: State) -> float:
    """The sum of the rewards the agent posted to its session (0 when none)."""
    return float(state.get("posted_reward", 0.0))


class AgentEnv(Environment):
    """An environment whose episode runs `agent` (or `command`) against the run's model."""

    train_side_calls = True
    """a session whose agent rewrote its history is split into samples: the first is the
    trajectory, the others its side sequences, trained with its advantage"""

    def __init__(
        self,
        dataset,
        *,
        agent: Agent | None = None,
        command: Sequence[str] | None = None,
        agent_timeout_s: float = 300.0,
        max_calls: int = 64,
        agent_errors: str = "fault",
        rubric: Rubric | None = None,
        **kwargs,
    ):
        if (agent is None) == (command is None):
            raise ValueError("AgentEnv needs exactly one of agent (a callable) or command")
        if command is not None and (isinstance(command, str) or not command):
            raise ValueError(f"command must be a non-empty list of arguments, got {command!r}")
        if not agent_timeout_s > 0:
            raise ValueError(f"agent_timeout_s must be > 0, got {agent_timeout_s!r}")
        if max_calls < 1:
            raise ValueError(f"max_calls must be >= 1, got {max_calls!r}")
        if agent_errors not in AGENT_ERRORS:
            raise ValueError(f"agent_errors must be one of {AGENT_ERRORS}, got {agent_errors!r}")
        rubric = rubric or Rubric()
        rubric.add(posted_reward)
        super().__init__(dataset, rubric=rubric, max_turns=max_calls, **kwargs)
        self.agent = agent
        self.command = list(command) if command is not None else None
        self.agent_timeout_s = float(agent_timeout_s)
        self.max_calls = max_calls
        self.agent_errors = agent_errors

    def task(self, prompt: list[Message], example_id: int) -> AgentTask:
        users = [m for m in prompt if m.get("role") == "user"]
        question = str(users[-1].get("content") or "") if users else ""
        return AgentTask(question, [dict(m) for m in prompt], example_id)

    async def run_agent(self, endpoint: AgentEndpoint, task: AgentTask) -> Any:
        """Run the agent once against `endpoint` and return its result."""
        if self.command is not None:
            return await run_command(self.command, endpoint, task)
        import openai

        client = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key,
                                    max_retries=0, timeout=self.agent_timeout_s,
                                    http_client=shared_http_client())  # fmt: skip
        return await self.agent(client, task)

    def episode_metrics(self, state: State) -> dict[str, float]:
        return {name: float(state.get(name, 0.0)) for name in AGENT_METRICS}


AGENT_METRICS = ("agent/calls", "agent/splits_per_episode", "agent/drift_tokens",
                 "agent/branches")  # fmt: skip
"""per episode: the model calls its agent made, the new samples its history rewrites started,
the tokens past the common prefix at those rewrites, the samples parallel calls started"""


async def run_command(command: list[str], endpoint: AgentEndpoint, task: AgentTask) -> str:
    """Run a command agent (see the module's docstring); its standard output, stripped. A
    non-zero exit raises RuntimeError with the end of its standard error; cancelling (the
    episode's deadline) kills its whole process group."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8",
           "OPENAI_BASE_URL": endpoint.base_url, "OPENAI_API_KEY": endpoint.api_key,
           "OPENAI_MODEL": endpoint.model}  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = await process.communicate(json.dumps(asdict(task)).encode())
    except BaseException:
        _kill_group(process.pid)
        await process.wait()
        raise
    finally:
        _kill_group(process.pid)  # what the agent left running
    if process.returncode != 0:
        tail = stderr[-400:].decode(errors="replace").strip()
        raise RuntimeError(f"the agent command exited with {process.returncode}: {tail}")
    return stdout[:MAX_OUTPUT_BYTES].decode(errors="replace").strip()


_http_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""event loop -> the HTTP client its agents' openai clients share"""


def shared_http_client() -> Any:
    """One HTTP client for every agent of the running event loop: a client of its own per
    episode would load the system's certificates each time (30 ms on two cores) for a plain-HTTP
    endpoint; no cap on its connections, so sessions never wait for each other's."""
    loop = asyncio.get_running_loop()
    if loop not in _http_clients:
        import openai

        try:
            import httpx2 as httpx  # what openai's own client is built on, from openai 3
        except ImportError:
            import httpx
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=1024)
        _http_clients[loop] = openai.DefaultAsyncHttpxClient(limits=limits)
    return _http_clients[loop]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def load_environment(
    agent: str | Agent | None = None, command: Sequence[str] | None = None,
    tasks: str = "calculator", agent_timeout_s: float = 300.0, max_calls: int = 64,
    agent_errors: str = "fault", **task_args,
) -> AgentEnv:  # fmt: skip
    """An agent environment on the examples and rubric of environment `tasks` (built with
    `task_args`); `agent` a callable or its `package.module:function` name; `agent_errors`: see
    AGENT_ERRORS."""
    from rlve.envs.registry import load_environment as load_named

    if isinstance(agent, str):
        agent = _imported(agent)
    source = load_named(tasks, **task_args)
    return AgentEnv(source.dataset, agent=agent, command=command, rubric=source.rubric,
                    agent_timeout_s=agent_timeout_s, max_calls=max_calls,
                    agent_errors=agent_errors, parser=source.parser,
                    sampling=source.sampling)  # fmt: skip


def _imported(spec: str) -> Agent:
    """`package.module:function` -> the function; ValueError says what is wrong."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"agent must look like 'package.module:function', got {spec!r}")
    try:
        found = getattr(importlib.import_module(module_name), attribute, None)
    except ImportError as exc:
        raise ValueError(f"agent {spec!r}: cannot import {module_name!r} ({exc})") from exc
    if not callable(found):
        raise ValueError(f"agent {spec!r}: {module_name} has no function {attribute!r}")
    return found
