"""The agent endpoint under load: 512 sessions at once, each an openai-SDK client of its own
making several calls, on the scripted engine (the endpoint's own work, no model's): none dropped,
none left open after its episode, and the process's memory flat from one round to the next."""

import asyncio
import gc

import psutil
from test_agent_endpoint import RecordingEngine, converse

from rlve.envs.agent import load_environment
from rlve.inference.engine import SamplingConfig
from rlve.rollout.agent_episode import running_gateway
from rlve.rollout.episode import EpisodeSettings, play_episode

SESSIONS = 512
CALLS = 3
MEMORY_SLACK = 64 << 20
"""the most the process may grow from the second round's end to the third's (each round's
trajectories are dropped before it is measured, so what stays is what leaked: 128 KiB a session)"""


async def chatty(client, task):
    return await converse(client, task, calls=CALLS)


async def one_round(env, engine) -> tuple[list[str], list[int], int]:
    episodes = [play_episode(env, engine, env.example(i), SamplingConfig(max_tokens=16),
                             EpisodeSettings(), seed=i) for i in range(SESSIONS)]  # fmt: skip
    played = await asyncio.gather(*episodes)
    gateway = await running_gateway()
    reasons = [state["stop_reason"] for _, state in played]
    calls = [state["agent/calls"] for _, state in played]
    return reasons, calls, len(gateway.sessions)


def test_512_concurrent_sessions_are_all_served_and_closed_and_memory_stays_flat(tiny_tokenizer):
    env = load_environment(agent=chatty, tasks="calculator", num_examples=SESSIONS)
    engine = RecordingEngine(lambda messages: "fine", tiny_tokenizer)
    process = psutil.Process()

    async def rounds():
        played, memory = [], []
        for _ in range(3):
            played.append(await one_round(env, engine))
            engine.served.clear()
            gc.collect()
            memory.append(process.memory_info().rss)
        return played, memory[2] - memory[1]  # the first round sets the allocator's high water

    played, growth = asyncio.run(rounds())
    for reasons, calls, still_open in played:
        assert reasons == ["agent_done"] * SESSIONS
        assert calls == [CALLS] * SESSIONS
        assert still_open == 0
    assert growth < MEMORY_SLACK, f"grew {growth / 2**20:.1f} MiB"
