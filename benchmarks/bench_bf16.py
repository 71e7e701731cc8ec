"""bfloat16 on the CPU for SmolLM2-135M tic-tac-toe games: the trainer's step and vLLM's play.

    python benchmarks/bench_bf16.py                      # every part
    python benchmarks/bench_bf16.py --parts trainer --steps 3

trainer: one SFT step on 8 of the recipe's teacher games (short rules, ~480 tokens each) after a
warm-up step, for float32, bf16 compute with float32 weights (rlve's `trainer.dtype=bfloat16`),
LoRA r8 on a bf16 or a float32 base, and bf16 weights with no float32 copy (plain transformers
and AdamW: what rlve no longer does, because such updates round away; tests/integration/
test_bf16_training.py). vllm: the instruct model answers 64 positions from the teacher's games
(the prompts an RL step sends) with 24 tokens each, in float32 and in bfloat16. Prints seconds,
tokens/s and the speed-up over float32. parity: the per-token log-probs of three minimax games
under the trainer and under vLLM, each in float32 and in bf16, against the float32 trainer's:
mean, 99th percentile and largest difference, and the mean signed one (nats).
"""

from __future__ import annotations

import argparse
import time


def teacher_batch(tokenizer, games: int = 8) -> list[tuple[list[int], list[int]]]:
    from rlve.training.sft import tictactoe_teacher_data

    kept, _ = tictactoe_teacher_data(tokenizer, 40, noise=0.5, rules="short")
    return [(g.token_ids, g.loss_mask) for g in kept[:games]]


def time_trainer_step(step, batch, repeats: int) -> float:
    step(batch)  # warm-up: allocations, first kernels
    started = time.perf_counter()
    for _ in range(repeats):
        step(batch)
    return (time.perf_counter() - started) / repeats


def pure_bf16_step(path: str):
    """transformers in bf16 weights, AdamW on them in place (no float32 copy)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step(batch):
        for ids, mask in batch:
            tokens = torch.tensor([ids])
            labels = torch.where(torch.tensor([mask]).bool(), tokens, -100)
            (model(input_ids=tokens, labels=labels).loss / len(batch)).backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def trainer_part(steps: int) -> None:
    from rlve.config import LoraConfig, TrainerConfig
    from rlve.models import load_tokenizer, resolve_model_path
    from rlve.training.trainer import Trainer

    path = resolve_model_path("smollm2-135m")
    batch = teacher_batch(load_tokenizer(path))
    tokens = sum(len(ids) for ids, _ in batch)
    lora = LoraConfig(enabled=True, rank=8, alpha=16)
    cases = {
        "float32": TrainerConfig(model=path, dtype="float32"),
        "bf16 compute, float32 weights": TrainerConfig(model=path, dtype="bfloat16"),
        "LoRA r8, bf16 base": TrainerConfig(model=path, dtype="bfloat16", lora=lora),
        "LoRA r8, float32 base": TrainerConfig(model=path, dtype="float32", lora=lora),
    }
    print(f"trainer: one SFT step on {len(batch)} games, {tokens} tokens, mean of {steps}")
    base = None
    for name, config in cases.items():
        seconds = time_trainer_step(Trainer(config).sft_step, batch, steps)
        base = base or seconds
        print(f"  {name:<32} {seconds:7.2f} s  {tokens / seconds:6.0f} tok/s  "
              f"{base / seconds:4.2f}x", flush=True)  # fmt: skip
    seconds = time_trainer_step(pure_bf16_step(path), batch, steps)
    print(f"  {'bf16 weights (HF, one by one)':<32} {seconds:7.2f} s  {tokens / seconds:6.0f} "
          f"tok/s  {base / seconds:4.2f}x  (updates below half a bf16 step are lost)")  # fmt: skip


def vllm_part() -> None:
    import asyncio

    from rlve.config import InferenceConfig
    from rlve.inference.engine import GenerationRequest, SamplingConfig
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.models import load_tokenizer, resolve_model_path
    from rlve.rollout.chat_tokens import ChatTokens

    path = resolve_model_path("smollm2-135m")
    tokenizer = load_tokenizer(path)
    chat = ChatTokens(tokenizer)
    prompts = [chat.prompt_ids(g.prompt) for g in _positions(tokenizer)]
    sampling = SamplingConfig(temperature=1.0, max_tokens=24, seed=0)
    print(f"vllm: {len(prompts)} positions, 24 new tokens each")
    base = None
    for dtype in ("float32", "bfloat16"):
        with VLLMEngine(path, tokenizer, InferenceConfig(dtype=dtype, max_model_len=1024)) as eng:

            async def play():
                requests = [GenerationRequest([], sampling, prompt_ids=p) for p in prompts]
                return await asyncio.gather(*(eng.generate(r) for r in requests))

            asyncio.run(play())  # warm-up
            started = time.perf_counter()
            generations = asyncio.run(play())
            seconds = time.perf_counter() - started
        new = sum(len(g.token_ids) for g in generations)
        base = base or seconds
        print(f"  {dtype:<10} {seconds:6.2f} s  {new / seconds:6.0f} new tok/s  "
              f"{base / seconds:4.2f}x", flush=True)  # fmt: skip


def parity_part() -> None:
    import numpy as np

    import rlve
    from rlve.config import InferenceConfig, TrainerConfig
    from rlve.envs.tictactoe import minimax_policy
    from rlve.inference.scripted import ScriptedEngine
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.models import load_tokenizer, resolve_model_path
    from rlve.training.logprobs import one_sequence_logprobs
    from rlve.training.trainer import Trainer

    path = resolve_model_path("smollm2-135m")
    tokenizer = load_tokenizer(path)
    env = rlve.load_environment("tictactoe", num_examples=3, rules="short")
    result = rlve.evaluate(env, ScriptedEngine(minimax_policy, tokenizer), 3)
    games = [t.token_ids for g in result.groups for t in g.trajectories]
    print(f"parity: {len(games)} minimax games of {[len(ids) for ids in games]} tokens")
    scores = {}
    for dtype in ("float32", "bfloat16"):
        scorer = Trainer(TrainerConfig(model=path, dtype=dtype)).scorer
        scores[f"trainer {dtype}"] = np.concatenate(
            [one_sequence_logprobs(scorer, ids).double().numpy() for ids in games]
        )
        with VLLMEngine(path, tokenizer, InferenceConfig(dtype=dtype, max_model_len=1024)) as eng:
            scores[f"vllm {dtype}"] = np.concatenate([eng.prompt_logprobs(ids) for ids in games])
    pairs = [
        ("trainer bfloat16", "trainer float32"),
        ("vllm float32", "trainer float32"),
        ("vllm bfloat16", "trainer float32"),
        ("vllm bfloat16", "trainer bfloat16"),
    ]
    for a, b in pairs:
        gap = scores[a] - scores[b]
        size = np.abs(gap)
        print(f"  {a + ' - ' + b:<36} mean {size.mean():.4f}  p99 {np.quantile(size, 0.99):.4f}  "
              f"max {size.max():.4f}  signed {gap.mean():+.4f}", flush=True)  # fmt: skip


def _positions(tokenizer):
    """64 game positions as the teacher saw them (the prompt of each of its turns)."""
    from rlve.training.sft import tictactoe_teacher_data

    kept, _ = tictactoe_teacher_data(tokenizer, 24, noise=0.5, rules="short")
    positions = []
    for game in kept:
        messages = [*game.prompt]
        for message in game.completion:
            if message["role"] == "assistant":
                positions.append(type(game)(prompt=list(messages), completion=[]))
            messages.append(message)
    return positions[:64]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", choices=("trainer", "vllm", "parity"),
                        default=["trainer", "vllm", "parity"])  # fmt: skip
    parser.add_argument("--steps", type=int, default=2, help="timed trainer steps per case")
    args = parser.parse_args()
    if "trainer" in args.parts:
        trainer_part(args.steps)
    if "vllm" in args.parts:
        vllm_part()
    if "parity" in args.parts:
        parity_part()


if __name__ == "__main__":  # vLLM's engine process re-imports this file
    main()
