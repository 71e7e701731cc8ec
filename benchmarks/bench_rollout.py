"""Rollout throughput: tic-tac-toe episodes through the vLLM engine against plain vLLM generation
of the same token counts (one request per episode: its first-turn prompt, as many tokens as the
episode sampled, `ignore_eos`, only the final output), then transformers `generate` and the
step-time split of the training loop with async_level 0 and 1.

The CPU seconds of the main process (rlve's episodes, vLLM's front end) and of vLLM's engine
processes are counted for each phase: on a machine where both share the cores, every second the
main process spends is a second the model does not run.

    python benchmarks/bench_rollout.py [--model tiny] [--games 64] [--max-tokens 48] [--steps 3]
        [--concurrency 256] [--skip-hf] [--skip-loop]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import psutil
import torch

import rlve
from rlve.config import InferenceConfig
from rlve.inference.engine import PromptTokenCounts
from rlve.inference.vllm_engine import VLLMEngine
from rlve.models import load_causal_lm, load_tokenizer, resolve_model_path
from rlve.rollout import ChatTokens, SamplingConfig

ROLLOUTS = 4
"""episodes per tic-tac-toe example"""


class CpuClock:
    """CPU seconds (user + system) of this process and of its child processes since start."""

    def __init__(self):
        self.me = psutil.Process()
        self.started = self._read()

    def _read(self) -> tuple[float, float]:
        own = sum(self.me.cpu_times()[:2])
        children = 0.0
        for child in self.me.children(recursive=True):
            try:
                children += sum(child.cpu_times()[:2])
            except psutil.NoSuchProcess:
                pass
        return own, children

    def elapsed(self) -> dict[str, float]:
        own, children = self._read()
        return {"main_cpu_s": own - self.started[0], "engine_cpu_s": children - self.started[1]}


def episodes(engine, games: int, max_tokens: int, concurrency: int) -> dict:
    env = rlve.load_environment("tictactoe", num_examples=games)
    sampling = SamplingConfig(max_tokens=max_tokens)
    engine.prompt_tokens = PromptTokenCounts()
    clock, started = CpuClock(), time.perf_counter()
    result = rlve.evaluate(env, engine, games, rollouts_per_example=ROLLOUTS, sampling=sampling,
                           max_concurrent=concurrency)  # fmt: skip
    elapsed = time.perf_counter() - started
    played = [t for g in result.groups for t in g.trajectories]
    counts = [t.num_sampled_tokens for t in played]
    return {"s": elapsed, "episodes_per_s": len(played) / elapsed,
            "tokens_per_s": sum(counts) / elapsed, "counts": counts, "turns_of": turns_of(played),
            "prompt": engine.prompt_tokens,
            "turns": sum(t.num_turns for t in played) / len(played), **clock.elapsed()}  # fmt: skip


def turns_of(played) -> list[list[tuple[list[int], int]]]:
    """Per episode, per turn: the tokens put in before the turn (the first prompt, or the
    environment's reply) and how many tokens the turn sampled."""
    episodes_turns = []
    for t in played:
        turns, end = [], 0
        for start, stop in t.turn_spans:
            turns.append((t.token_ids[end:start], stop - start))
            end = stop
        episodes_turns.append(turns)
    return episodes_turns


def first_turn_prompts(tokenizer, games: int) -> list[list[int]]:
    """Each episode's first prompt, in the order `evaluate` plays them (example, then rollout)."""
    env = rlve.load_environment("tictactoe", num_examples=games)
    chat = ChatTokens(tokenizer)
    return [chat.prompt_ids(env.example(i).prompt) for i in range(games) for _ in range(ROLLOUTS)]


def plain_vllm(engine: VLLMEngine, prompts, counts: list[int]) -> dict:
    """vLLM alone on the same work: one request per episode, as many tokens as it sampled."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    llm = engine._replicas[0]
    prompt_tokens = PromptTokenCounts()

    async def one(ids, tokens, seed):
        params = SamplingParams(max_tokens=tokens, ignore_eos=True, seed=seed,
                                output_kind=RequestOutputKind.FINAL_ONLY)  # fmt: skip
        final = None
        async for out in llm.generate({"prompt_token_ids": ids}, params, request_id=str(seed)):
            final = out
        prompt_tokens.add(len(ids), final.num_cached_tokens or 0)
        return len(final.outputs[0].token_ids)

    async def run():
        await llm.reset_prefix_cache()
        work = zip(prompts, counts, strict=True)
        return await asyncio.gather(*(one(ids, n, i) for i, (ids, n) in enumerate(work) if n))

    clock, started = CpuClock(), time.perf_counter()
    generated = engine._call(run(), 600, "plain generation")
    elapsed = time.perf_counter() - started
    return {"s": elapsed, "tokens_per_s": sum(generated) / elapsed, "prompt": prompt_tokens,
            **clock.elapsed()}  # fmt: skip


def multi_turn_vllm(engine: VLLMEngine, episodes_turns) -> dict:
    """vLLM alone on the episodes' multi-turn work: per episode, turn after turn, its own sampled
    tokens followed by the episode's recorded reply tokens, as many tokens per turn as the
    episode sampled, log-probs as rlve asks for them. Same token counts, same context lengths,
    same prefix caching; no environment, chat template or rlve plumbing."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    llm = engine._replicas[0]
    prompt_tokens = PromptTokenCounts()

    async def episode(index, turns):
        history, made = [], 0
        for turn, (put_in, tokens) in enumerate(turns):
            history += put_in
            params = SamplingParams(max_tokens=tokens, ignore_eos=True, seed=index * 1000 + turn,
                                    logprobs=0, flat_logprobs=True,
                                    output_kind=RequestOutputKind.FINAL_ONLY)  # fmt: skip
            final = None
            request = {"prompt_token_ids": list(history)}
            async for out in llm.generate(request, params, request_id=f"{index}-{turn}"):
                final = out
            prompt_tokens.add(len(history), final.num_cached_tokens or 0)
            history += final.outputs[0].token_ids
            made += len(final.outputs[0].token_ids)
        return made

    async def run():
        await llm.reset_prefix_cache()
        return await asyncio.gather(*(episode(i, t) for i, t in enumerate(episodes_turns)))

    clock, started = CpuClock(), time.perf_counter()
    generated = engine._call(run(), 600, "the multi-turn requests")
    elapsed = time.perf_counter() - started
    return {"s": elapsed, "tokens_per_s": sum(generated) / elapsed, "prompt": prompt_tokens,
            **clock.elapsed()}  # fmt: skip


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
            "+experiment=tictactoe_course", "stop_if_unplayable=false",
            f"trainer.model={model_name}",
            f"trainer.max_steps={steps}", "rollout.groups_per_step=8", "rollout.max_tokens=48",
            f"rollout.async_level={async_level}", "logging.wandb_mode=disabled",
            "logging.console_every=0", f"output_dir={tmp}/run",
        ])  # fmt: skip
        run_dir = train(config)
        rows = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    rows = rows[1:] or rows  # the first step pays vLLM's warm-up
    keys = ("perf/step_s", "perf/rollout_s", "perf/generate_s", "perf/train_s", "perf/sync_s")
    return {k: sum(r[k] for r in rows) / len(rows) for k in keys}


def cpu_line(run: dict) -> str:
    prompt = run["prompt"]
    return (f"CPU s: main {run['main_cpu_s']:5.1f}, engine {run['engine_cpu_s']:5.1f}; prompt "
            f"tokens {prompt.total:7d}, computed {prompt.total - prompt.cached:7d}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--games", type=int, default=64, help="examples; 4 episodes each")
    parser.add_argument("--max-tokens", type=int, default=48, help="per turn")
    parser.add_argument("--concurrency", type=int, default=256, help="episodes in flight")
    parser.add_argument("--steps", type=int, default=3, help="loop steps per async level")
    parser.add_argument("--block-size", type=int, default=None, help="KV cache block size")
    parser.add_argument("--eager", action="store_true", help="inference.enforce_eager")
    parser.add_argument("--skip-hf", action="store_true")
    parser.add_argument("--skip-loop", action="store_true")
    args = parser.parse_args()
    path = resolve_model_path(args.model)
    tokenizer = load_tokenizer(args.model)
    prompts = first_turn_prompts(tokenizer, args.games)
    with VLLMEngine(
        path,
        tokenizer,
        InferenceConfig(max_model_len=2048, block_size=args.block_size, enforce_eager=args.eager),
    ) as engine:
        episodes(engine, 8, args.max_tokens, args.concurrency)  # warm-up: compilation, caches
        played = episodes(engine, args.games, args.max_tokens, args.concurrency)
        plain = plain_vllm(engine, prompts, played["counts"])
        multi = multi_turn_vllm(engine, played["turns_of"])
    ratio = played["tokens_per_s"] / plain["tokens_per_s"]
    print(f"\nrollouts, {args.model} model, {ROLLOUTS * args.games} tic-tac-toe episodes "
          f"({played['turns']:.1f} turns, {sum(played['counts'])} tokens), max {args.max_tokens} "
          f"tokens per turn, {args.concurrency} in flight")  # fmt: skip
    print(f"  episodes            {played['s']:6.1f} s {played['tokens_per_s']:8.0f} tokens/s "
          f"{played['episodes_per_s']:6.1f} episodes/s  {cpu_line(played)}")  # fmt: skip
    print(f"  plain vLLM, same    {plain['s']:6.1f} s {plain['tokens_per_s']:8.0f} tokens/s "
          f"{'':>17}  {cpu_line(plain)}")  # fmt: skip
    print(f"  vLLM, same turns    {multi['s']:6.1f} s {multi['tokens_per_s']:8.0f} tokens/s "
          f"{'':>17}  {cpu_line(multi)}")  # fmt: skip
    print(f"  episodes / plain    {ratio:.2f}x (one request per episode)")
    print(f"  episodes / vLLM     {played['tokens_per_s'] / multi['tokens_per_s']:.2f}x "
          "(the same turns without rlve)")  # fmt: skip
    if not args.skip_hf:
        hf = transformers_generate(args.model, prompts[:64], args.max_tokens)
        print(f"  transformers generate, 64 prompts x {args.max_tokens} tokens: "
              f"{hf['tokens_per_s']:.0f} tokens/s "
              f"(episodes {played['tokens_per_s'] / hf['tokens_per_s']:.1f}x)")  # fmt: skip
    if not args.skip_loop:
        for level in (0, 1):
            split = step_split(args.model, level, args.steps)
            print(
                f"\nloop, async_level {level}, 64 games/step, mean of steps 2..{args.steps}: "
                + ", ".join(f"{k.split('/')[1]} {v:.2f}" for k, v in split.items())
            )


if __name__ == "__main__":
    main()
