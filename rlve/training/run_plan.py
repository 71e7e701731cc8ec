"""What `python -m rlve.train` says before it starts: the model and whether it is warmed up
first, the environments, the sizes, the device and dtype, the evaluation, and the time the run
took on this kind of CPU where it was measured at these sizes."""

from __future__ import annotations

import os

from rlve.config import RunConfig
from rlve.sync.placement import place_run
from rlve.training.warmup import needs_warmup, trained_on

HEADLINE_SIZES = ("smollm2-135m", 30, 6, 8, 8, 200)
"""`+experiment=tictactoe_cispo` on a CPU: model, warm-up steps, RL steps, problems a step,
rollouts a problem, evaluation games (plan_key)"""
MINUTES = {
    (HEADLINE_SIZES, "AVX2"): (
        "about 50 minutes on two cores (measured: 34 for RL and both evaluations, the warm-up "
        "12.7 alone; docs/results.md, \"The headline command\")"),
    (HEADLINE_SIZES, "AVX512-BF16"): (
        "about 20 minutes (estimated from make demo's 22:25 at the same sizes on two cores, "
        "which also plays the baselines and the teacher)"),
}  # fmt: skip
"""the run's time by (plan_key, CPU kind), where measured or estimated from a measurement"""


def plan_key(config: RunConfig) -> tuple:
    """The sizes that decide how long a run takes (what MINUTES is keyed by)."""
    warmup = config.warmup.steps if needs_warmup(config.warmup, config.trainer.model) else 0
    r = config.rollout
    return (config.trainer.model, warmup, config.trainer.max_steps, r.groups_per_step,
            r.group_size, config.evaluation.games)  # fmt: skip


def plan(config: RunConfig, gpus: int, cpu_kind: str) -> str:
    """The lines printed before a run starts on a machine with `gpus` GPUs."""
    from rlve.models.precision import resolve_dtype

    placed = place_run(config, gpus_seen=gpus)
    t, r, w = placed.trainer, placed.rollout, placed.warmup
    device, share = t.device, placed.inference.gpu_memory_utilization
    lines = [f"run {config.run_name!r} -> {config.output_dir}"]
    if needs_warmup(w, t.model):
        lines.append(
            f"model: {t.model}, warmed up first (warmup.when={w.when}): a noisy minimax teacher "
            f"({w.teacher_noise:.0%} random moves) plays {w.teacher_games} games, {w.steps} SFT "
            f"steps on the won and drawn ones -> {config.output_dir}/sft_model (reused on resume)"
        )
    else:
        seen = trained_on(t.model)
        why = f"already trained on {seen}" if seen else f"warmup.when={w.when}"
        lines.append(f"model: {t.model} ({why})")
    for name in config.env.names:
        args = config.env.args_for(name)
        shown = ", ".join(f"{k}={v}" for k, v in args.items() if k != "num_groups")
        lines.append(f"environment: {name}" + (f" ({shown})" if shown else ""))
    lines.append(
        f"RL: {t.max_steps} steps of {r.groups_per_step} problems x {r.group_size} rollouts "
        f"({r.groups_per_step * r.group_size} episodes a step), loss {t.loss}, credit {t.credit}, "
        f"lr {t.lr}, {'LoRA' if t.lora.enabled else 'full fine-tuning'}, async_level "
        f"{r.async_level}"
    )
    d = t.distill
    if d.enabled:
        view = "the environment's privileged view" if d.privileged else "the student's view"
        lines.append(
            f"distillation: teacher {d.teacher} reads {view} and scores each sampled token; a "
            f"token's advantage is {d.reward_weight} x the reward's + {d.coef} x "
            f"clip(log p_teacher - log p_sampler, {d.clip_low}, {d.clip_high})"
        )
    gpus_used = placed.inference.gpus if placed.inference.gpus is not None else "from 0"
    where = f"vLLM on GPUs {gpus_used}" if gpus else "vLLM on the CPU"
    lines.append(f"device: trainer on {device}, {where} with a {share} memory share; dtype "
                 f"{resolve_dtype(t.dtype, device)}")  # fmt: skip
    e = config.evaluation
    if e.games:
        lines.append(f"evaluation: {e.games} games before the first step and after the last"
                     + (f" with {e.env_args}" if e.env_args else ""))  # fmt: skip
    if not gpus:
        minutes = MINUTES.get((plan_key(config), cpu_kind), "not measured at these sizes")
        lines.append(f"time on this CPU ({cpu_kind}, {os.cpu_count()} cores): {minutes}")
    return "\n".join("plan: " + line for line in lines)
