"""Rollout throughput: tic-tac-toe episodes through the vLLM engine, against plain vLLM generation
of the same first-turn prompts (the environment's overhead) and transformers `generate` (what a
trainer without an inference engine would get); then the step-time split of the training loop
with async_level 0 and 1.

    python scripts/bench_rollout.py [--model tiny] [--games 64] [--max-tokens 48] [--steps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import torch

import rlve
from rlve.config import InferenceConfig
from rlve.inference.vllm_engine import VLLMEngine
from rlve.models import load_causal_lm, load_tokenizer, resolve_model_path
from rlve.rollout import ChatTokens, SamplingConfig


def episodes(engine, games: int, max_tokens: int) -> dict[str, float]:
    env = rlve.load_environment("tictactoe", num_examples=games)
    sampling = SamplingConfig(max_tokens=max_tokens)
    started = time.perf_counter()
    result = rlve.evaluate(env, engine, games, rollouts_per_example=4, sampling=sampling)
    elapsed = time.perf_counter() - started
    tokens = sum(t.num_sampled_tokens for g in result.groups for t in g.trajectories)
    return {"episodes_per_s": 4 * games / elapsed, "tokens_per_s": tokens / elapsed, "s": elapsed}


def first_turn_prompts(tokenizer, games: int) -> list[list[int]]:
    env = rlve.load_environment("tictactoe", num_examples=games)
    chat = ChatTokens(tokenizer)
    return [chat.prompt_ids(env.example(i).prompt) for i in range(games)]


def plain_vllm(engine: VLLMEngine, prompts, max_tokens: int) -> dict[str, float]:
    from vllm import SamplingParams

    async def one(ids, seed):
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, seed=seed)
        final = None
        async for out in engine._llm.generate(
            {"prompt_token_ids": ids}, params, request_id=str(seed)
        ):
            final = out
        return len(final.outputs[0].token_ids)

    async def run():
        return await asyncio.gather(*(one(ids, i) for i, ids in enumerate(prompts)))

    started = time.perf_counter()
    counts = engine._call(run(), 600, "plain generation")
    elapsed = time.perf_counter() - started
    return {"tokens_per_s": sum(counts) / elapsed, "s": elapsed}


def transformers_generate(model_name: str, prompts, max_tokens: int) -> dict[str, float]:
    tokenizer = load_tokenizer(model_name)
    model = load_causal_lm(model_name).eval()
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])  # left padding
    mask = (ids != pad).long()
    started = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_tokens,
            min_new_tokens=max_tokens,
            do_sample=True,
            pad_token_id=pad,
        )
    elapsed = time.perf_counter() - started
    return {"tokens_per_s": (out.shape[1] - width) * len(prompts) / elapsed, "s": elapsed}


def step_split(model_name: str, async_level: int, steps: int) -> dict[str, float]:
    from rlve.loop import train
    from rlve.train import load_run_config

    with tempfile.TemporaryDirectory() as tmp:
        config = load_run_config([
            "+experiment=tictactoe_cispo", f"trainer.model={model_name}",
            f"trainer.max_steps={steps}", "rollout.groups_per_step=8", "rollout.max_tokens=48",
            f"rollout.async_level={async_level}", "logging.wandb_mode=disabled",
            "logging.console_every=0", f"output_dir={tmp}/run",
        ])  # fmt: skip
        run_dir = train(config)
        rows = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    rows = rows[1:] or rows  # the first step pays vLLM's warm-up
    keys = ("perf/step_s", "perf/rollout_s", "perf/generate_s", "perf/train_s", "perf/sync_s")
    return {k: sum(r[k] for r in rows) / len(rows) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--steps", type=int, default=3, help="loop steps per async level")
    args = parser.parse_args()
    path = resolve_model_path(args.model)
    tokenizer = load_tokenizer(args.model)
    prompts = first_turn_prompts(tokenizer, 4 * args.games)
    with VLLMEngine(path, tokenizer, InferenceConfig(max_model_len=2048)) as engine:
        episodes(engine, 8, args.max_tokens)  # warm-up: compilation, caches
        env_run = episodes(engine, args.games, args.max_tokens)
        plain = plain_vllm(engine, prompts, args.max_tokens)
    hf = transformers_generate(args.model, prompts[:64], args.max_tokens)
    print(f"\nrollouts, {args.model} model, {4 * args.games} tic-tac-toe episodes, "
          f"max {args.max_tokens} tokens per turn")  # fmt: skip
    print(f"  vLLM engine, episodes   {env_run['episodes_per_s']:8.1f} episodes/s "
          f"{env_run['tokens_per_s']:8.0f} tokens/s")  # fmt: skip
    print(
        f"  plain vLLM generate     {'':>20} {plain['tokens_per_s']:8.0f} tokens/s "
        f"(episodes reach {env_run['tokens_per_s'] / plain['tokens_per_s']:.2f}x of it)"
    )
    print(
        f"  transformers generate   {'':>20} {hf['tokens_per_s']:8.0f} tokens/s "
        f"(vLLM episodes: {env_run['tokens_per_s'] / hf['tokens_per_s']:.1f}x)"
    )
    for level in (0, 1):
        split = step_split(args.model, level, args.steps)
        print(
            f"\nloop, async_level {level}, 64 games/step, mean of steps 2..{args.steps}: "
            + ", ".join(f"{k.split('/')[1]} {v:.2f}" for k, v in split.items())
        )


if __name__ == "__main__":
    main()
