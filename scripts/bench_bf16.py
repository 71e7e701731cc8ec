"""bfloat16 on the CPU for SmolLM2-135M tic-tac-toe games: the trainer's step and vLLM's play.

    python scripts/bench_bf16.py                      # both parts
    python scripts/bench_bf16.py --parts trainer --steps 3

trainer: one SFT step on 8 of the recipe's teacher games (short rules, ~480 tokens each) after a
warm-up step, for float32, bf16 compute with float32 weights (rlve's `trainer.dtype=bfloat16`),
LoRA r8 on a bf16 or a float32 base, and bf16 weights with no float32 copy (plain transformers
and AdamW: what rlve no longer does, because such updates round away; tests/integration/
test_bf16_training.py). vllm: the instruct model answers 64 positions from the teacher's games
(the prompts an RL step sends) with 24 tokens each, in float32 and in bfloat16. Prints seconds,
tokens/s and the speed-up over float32.
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
    parser.add_argument("--parts", nargs="+", choices=("trainer", "vllm"),
                        default=["trainer", "vllm"])  # fmt: skip
    parser.add_argument("--steps", type=int, default=2, help="timed trainer steps per case")
    args = parser.parse_args()
    if "trainer" in args.parts:
        trainer_part(args.steps)
    if "vllm" in args.parts:
        vllm_part()


if __name__ == "__main__":  # vLLM's engine process re-imports this file
    main()
