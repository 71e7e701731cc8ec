"""The training part of the tic-tac-toe recipe's RL step, this tree against an older commit.

The workload is the recipe's step: SmolLM2-135M-Instruct, full fine-tuning under bf16 autocast,
CISPO, 2,048-token micro-batches, 8 problems x 8 games with the short rules. The games are the
recipe's noisy minimax teacher's (same seeds in every case), so both commits train on the same
tokens without a sampler; `old_logprobs=recompute` with one update costs what the recipe's
`sampler` does (no extra pass). Each case runs in its own process on the code of its tree (a
git worktree for the older commit): one warm-up step, then `--steps` timed steps.

    python benchmarks/bench_step_cost.py                          # this tree against HEAD~0's main
    python benchmarks/bench_step_cost.py --old 73502e9 --steps 2  # against a given commit
    python benchmarks/bench_step_cost.py --old none               # this tree only
    python benchmarks/bench_step_cost.py --old none --skip-no-share --boards threats \
        --tree-attention segments buckets                         # the tree's attention both ways
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "73502e9"
"""main before prefix sharing, zero-advantage skipping and the compact board"""


def recipe_groups(tokenizer, board: str, noise: float, problems: int, games: int):
    """`problems` groups of `games` teacher games, the recipe's environment settings."""
    from rlve import evaluate, load_environment
    from rlve.envs.tictactoe.policies import noisy_minimax_policy
    from rlve.inference.scripted import ScriptedEngine
    from rlve.rollout.chat_tokens import end_of_turn_id

    board_args = {} if board == "grid" else {"board": board}
    env = load_environment("tictactoe", num_examples=problems, seed=1, rules="short",
                           min_random_move_prob=0.2, max_random_move_prob=0.7,
                           invalid_penalty="per_move", **board_args)  # fmt: skip
    engine = ScriptedEngine(noisy_minimax_policy(noise), tokenizer, end_of_turn_id(tokenizer))
    result = evaluate(env, engine, problems, rollouts_per_example=games, seed=0, progress=False)
    return result.groups


def worker(args) -> None:
    import torch

    import rlve
    from rlve.config import TrainerConfig
    from rlve.training.trainer import Trainer

    config = TrainerConfig(model="smollm2_135m", dtype="bfloat16", lr=2e-6, loss="cispo",
                           is_cap=5.0, old_logprobs="recompute", max_tokens_per_microbatch=2048,
                           max_steps=100, temperature=1.0)  # fmt: skip
    if args.no_share:
        config = replace(config, share_prefixes=False)
    if args.tree_attention:
        config = replace(config, tree_attention=args.tree_attention[0])
    trainer = Trainer(config)
    groups = recipe_groups(trainer.tokenizer, args.board, 0.5, args.problems, args.games)
    games = [t for g in groups for t in g.trajectories]
    times, metrics = [], {}
    for step in range(args.steps + 1):
        started = time.perf_counter()
        metrics = trainer.train_step(groups)
        if step:  # the first step warms allocators and caches up
            times.append(time.perf_counter() - started)
    if args.profile:
        print_profile(trainer, groups)
    print(json.dumps({
        "rlve": str(Path(rlve.__file__).parent.parent),
        "threads": torch.get_num_threads(),
        "train_s": times,
        "tokens_per_game": statistics.mean(len(t.token_ids) for t in games),
        "trained_per_game": statistics.mean(sum(t.loss_mask) for t in games),
        "forward_tokens": metrics.get("perf/forward_tokens"),
        "skipped_tokens": metrics.get("perf/skipped_tokens"),
        "train_tflops": metrics.get("perf/train_tflops"),  # None on commits before perf/mfu
        "mfu": metrics.get("perf/mfu"),
        "reward_mean": statistics.mean(t.reward for t in games),
    }))  # fmt: skip


def print_profile(trainer, groups, top: int = 10) -> None:
    """One more step under torch's profiler: the share of its ops' self time (both threads'
    summed) that attention, matrix products and the top ops take, on stderr."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        trainer.train_step(groups)
    events = sorted(profiler.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events)

    def share(words: tuple[str, ...]) -> float:
        return sum(e.self_cpu_time_total for e in events if any(w in e.key for w in words)) / total

    products = ("aten::mm", "aten::addmm", "aten::bmm")
    print(f"profile: {total / 1e6:.1f} s of ops; attention (sdpa forward and backward) "
          f"{share(('scaled_dot_product',)):.0%}, matrix products {share(products):.0%}",
          file=sys.stderr)  # fmt: skip
    for e in events[:top]:
        print(f"profile  {e.key:58s} {e.self_cpu_time_total / total:6.1%}  {e.count} calls",
              file=sys.stderr)  # fmt: skip


def loop_worker(args) -> None:
    """Runs the recipe's RL (`rl_overrides` of this tree) from `args.model` for `args.steps` + 1
    steps and prints the timed steps' perf/ metrics."""
    import rlve

    try:
        from rlve.experiments.recipe import rl_overrides
        from rlve.experiments.recipe_sizes import RECIPE
    except ModuleNotFoundError:  # an older commit: the experiments lived in rlve.cli then
        from rlve.cli.recipe import RECIPE, rl_overrides

    size = RECIPE if args.board == "grid" else replace(RECIPE, board=args.board)
    out = Path(tempfile.mkdtemp(prefix="rlve_bench_loop_"))
    replaced = ("trainer.max_steps=", "save_every=")
    overrides = [o for o in rl_overrides(size) if not o.startswith(replaced)]
    overrides += [f"trainer.model={args.model}", "trainer.seed=0", "env.seed=0",
                  "inference.seed=0", f"output_dir={out}", f"trainer.max_steps={args.steps + 1}",
                  f"save_every={args.steps + 10}"]  # fmt: skip
    command = [sys.executable, "-m", "rlve.train", *overrides]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    timed = [r for r in rows if "perf/step_s" in r][1:]  # step 1 warms vLLM and torch up
    names = ("perf/step_s", "perf/train_s", "perf/rollout_s", "perf/sync_s",
             "perf/forward_tokens", "perf/unshared_tokens", "perf/skipped_tokens")  # fmt: skip
    print(json.dumps({
        "rlve": str(Path(rlve.__file__).parent.parent),
        **{n: statistics.mean(r.get(n, float("nan")) for r in timed) for n in names},
    }))  # fmt: skip


def worktree(commit: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"rlve_bench_{commit}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit],
                       check=True, capture_output=True)  # fmt: skip
    return path


def run_case(
    root: Path, board: str, args, no_share: bool = False, model: str = "", attention: str = ""
) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--board", board,
               "--steps", str(args.steps), "--problems", str(args.problems),
               "--games", str(args.games)] + (["--no-share"] if no_share else [])  # fmt: skip
    if attention:
        command += ["--tree-attention", attention]
    if args.profile:
        command += ["--profile"]
    if model:
        command += ["--model", str(Path(model).resolve())]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"case {root} {board} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    profiled = [line for line in done.stderr.splitlines() if line.startswith("profile")]
    result["profile"] = "\n".join(profiled)
    if Path(result["rlve"]).resolve() != root.resolve():
        raise RuntimeError(f"the worker imported rlve from {result['rlve']}, not {root}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=BASELINE, help="older commit to compare, or 'none'")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per case")
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--games", type=int, default=8, help="games per problem")
    parser.add_argument("--boards", nargs="+", default=["grid", "compact"])
    parser.add_argument("--loop", nargs="+", metavar="BOARD=MODEL",
                        help="whole RL steps (vLLM included) from these students instead, "
                        "e.g. grid=runs/demo/sft_model")  # fmt: skip
    parser.add_argument("--skip-no-share", action="store_true",
                        help="leave out the case without prefix sharing")  # fmt: skip
    parser.add_argument("--tree-attention", nargs="+", metavar="CHOICE",
                        help="this tree's cases once per trainer.tree_attention given "
                        "(default: its default)")  # fmt: skip
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile one more step of each case (the shares of its time)",
    )
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--board", default="grid", help=argparse.SUPPRESS)
    parser.add_argument("--no-share", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return loop_worker(args) if args.model else worker(args)
    if args.loop:
        return compare_loops(args)
    cases = []
    if args.old != "none":
        cases.append((f"{args.old} (old)", worktree(args.old), "grid", False, ""))
    if not args.skip_no_share:
        cases.append(("this tree, no prefix sharing", ROOT, "grid", True, ""))
    attentions = args.tree_attention or [""]
    cases += [(f"this tree, {board} board" + (f", tree_attention={a}" if a else ""), ROOT, board,
               False, a) for board in args.boards for a in attentions]  # fmt: skip
    print(f"{args.problems} x {args.games} teacher games, {args.steps} timed steps a case")
    print("| case | tokens/game | trained/game | forwarded/step | s/step | vs first | TFLOP/s "
          "| share of peak |\n|---|---:|---:|---:|---:|---:|---:|---:|")  # fmt: skip
    first, profiles = None, []
    for name, root, board, no_share, attention in cases:
        result = run_case(root, board, args, no_share, attention=attention)
        seconds = statistics.mean(result["train_s"])
        first = first or seconds
        forwarded = result["forward_tokens"]
        forwarded = f"{forwarded:.0f}" if forwarded is not None else "-"
        tflops, mfu = result.get("train_tflops"), result.get("mfu")
        rate = f"{tflops:.3f} | {mfu:.0%}" if tflops and mfu else "- | -"
        print(f"| {name} | {result['tokens_per_game']:.0f} | {result['trained_per_game']:.0f} | "
              f"{forwarded} | {seconds:.1f} | {seconds / first:.2f}x | {rate} |",
              flush=True)  # fmt: skip
        profiles.append(f"{name}: {result['profile']}" if result["profile"] else "")
    print("\n".join(p for p in profiles if p))


def compare_loops(args) -> None:
    """The recipe's whole RL step (8 x 8 games through vLLM, training, the push) from the same
    students: the older commit on the grid board, this tree on each board given."""
    students = dict(item.split("=", 1) for item in args.loop)
    cases = []
    if args.old != "none" and "grid" in students:
        cases.append((f"{args.old} (old), grid", worktree(args.old), "grid"))
    cases += [(f"this tree, {board}", ROOT, board) for board in students]
    print(f"the recipe's RL step from an SFT student, {args.steps} timed steps a case (after one)")
    print("| case | step s | rollout s | train s | push s | forwarded/step | vs first |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    first = None
    for name, root, board in cases:
        r = run_case(root, board, args, model=students[board])
        first = first or r["perf/step_s"]
        forwarded = r["perf/forward_tokens"]
        print(f"| {name} | {r['perf/step_s']:.1f} | {r['perf/rollout_s']:.1f} | "
              f"{r['perf/train_s']:.1f} | {r['perf/sync_s']:.2f} | {forwarded:.0f} | "
              f"{r['perf/step_s'] / first:.2f}x |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
