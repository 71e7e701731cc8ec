"""OpenEnvEnv: episodes played on an OpenEnv server (reset, then one step per model turn).

An example is a reset seed: the dataset is `num_examples` rows, row i resetting with seed i, so
the episodes of a rollout group play the same game (if the server honours the seed). The prompt
is the system prompt, then the reset observation as the first user message: `setup_state`
opens a session, resets, and sets `state["prompt"]` to it, which the episode runner takes as the
episode's prompt (before it tokenizes anything, so the tokens match the messages). Each model
turn's text, through the parser (default: stripped), becomes the action's text field and is
stepped; the observation is the next user message; `done` ends the episode.

Reward: the episode's return, the sum of the step rewards (Gymnasium's convention, which
OpenEnv's "reward of the last action" follows; a game rewarded only at its end gives the same
under both), or with `reward_mode="last"` the last step's reward, for servers whose every step
reports a running score. A missing reward counts 0.

Faults: a server that cannot be reached, fails, dies or does not answer within `timeout_s`
ends the episode with stop reason `openenv_server_failed` and the reason in
`state["env_error"]` (an `env_error` fault); the other episodes go on. An episode whose server
failed at reset shows that as its only user message. An action the server refuses as invalid
(`VALIDATION_ERROR`) is told to the model and the episode goes on.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Literal

from rlve.envs.base import MultiTurnEnv, State, require_int
from rlve.envs.openenv.client import (
    OpenEnvFailure,
    OpenEnvSession,
    StepResult,
    check_base_url,
    fetch_schema,
    open_session,
)
from rlve.envs.openenv.schema import action_text_field, observation_text, observation_text_field
from rlve.envs.rubric import Rubric
from rlve.types import Message

log = logging.getLogger(__name__)

RewardMode = Literal["sum", "last"]
REJECTED_ACTION = "VALIDATION_ERROR"
"""the error code of a step whose action the server's action model refused"""


def episode_reward(state: State) -> float:
    """The episode's reward as the server gave it (see the module docstring); 0 without steps."""
    return float(state.get("openenv_reward", 0.0))


class OpenEnvEnv(MultiTurnEnv):
    """An OpenEnv server as an rlve environment; see the module docstring.

    Args (besides MultiTurnEnv's):
        url: the server's base address, http://host:port.
        num_examples: dataset rows; row i resets with seed i.
        action_field: the action field that gets the model's text (default: the only required
            string field of the server's action schema).
        observation_field: the observation field shown to the model (default: its only string
            field, else the whole observation as JSON).
        reward_mode: 'sum' (the return) or 'last' (the last step's reward).
        timeout_s: the longest wait for connecting and for each reset or step.
        max_observation_chars: a longer observation text is cut (and says so).
    """

    def __init__(self, url: str, *, num_examples: int = 1000, max_turns: int = 10,
                 system_prompt: str | None = None, action_field: str | None = None,
                 observation_field: str | None = None, reward_mode: RewardMode = "sum",
                 timeout_s: float = 30.0, max_observation_chars: int = 8000,
                 **kwargs: Any):  # fmt: skip
        self.url = check_base_url(url)
        require_int("num_examples", num_examples, 1)
        require_int("max_observation_chars", max_observation_chars, 1)
        if reward_mode not in ("sum", "last"):
            raise ValueError(f"reward_mode must be 'sum' or 'last', got {reward_mode!r}")
        if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout_s must be a number > 0, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self.reward_mode = reward_mode
        self.max_observation_chars = max_observation_chars
        try:
            schema = fetch_schema(self.url, self.timeout_s)
        except OpenEnvFailure as failure:
            raise ValueError(f"cannot read the OpenEnv server's schemas: {failure}") from None
        self.action_field = action_text_field(schema["action"], action_field)
        """the action field that receives the model's text"""
        self.observation_field = observation_text_field(schema["observation"], observation_field)
        """the observation field shown to the model; None: the observation as JSON"""
        rows = [{"prompt": [], "info": {"seed": i}} for i in range(num_examples)]
        rubric = kwargs.pop("rubric", None) or Rubric([episode_reward], parser=kwargs.get("parser"))
        kwargs.setdefault("name", "openenv")
        super().__init__(rows, max_turns=max_turns, system_prompt=system_prompt, rubric=rubric,
                         **kwargs)  # fmt: skip

    # ---- the episode ----------------------------------------------------------------------

    async def setup_state(self, state: State) -> None:
        state.update(openenv_session=None, openenv_reward=0.0, openenv_steps=0,
                     openenv_rejected=0, openenv_seconds=0.0)  # fmt: skip
        start = time.perf_counter()
        try:
            session, first = await open_session(self.url, self.timeout_s, seed=self._seed(state))
        except OpenEnvFailure as failure:
            self._fail(state, failure)
            text = f"(no observation: {failure})"
        else:
            state["openenv_session"] = session
            text = self._text(first)
            if first.done:
                self.end_episode(state)
        state["openenv_seconds"] += time.perf_counter() - start
        state["prompt"] = [*state["prompt"], {"role": "user", "content": text}]

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        session: OpenEnvSession | None = state["openenv_session"]
        if session is None:  # setup failed; the stop condition ended the episode before
            return []
        text = self.parser.parse(str(messages[-1].get("content") or "")) or ""
        start = time.perf_counter()
        try:
            result = await session.step({self.action_field: text})
        except OpenEnvFailure as failure:
            if failure.code != REJECTED_ACTION:
                self._fail(state, failure)
                return [{"role": "user", "content": f"(no observation: {failure})"}]
            state["openenv_rejected"] += 1
            return [{"role": "user", "content": f"The environment refused that action: {failure}"}]
        finally:
            state["openenv_seconds"] += time.perf_counter() - start
        state["openenv_steps"] += 1
        reward = result.reward or 0.0
        if self.reward_mode == "sum":
            state["openenv_reward"] += reward
        else:
            state["openenv_reward"] = reward
        if result.done:
            self.end_episode(state)
        return [{"role": "user", "content": self._text(result)}]

    async def cleanup_state(self, state: State) -> None:
        session = state.pop("openenv_session", None)
        if session is not None:
            await session.close()

    def episode_metrics(self, state: State) -> dict[str, float]:
        return {
            "openenv/steps": float(state.get("openenv_steps", 0)),
            "openenv/rejected_actions": float(state.get("openenv_rejected", 0)),
            "openenv/seconds": float(state.get("openenv_seconds", 0.0)),
            "openenv/failed": float("openenv_failure" in state),
        }

    # ---- helpers ------------------------------------------------------------------------

    def _seed(self, state: State) -> int:
        seed = state["info"].get("seed", state["example_id"])
        return int(seed)

    def _text(self, result: StepResult) -> str:
        return observation_text(result.observation, self.observation_field,
                                self.max_observation_chars)  # fmt: skip

    def _fail(self, state: State, failure: OpenEnvFailure) -> None:
        log.warning("episode of %s ended: %s", self.name, failure)
        state["openenv_failure"] = state["env_error"] = str(failure)
        self.end_episode(state, "openenv_server_failed")
