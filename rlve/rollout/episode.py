"""One episode: an environment and an engine take turns until a stop condition holds.

The loop, per turn: check the stop conditions; sample the model's turn (from token ids when the
engine has a tokenizer); let the environment answer. The environment's reply is tokenized only
when another model turn follows, so the trajectory ends on the last sampled token. Whatever the
model writes, the episode ends normally; an error inside the environment ends it with stop
reason `env_error` (so does a reply the tokenizer refuses, or any other exception inside the
episode: it is that episode's fault, never the batch's), a failed or timed-out engine request
with `engine_error`, the episode's time
limit (setup included) with `timeout`: each leaves its message in the state under that name, and
is counted as a fault (rlve.rollout.faults). A chat template that cannot tokenize a reply on its
own ends it with `chat_template` (counted under errors). An `EngineFatalError` stops the batch.
The environment may open other seats of the game played by the same policy (self-play,
rlve.rollout.seat); they become the trajectory's `seats`.
"""

from __future__ import annotations

import asyncio
import copy
import logging

from rlve.envs.agent import AgentEnv
from rlve.envs.base import Environment, State
from rlve.inference.engine import (
    Engine,
    EngineFatalError,
    Generation,
    GenerationRequest,
    SamplingConfig,
)
from rlve.reliability.clean_text import terminal_safe
from rlve.rollout.agent_episode import play_agent
from rlve.rollout.chat_tokens import ChatTemplateError, ChatTokens
from rlve.rollout.seat import Seat, seat_opener
from rlve.rollout.turns import (
    EngineFailure,
    EnvironmentFailure,
    EpisodeRecord,
    EpisodeSettings,
    add_reply,
    sample_turn,
)
from rlve.types import Example, Message, SideSequence, TeacherView, Trajectory

__all__ = ["EngineFailure", "EnvironmentFailure", "EpisodeSettings", "play_episode"]

log = logging.getLogger(__name__)


async def play_episode(
    env: Environment,
    engine: Engine,
    example: Example,
    sampling: SamplingConfig,
    settings: EpisodeSettings,
    seed: int,
) -> tuple[Trajectory, State]:
    """Play one episode; returns the (not yet scored) trajectory and the final state."""
    state = env.initial_state(example)
    state["seed"] = seed
    record = EpisodeRecord(example, state, copy.deepcopy(example.prompt))
    if settings.privileged_view:
        record.teacher = TeacherView()
    keep = record.side_sequences if getattr(env, "train_side_calls", False) else None
    state["generate"] = side_call(engine, sampling, keep)
    seats: list[Seat] = []
    state["seats"] = seats
    state["open_seat"] = seat_opener(engine, sampling, settings, example, seed, seats)
    try:
        played = _setup_and_turns(env, engine, record, sampling, settings, seed)
        if settings.time_limit_s is None:
            reason = await played
        else:
            reason = await asyncio.wait_for(played, settings.time_limit_s)
    except TimeoutError:
        state["timeout"] = f"no end within the episode time limit ({settings.time_limit_s} s)"
        reason = "timeout"
    except EnvironmentFailure as failure:
        log.warning(
            "environment %s failed in an episode: %s", env.name, terminal_safe(str(failure))
        )
        state["env_error"] = str(failure)
        reason = "env_error"
    except EngineFailure as failure:
        log.warning("an engine request of an episode of %s failed: %s", env.name,
                    terminal_safe(str(failure)))  # fmt: skip
        state["engine_error"] = str(failure)
        reason = "engine_error"
    except ChatTemplateError as failure:
        log.warning("episode of %s ended: %s", env.name, terminal_safe(str(failure)))
        state["chat_template_error"] = str(failure)
        reason = "chat_template"
    except EngineFatalError:
        raise
    except Exception as exc:  # a stop condition, a seat, anything else: this episode's fault
        log.warning("an episode of %s failed: %s: %s", env.name, type(exc).__name__,
                    terminal_safe(str(exc)))  # fmt: skip
        state["env_error"] = f"{type(exc).__name__}: {exc}"
        reason = "env_error"
    finally:
        try:
            await env.cleanup_state(state)
        except Exception as exc:
            log.warning("cleanup of %s raised %s: %s", env.name, type(exc).__name__,
                        terminal_safe(str(exc)))  # fmt: skip
    state["stop_reason"] = reason
    trajectory = _trajectory(env, record, reason, seed)
    trajectory.seats = [_trajectory(env, seat.record, reason, seed) for seat in seats]
    return trajectory, state


def side_call(engine: Engine, sampling: SamplingConfig, keep: list[SideSequence] | None):
    """`await generate(messages, **overrides) -> Generation`: the episode's policy answers a
    separate conversation (the REPL's `llm()`), outside the trajectory; `overrides` change the
    episode's sampling settings (max_tokens, seed...). With `keep`, each token-exact call is
    appended to it as a SideSequence (to be trained on)."""
    chat = ChatTokens(engine.tokenizer, None) if engine.tokenizer is not None else None

    async def generate(messages: list[Message], **overrides) -> Generation:
        ids = chat.prompt_ids(messages) if chat is not None else None
        request = GenerationRequest(messages, sampling.with_overrides(**overrides), prompt_ids=ids)
        generation = await engine.generate(request)
        if keep is not None and ids is not None and generation.token_ids:
            answer = list(generation.token_ids)
            logprobs = list(generation.logprobs) or [0.0] * len(answer)
            keep.append(SideSequence(ids + answer, [0] * len(ids) + [1] * len(answer),
                                     [0.0] * len(ids) + logprobs))  # fmt: skip
        return generation

    return generate


async def _setup_and_turns(
    env, engine, record: EpisodeRecord, sampling: SamplingConfig, settings: EpisodeSettings,
    seed: int,
) -> str:  # fmt: skip
    try:
        await env.setup_state(record.state)
    except (EngineFatalError, EngineFailure, ChatTemplateError):  # a side call's, a seat's
        raise
    except Exception as exc:  # a resource that cannot be made fails this episode only
        raise EnvironmentFailure(f"setup_state: {type(exc).__name__}: {exc}") from exc
    _adopt_prompt(record)
    if isinstance(env, AgentEnv):
        return await play_agent(env, engine, record, sampling, settings, seed)
    return await _turns(env, engine, record, sampling, settings, seed)


def _adopt_prompt(record: EpisodeRecord) -> None:
    """An environment whose prompt exists only once the episode's resource is up (an OpenEnv
    server's reset observation) sets `state["prompt"]` to new messages in `setup_state`; the
    episode starts from them and they are its trajectory's prompt. Done before anything is
    tokenized, so the tokens match the messages."""
    prompt = record.state["prompt"]
    if prompt is record.example.prompt:
        return
    if not (isinstance(prompt, list) and prompt
            and all(isinstance(m, dict) and "role" in m for m in prompt)):  # fmt: skip
        raise EnvironmentFailure(
            f"setup_state set state['prompt'] to {type(prompt).__name__}, not a non-empty list "
            "of messages"
        )
    record.prompt = copy.deepcopy(prompt)
    record.messages = copy.deepcopy(prompt)


async def _turns(
    env, engine, record: EpisodeRecord, sampling: SamplingConfig, settings: EpisodeSettings,
    seed: int,
) -> str:  # fmt: skip
    state = record.state
    chat = ChatTokens(engine.tokenizer, env.tool_schemas) if engine.tokenizer is not None else None
    view = env.privileged_view if settings.privileged_view else None
    while True:
        reason = await env.check_stop(state)
        if reason is not None:
            return reason
        turn_seed = seed * 1000 + state["turn"]
        generation = await sample_turn(
            engine, chat, record, sampling, settings, turn_seed, env.tool_schemas, view
        )
        if generation is None:
            return "context_length"
        state["turn"] += 1
        try:
            reply = await env.env_response(record.messages, state)
        except (EngineFatalError, EngineFailure, ChatTemplateError):  # a side call's, a seat's
            raise
        except Exception as exc:  # the model's text must never crash a batch; env bugs end it
            raise EnvironmentFailure(f"{type(exc).__name__}: {exc}") from exc
        add_reply(record, reply)


def _trajectory(env: Environment, record: EpisodeRecord, reason: str, seed: int) -> Trajectory:
    example = record.example
    prompt = record.prompt if record.prompt is not None else example.prompt
    prompt_len = len(prompt)
    return Trajectory(
        prompt=prompt,
        completion=record.messages[prompt_len:],
        answer=example.answer,
        info=example.info,
        token_ids=record.token_ids,
        loss_mask=record.loss_mask,
        sampler_logprobs=record.logprobs,
        turn_spans=record.turn_spans,
        stop_reason=reason,
        env_name=env.name,
        example_id=example.example_id,
        difficulty=example.info.get("difficulty"),
        seed=seed,
        weight_version=min(record.turn_versions, default=0),
        turn_versions=record.turn_versions,
        num_turns=record.state["turn"],
        turn_rewards=_turn_rewards(record.state),
        truncated_turns=record.truncated_turns,
        side_sequences=record.side_sequences,
        teacher_view=record.teacher,
    )


def _turn_rewards(state: State) -> list[float]:
    """What each model turn earned (`Environment.reward_turn`), 0 for the others; [] when the
    environment credited no turn."""
    earned = state.get("turn_rewards")
    if not earned:
        return []
    return [float(earned.get(turn, 0.0)) for turn in range(state["turn"])]
