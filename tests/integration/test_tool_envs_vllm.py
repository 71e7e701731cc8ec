"""Tool environments through real vLLM on the CPU with the tiny model: the episodes run to a
normal end, per-rollout tool processes come and go with their episodes, and the timings that
the note reports (tool time against generation time) are measured here."""

import time

import psutil
import pytest

import rlve
from rlve.config import InferenceConfig
from rlve.inference.engine import SamplingConfig
from rlve.inference.vllm_engine import VLLMEngine


@pytest.fixture(scope="module")
def engine(tiny_path, tiny_tokenizer):
    with VLLMEngine(tiny_path, tiny_tokenizer, InferenceConfig(max_model_len=2048)) as engine:
        yield engine


def play(env, engine, examples: int, rollouts: int):
    sampling = SamplingConfig(temperature=1.0, max_tokens=64)
    start = time.perf_counter()
    result = rlve.evaluate(env, engine, examples, rollouts_per_example=rollouts, seed=0,
                           sampling=sampling, progress=False)  # fmt: skip
    elapsed = time.perf_counter() - start
    trajectories = [t for g in result.groups for t in g.trajectories]
    tool_s = sum(t.metrics.get(key, 0.0) for t in trajectories
                 for key in ("tools/seconds", "mcp/start_seconds", "repl/seconds",
                             "repl/start_seconds"))  # fmt: skip
    print(f"\n{env.name}: {len(trajectories)} episodes in {elapsed:.1f} s, "
          f"tools and server starts {tool_s:.1f} s summed over episodes")  # fmt: skip
    return trajectories


def running_children(command_part: str) -> list[psutil.Process]:
    """This process's descendants whose command line holds `command_part` (ended ones and
    zombies of other tests' processes are not running, and not counted)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if command_part in " ".join(process.cmdline()):
                found.append(process)
        except psutil.NoSuchProcess:  # ZombieProcess included
            pass
    return found


def test_mcp_notes_episodes_through_vllm(engine):
    env = rlve.load_environment("mcp/notes", num_examples=4, lifetime="per_rollout")
    trajectories = play(env, engine, 4, 4)
    assert len(trajectories) == 16
    for t in trajectories:
        assert t.stop_reason in {"no_tool_call", "max_turns_reached"}, t.stop_reason
        assert t.metrics["mcp/failed"] == 0.0
        assert len(t.token_ids) == len(t.loss_mask) == len(t.sampler_logprobs)
        assert sum(t.loss_mask) == t.num_sampled_tokens > 0
    assert running_children("notes_server") == []


def test_wiki_search_episodes_through_vllm(engine):
    env = rlve.load_environment("wiki_search", num_examples=4, difficulties=[0, 1])
    trajectories = play(env, engine, 4, 4)
    assert len(trajectories) == 16
    for t in trajectories:
        assert t.stop_reason in {"no_tool_call", "max_turns_reached"}, t.stop_reason
        assert t.errors == {}
        assert len(t.token_ids) == len(t.loss_mask) == len(t.sampler_logprobs)


def test_python_repl_episodes_through_vllm(engine):
    env = rlve.load_environment("python_repl/ledger", num_examples=4, difficulties=[0])
    trajectories = play(env, engine, 4, 4)
    assert len(trajectories) == 16
    for t in trajectories:
        assert t.stop_reason in {"no_code", "final_answer", "max_turns_reached"}, t.stop_reason
        assert t.errors == {}
    assert running_children("rlve/envs/repl/worker.py") == []
