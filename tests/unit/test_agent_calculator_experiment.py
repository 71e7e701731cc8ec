"""The calculator agent's SmolLM2 experiment, on the tiny tokenizer and the scripted engine: the
warm-up learns the honest policy's calls as the endpoint served them, and the held-out score
pays the honest model, not a guess."""

import pytest

from rlve.envs.calculator import honest_policy
from rlve.experiments import agent_calculator
from rlve.inference.scripted import ScriptedEngine
from rlve.rollout.chat_tokens import end_of_turn_id

AGENTS = [agent_calculator.AGENT, "examples.agents_sdk_agent:solve"]
"""the openai SDK's tool loop and the OpenAI Agents SDK's agent"""


@pytest.mark.parametrize("agent", AGENTS)
def test_the_warm_up_learns_the_tool_call_and_the_answer_of_every_episode(tiny_tokenizer, agent):
    sequences, summary = agent_calculator.teacher_episodes(tiny_tokenizer, 4, agent)
    assert len(sequences) == 4 and summary["reward/mean"] == 1.0
    for sequence in sequences:
        learned = [t for t, m in zip(sequence.token_ids, sequence.loss_mask, strict=True) if m]
        text = tiny_tokenizer.decode(learned, skip_special_tokens=True)
        call, answer = text.split("</tool_call>")
        assert call.startswith('<tool_call>{"name": "calculate", "arguments": {"expression": ')
        assert answer.startswith("<answer>") and answer.endswith("</answer>")
        # the prompts (system, question, tool result) are not learned
        assert "What is" not in text and 0 < sum(sequence.loss_mask) < len(sequence.token_ids)


@pytest.mark.parametrize("agent", AGENTS)
def test_the_held_out_score_pays_the_honest_model_and_not_a_guess(tiny_tokenizer, agent):
    def score(policy):
        engine = ScriptedEngine(policy, tiny_tokenizer, end_of_turn_id(tiny_tokenizer))
        return agent_calculator.held_out_scores(engine, 1.0, 96, 0, agent)

    honest = score(honest_policy)
    assert len(honest["accuracy"]) == agent_calculator.EVAL_PROBLEMS
    assert set(honest["accuracy"]) == {1.0} and set(honest["tool use"]) == {1.0}
    guess = score(lambda messages: "<answer>1000</answer>")
    assert set(guess["accuracy"]) == {0.0} and set(guess["tool use"]) == {0.0}


def test_the_gain_table_pairs_each_seed_by_question():
    from rlve.experiments.experiment import RunResult

    def run(seed, before, after):
        outcomes = {"before": {"accuracy": before, "tool use": [1.0] * 4},
                    "after": {"accuracy": after, "tool use": [1.0] * 4}}  # fmt: skip
        return RunResult("cispo", seed, {}, {}, {}, 0.0, {}, {}, outcomes)

    table = agent_calculator.gain_table(
        [
            run(1, [0.0] * 4, [1.0, 0.0, 0.0, 0.0]),
            run(0, [0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0]),
        ]
    ).splitlines()
    # seed 0: differences 1, 0, 0, 1: mean 0.5, sd 0.577, 1.96 * 0.577 / 2 = 0.566
    assert table[2] == "| 0 | 0.250 -> 0.750 | +0.500 (-0.066 to +1.066) | 1.000 -> 1.000 |"
    # seed 1: 1, 0, 0, 0: mean 0.25, sd 0.5, 1.96 * 0.5 / 2 = 0.490
    assert table[3] == "| 1 | 0.000 -> 0.250 | +0.250 (-0.240 to +0.740) | 1.000 -> 1.000 |"
    # seeds' means 0.5 and 0.25: sd 0.177, t(1) 12.706 * 0.177 / sqrt(2) = 1.588
    assert table[4] == "| mean of 2 | | +0.375 (-1.213 to +1.963, t over seeds) | |"
