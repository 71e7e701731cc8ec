"""Agents through real vLLM on the CPU with the tiny model: what vLLM served an agent is, id for
id and log-prob for log-prob, what the trajectory holds; and an agent written with the OpenAI
Agents SDK trains under `python -m rlve.train` unchanged."""

import json

import pytest

from examples import agents_sdk_agent
from examples.calculator_agent import solve
from rlve.config import InferenceConfig
from rlve.envs.agent import load_environment
from rlve.evaluation import evaluate
from rlve.inference.engine import SamplingConfig
from rlve.inference.vllm_engine import VLLMEngine

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def engine(tiny_path, tiny_tokenizer):
    with VLLMEngine(tiny_path, tiny_tokenizer, InferenceConfig(max_model_len=2048)) as engine:
        yield engine


def test_what_vllm_served_an_agent_is_what_its_trajectory_holds(engine):
    served = []
    generate = engine.generate

    async def recorded(request):
        generation = await generate(request)
        served.append((list(request.prompt_ids), list(generation.token_ids),
                       list(generation.logprobs)))  # fmt: skip
        return generation

    engine.generate = recorded
    try:
        env = load_environment(agent=solve, tasks="calculator", num_examples=4)
        result = evaluate(env, engine, 4, rollouts_per_example=2, seed=0, progress=False,
                          sampling=SamplingConfig(temperature=1.0, max_tokens=32))  # fmt: skip
    finally:
        engine.generate = generate
    trajectories = [t for group in result.groups for t in group.trajectories]
    assert [t.stop_reason for t in trajectories] == ["agent_done"] * 8
    calls = sorted(served)
    turns = sorted((t.token_ids[:start], t.token_ids[start:end], t.sampler_logprobs[start:end])
                   for t in trajectories for start, end in t.turn_spans)  # fmt: skip
    assert turns == calls  # every call vLLM served is one trained turn, ids and log-probs exact
    for t in trajectories:
        assert sum(t.loss_mask) == sum(end - start for start, end in t.turn_spans) > 0


def test_an_agents_sdk_agent_trains_under_rlve_train(tmp_path):
    from rlve.loop import train
    from rlve.train import load_run_config

    spec = f"{agents_sdk_agent.__name__}:{agents_sdk_agent.solve.__name__}"
    overrides = ["+experiment=agent_smoke", f"output_dir={tmp_path}", "trainer.max_steps=2",
                 f"env.args.agent.agent={spec}", "env.args.agent.tasks=calculator",
                 "+env.args.agent.num_examples=16", "rollout.max_tokens=32",
                 "inference.max_model_len=1024",  # the smoke's 256 is shorter than the tool prompt
                 "logging.console_every=0"]  # fmt: skip
    run_dir = train(load_run_config(overrides))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert str(run_dir) == str(tmp_path) and len(rows) == 2
    for row in rows:
        assert row["faults/rate"] == 0.0
        assert row["agent/calls"] >= 1.0  # the SDK's agent called the model, through the endpoint
        assert row["stop/agent_done"] == 1.0
