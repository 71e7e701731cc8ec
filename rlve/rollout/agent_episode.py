"""An agent environment's episode: a session on the run's endpoint, the agent, its record.

`play_agent` opens a session on the event loop's `AgentGateway` (started on first use), runs the
environment's agent against it within `agent_timeout_s`, closes the session (a later request gets
404) and moves what it recorded into the episode, also when the agent failed or the episode was
cut off: the first segment is the trajectory's token sequence and turns, the others its side
sequences; rewards posted per call land on that call's turn (`Environment.reward_turn`) when it
is in the first segment, and in `posted_reward` in every case. An agent that raised ends the
episode as `env_error` (or, after calling the model, as `agent_error`, scored and trained, when
the environment's `agent_errors` is "score"), one past its deadline as `timeout`, one that never
called the model as `env_error` (nothing to train): each a counted fault, the batch goes on. An
agent that failed because its conversation outgrew `max_seq_len` (the endpoint answered 400) ends
as `context_length`, as an episode does, and is trained on what it recorded.
"""

from __future__ import annotations

import asyncio
import weakref

from rlve.envs.agent import AgentEnv
from rlve.inference.engine import Engine, EngineFatalError, SamplingConfig
from rlve.rollout.agent_server import AgentGateway, AgentSession
from rlve.rollout.turns import EpisodeRecord, EpisodeSettings

_gateways: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""event loop -> the task that starts its gateway"""


async def running_gateway() -> AgentGateway:
    """The running event loop's gateway, started by the first episode that asks."""
    loop = asyncio.get_running_loop()
    if loop not in _gateways:
        gateway = AgentGateway()
        _gateways[loop] = loop.create_task(_started(gateway))
    return await asyncio.shield(_gateways[loop])


async def _started(gateway: AgentGateway) -> AgentGateway:
    await gateway.start()
    return gateway


async def play_agent(
    env: AgentEnv, engine: Engine, record: EpisodeRecord, sampling: SamplingConfig,
    settings: EpisodeSettings, seed: int,
) -> str:  # fmt: skip
    """Run one agent episode into `record`; returns its stop reason."""
    gateway = await running_gateway()
    session = gateway.open(engine, sampling, seed, settings.max_seq_len, env.max_calls)
    state = record.state
    task = env.task(record.messages, record.example.example_id)
    try:
        result = await asyncio.wait_for(env.run_agent(gateway.endpoint(session), task),
                                        env.agent_timeout_s)  # fmt: skip
        state["agent_result"] = result
        reason = "agent_done"
    except TimeoutError:
        state["timeout"] = f"the agent did not finish within agent_timeout_s={env.agent_timeout_s}"
        reason = "timeout"
    except EngineFatalError:
        raise
    except Exception as exc:  # the user's agent: its failure ends this episode only
        if session.out_of_room and session.record.calls:  # an episode that ran out of room
            reason = "context_length"
        else:
            scored = env.agent_errors == "score" and session.record.calls
            reason = "agent_error" if scored else "env_error"
            state[reason] = f"the agent raised {type(exc).__name__}: {exc}"
    finally:
        gateway.close(session)
        keep_session(env, record, session)
    if session.fatal is not None:
        raise session.fatal
    if reason == "agent_done" and session.record.calls == 0:
        state["env_error"] = "the agent never called the model: nothing to train on"
        reason = "env_error"
    return reason


def keep_session(env: AgentEnv, record: EpisodeRecord, session: AgentSession) -> None:
    """Move the session's record into the episode's (see the module's docstring)."""
    state, recorded = record.state, session.record
    if session.messages:
        first_answer = next(i for i, m in enumerate(session.messages) if m["role"] == "assistant")
        record.prompt = session.messages[:first_answer]
        record.messages = list(session.messages)
    if recorded.segments:
        main = recorded.segments[0]
        record.token_ids, record.loss_mask = main.token_ids, main.loss_mask
        record.logprobs, record.turn_spans = main.logprobs, main.turn_spans
        record.side_sequences.extend(s.as_side_sequence() for s in recorded.segments[1:])
        record.turn_versions = main.versions
        state["turn"] = len(main.turn_spans)
        turn_of = {call: turn for turn, call in enumerate(main.calls)}
        for call, reward in session.call_rewards.items():
            if call in turn_of:
                env.reward_turn(state, reward, turn_of[call])
    record.truncated_turns = recorded.truncated
    state["posted_reward"] = sum(session.episode_rewards) + sum(session.call_rewards.values())
    state["tool_calls"] = session.tool_calls  # what tool environments' rubrics count
    state["agent/calls"] = recorded.calls
    state["agent/splits_per_episode"] = recorded.splits
    state["agent/drift_tokens"] = recorded.drift_tokens
    state["agent/branches"] = recorded.branches
