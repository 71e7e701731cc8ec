"""VerifiersEnv: rlve's episode runner drives a verifiers environment's own hooks.

verifiers' `rollout` talks to an OpenAI client and re-sends the text; rlve keeps the sampled
tokens instead, so the adapter calls the same hooks in the same order as verifiers'
`MultiTurnEnv.rollout`: `init_state` and `setup_state`; then, after each model turn, the turn is
added to `state["trajectory"]`, the stop conditions run (`is_completed`, which also runs the
cleanup handlers), and if none holds, `env_response` answers. A reply that verifiers marks as
final (`state["final_env_response"]`) is shown and ends the episode. The verifiers state lives
in rlve's episode state under `VF_STATE`; the rubric scores it with verifiers' own rubric.

Model tool calls arrive as `<tool_call>` tags in the text (or structured calls); verifiers'
tool environments read OpenAI-style `tool_calls`, so the adapter gives them that view of each
assistant message (`verifiers_messages`), with ids `call_<turn>_<index>`.

verifiers scores a reward function that raises as 0 and only logs it; the adapter also writes the
failure into the rollout's verifiers state (`report_reward_errors`), so that rlve counts it as it
counts its own rubric's: `errors/<function>`, and the episode as a `verifier_error` fault.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import uuid
from typing import Any

from rlve.envs.base import MultiTurnEnv, State, build_dataset
from rlve.envs.rubric import Rubric, Score
from rlve.envs.tools import parse_tool_calls
from rlve.types import Message

log = logging.getLogger(__name__)

VF_STATE = "verifiers_state"
"""the key of the verifiers State inside rlve's episode state"""

UNLIMITED_TURNS_CAP = 64
"""rlve's turn limit for a verifiers environment without one (max_turns <= 0)"""

REWARD_ERRORS = "rlve_reward_errors"
"""the key, in a verifiers state, of {reward function name: message} for the functions that raised
on that rollout"""

SAMPLING_KEYS = {"max_tokens": "max_tokens", "max_completion_tokens": "max_tokens",
                 "temperature": "temperature", "top_p": "top_p", "stop": "stop"}  # fmt: skip


class VerifiersEnv(MultiTurnEnv):
    """A verifiers `Environment` (SingleTurnEnv, MultiTurnEnv, ToolEnv, StatefulToolEnv...)
    played by rlve's engine. Built by `load_verifiers_environment`."""

    def __init__(self, vf_env: Any, *, name: str):
        import verifiers as vf

        if not isinstance(vf_env, vf.MultiTurnEnv):
            raise TypeError(
                f"{name!r}: load_environment returned {type(vf_env).__name__}; rlve runs "
                "verifiers environments built on MultiTurnEnv (SingleTurnEnv, ToolEnv, "
                "StatefulToolEnv and the like)"
            )
        if vf_env.message_type != "chat":
            raise ValueError(f"{name!r} uses message_type={vf_env.message_type!r}; rlve needs chat")
        self.vf_env = vf_env
        rows = _dataset_rows(vf_env)
        self._inputs = {row["example_id"]: row for row in rows}
        max_turns = vf_env.max_turns if vf_env.max_turns > 0 else UNLIMITED_TURNS_CAP
        super().__init__(
            build_dataset(rows),
            max_turns=max_turns,
            name=name,
            rubric=VerifiersRubric(vf_env.rubric),
            sampling=_sampling(vf_env.sampling_args),
            tools=list(vf_env.oai_tools) if vf_env.oai_tools else None,
        )

    async def setup_state(self, state: State) -> None:
        vf_input = self._inputs[state["example_id"]]  # init_state copies it
        vf_state = await self.vf_env.init_state(vf_input, client=None, model="rlve")
        state[VF_STATE] = vf_state
        import verifiers as vf

        try:
            await self.vf_env.setup_state(vf_state)
        except vf.Error as exc:  # as verifiers' own rollout does: recorded, then has_error stops
            vf_state["error"] = exc
        if vf_state["prompt"] != state["prompt"]:  # setup_state wrote the episode's own prompt
            state["prompt"] = [dict(m) for m in vf_state["prompt"]]
        await self._stop_if_completed(state)

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        vf_state = state[VF_STATE]
        view = verifiers_messages(messages)
        await self.vf_env.add_trajectory_step(vf_state, _trajectory_step(view, vf_state))
        if await self._stop_if_completed(state):
            return []
        reply = await self.vf_env.env_response(view, vf_state)
        final = vf_state.get("final_env_response")
        if final is not None:
            await self._stop_if_completed(state)
            return list(final)
        return list(reply or [])

    async def _stop_if_completed(self, state: State) -> bool:
        vf_state = state[VF_STATE]
        if not await self.vf_env.is_completed(vf_state):
            return False
        error = vf_state.get("error")
        if error is not None:  # a verifiers error (tool, sandbox...) spoils the episode
            state["env_error"] = f"{type(error).__name__}: {error}"
        self.end_episode(state, vf_state.get("stop_condition") or "env_done")
        return True

    async def cleanup_state(self, state: State) -> None:
        """Ended by rlve (time limit, context length, a failure) before verifiers' own stop
        conditions held: verifiers' cleanup handlers still run, once."""
        vf_state = state.get(VF_STATE)
        if vf_state is not None and not vf_state.get("is_completed"):
            vf_state["is_completed"] = True
            await self.vf_env._cleanup(vf_state)

    def episode_metrics(self, state: State) -> dict[str, float]:
        vf_state = state.get(VF_STATE) or {}
        return {"verifiers/error": float(vf_state.get("error") is not None)}


class VerifiersRubric(Rubric):
    """Scores a group with the verifiers environment's rubric, on the verifiers states the
    episodes left; each verifiers metric is kept as `reward/<name>`."""

    def __init__(self, vf_rubric: Any):
        super().__init__()
        self.vf_rubric = vf_rubric
        report_reward_errors(vf_rubric)

    @property
    def names(self) -> list[str]:
        return list(self.vf_rubric._get_reward_func_names())

    async def score_group(self, prompts, completions, answers, states, infos) -> list[Score]:
        scored = [i for i, state in enumerate(states) if state.get(VF_STATE) is not None]
        vf_states = [states[i][VF_STATE] for i in scored]
        for i, vf_state in zip(scored, vf_states, strict=True):
            vf_state["completion"] = verifiers_messages(list(completions[i]))
        scores = [Score() for _ in states]
        if not vf_states:
            return scores
        try:
            await self.vf_rubric.score_group(vf_states, score_sem=contextlib.nullcontext())
        except Exception as exc:  # a rubric that fails takes no batch down
            log.warning("the verifiers rubric failed: %s: %s", type(exc).__name__, exc)
            for i in scored:
                scores[i].error = f"verifiers rubric: {type(exc).__name__}: {exc}"
            return scores
        for i, vf_state in zip(scored, vf_states, strict=True):
            metrics = vf_state.get("metrics") or {}
            scores[i].reward = float(vf_state.get("reward") or 0.0)
            scores[i].metrics = {f"reward/{key}": float(value) for key, value in metrics.items()}
            for name, message in (vf_state.pop(REWARD_ERRORS, None) or {}).items():
                scores[i].errors[name] = 1
                scores[i].error = scores[i].error or f"{name}: {message}"
        return scores


def report_reward_errors(vf_rubric: Any) -> None:
    """Makes `vf_rubric` (and the rubrics of a RubricGroup) note under `REWARD_ERRORS` of a
    rollout's state each reward function that raised on it, before verifiers logs the failure and
    scores it 0 as it always does. It hooks the two methods through which verifiers' Rubric calls
    a function on one state or on a group's states; a rubric without them is left as it is."""
    for rubric in getattr(vf_rubric, "rubrics", None) or []:
        report_reward_errors(rubric)
    for method, states_of in _REWARD_CALLS.items():
        call = getattr(vf_rubric, method, None)
        if call is not None and not getattr(call, "reports_errors", False):
            setattr(vf_rubric, method, _hook(call, states_of))


_REWARD_CALLS = {
    "_call_individual_reward_func": lambda state: [state],
    "_call_group_reward_func": lambda states: states,
}
"""verifiers Rubric's methods that call one reward function -> the states of their 2nd argument"""


def _hook(call, states_of):
    """`call(func, states_arg, ...)` with `func` replaced by one that notes its failure in each of
    `states_of(states_arg)`, then raises it on to verifiers."""

    async def hooked(func, states_arg, *args, **kwargs):
        @functools.wraps(func)  # verifiers reads the signature and the name through the wrapper
        async def noting(*f_args, **f_kwargs):
            try:
                result = func(*f_args, **f_kwargs)
                return await result if inspect.isawaitable(result) else result
            except Exception as exc:
                for vf_state in states_of(states_arg):
                    vf_state.setdefault(REWARD_ERRORS, {})[func.__name__] = (
                        f"{type(exc).__name__}: {exc}"
                    )
                raise

        return await call(noting, states_arg, *args, **kwargs)

    hooked.reports_errors = True
    return hooked


def verifiers_messages(messages: list[Message]) -> list[Message]:
    """The conversation as verifiers reads it: each assistant turn with OpenAI-style
    `tool_calls` (parsed from its `<tool_call>` tags when it has no structured ones)."""
    view, turn = [], 0
    for message in messages:
        message = dict(message)
        if message.get("role") == "assistant":
            calls = [c for c in parse_tool_calls(message) if c.error is None]
            if calls and not message.get("tool_calls"):
                message["tool_calls"] = [
                    {"id": f"call_{turn}_{i}", "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for i, c in enumerate(calls)
                ]  # fmt: skip
            turn += 1
        view.append(message)
    return view


def _trajectory_step(view: list[Message], vf_state: Any) -> dict[str, Any]:
    """One model turn as a verifiers TrajectoryStep (what its stop conditions and rubrics read);
    the tokens stay with rlve's trajectory."""
    return {
        "prompt": view[:-1], "completion": view[-1:], "response": None, "tokens": None,
        "reward": None, "advantage": None, "is_truncated": False,
        "trajectory_id": vf_state.get("trajectory_id", uuid.uuid4().hex), "extras": {},
    }  # fmt: skip


def _dataset_rows(vf_env: Any) -> list[dict[str, Any]]:
    """The verifiers dataset (its eval split when it has no train split) as rlve rows; `info`
    given as JSON text is decoded."""
    dataset = vf_env.dataset if vf_env.dataset is not None else vf_env.eval_dataset
    rows = []
    for row in dataset:
        info = row.get("info") or {}
        if isinstance(info, str):
            info = json.loads(info) if info.strip() else {}
        rows.append({
            "prompt": [dict(m) for m in row["prompt"]], "answer": str(row.get("answer") or ""),
            "info": dict(info), "task": row.get("task") or vf_env.env_id or "default",
            "example_id": int(row["example_id"]),
        })  # fmt: skip
    return rows


def _sampling(sampling_args: dict[str, Any] | None) -> dict[str, Any]:
    """The verifiers environment's sampling arguments that rlve's SamplingConfig knows."""
    sampling = {}
    for key, value in (sampling_args or {}).items():
        if key in SAMPLING_KEYS and value is not None:
            sampling[SAMPLING_KEYS[key]] = tuple(value) if key == "stop" else value
    return sampling
