"""TRL's GRPOTrainer on a given model and prompts, timing each optimizer step; run by
benchmarks/bench_vs_trl.py inside its own TRL environment (only trl, transformers, datasets, torch).

    python trl_grpo_steps.py WORK.json OUT.json

WORK.json: {"model", "prompts" (chat message lists), "group_size", "max_tokens", "steps", "lr",
"bf16" (optional, default false)}.
OUT.json: {"step_s": [...], "mean_length": [...] (completion tokens), "trl": version}.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

import trl
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer


class StepClock(TrainerCallback):
    """Wall time of each optimizer step (generation, scoring and the update all happen inside)."""

    def __init__(self):
        self.started = 0.0
        self.step_s: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.step_s.append(time.perf_counter() - self.started)


def has_answer_tag(completions, **kwargs) -> list[float]:
    """A cheap verifiable reward: the answer format."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float("<answer>" in text) for text in texts]


def main() -> None:
    work = json.loads(open(sys.argv[1]).read())
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
        clock = StepClock()
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
    with open(sys.argv[2], "w") as f:
        json.dump({"step_s": clock.step_s, "mean_length": lengths, "trl": trl.__version__}, f)


if __name__ == "__main__":
    main()
