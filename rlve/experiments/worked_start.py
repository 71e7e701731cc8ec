"""The environment-scaling experiment's second start: a warm-up on worked problems.

The format warm-up (env_scaling.format_model) left SmolLM2 at the floor of the pool: 22 of the 31
kept environments were right on 1 of 16 problems. This start gives the student a foothold in
each family first. The held-out side is fixed before anything trains: the split rule
(rlve.curriculum.env_split) on the whole candidate list, not on a screened pool, so no warm-up
problem comes from an environment that can be held out. The warm-up trains on (problem,
verified answer) pairs of every other candidate and of FORMAT_ENVS, at WORKED_LEVELS, drawn
from WORKED_SEED; a problem whose prompt is one the screening or the evaluation uses is left
out. Every candidate is then screened with it (`screen --start worked`), and the pool is the
candidates it is right on in BAND at some level. The control, C1, is the first environment of the
training side that a constant answer cannot pass (rlve.curriculum.constant_answer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rlve.curriculum.constant_answer import CONSTANT_ANSWER_MARGIN, passes
from rlve.curriculum.env_split import EnvSplit, split_environments
from rlve.experiments import scaling_pool as scaling

WORKED_LEVELS = (0, 1, 2)
WORKED_PER_LEVEL = 8
"""problems per environment and level (before those the screening or evaluation use)"""
WORKED_SEED = 47_000
"""seed of the warm-up problems: no screening, evaluation or training run draws from it"""
WORKED_STEPS = 48
WORKED_BATCH = 16
WORKED_LR = 1e-5
BAND = (0.1, 0.9)
"""a candidate is in the pool when the start's accuracy at some level is within this band"""
HELD_OUT_PROBLEMS = 32
"""held-out problems a (environment, level) cell in this start's arms: the power calculation's
choice (a paired difference of 0.024 detectable with 3 seeds); the in-distribution score keeps
scaling_pool.EVAL_PROBLEMS, the problems the warm-up left out"""
RL_STEPS = 24
"""RL steps of this start's arms, scored before the first and after the last only"""


def candidate_split() -> EnvSplit:
    """The held-out side and the training side of the whole candidate list (module docstring)."""
    return split_environments(scaling.candidates(), seed=scaling.SPLIT_SEED,
                              every=scaling.HELD_OUT_EVERY)  # fmt: skip


def prompts_of(name: str, seed: int, levels, per_level: int) -> list[tuple[list[dict], str]]:
    """(prompt, reference answer) of the `per_level` problems at each of `levels` that
    `load_environment(name, seed=seed, difficulties=[level])` lists, as the screening and the
    evaluation draw them."""
    from rlve.envs import load_environment

    problems = []
    for level in levels:
        env = load_environment(name, num_examples=per_level, seed=seed, difficulties=[level])
        examples = [env.example(i) for i in range(per_level)]
        problems += [(example.prompt, example.answer) for example in examples]
    return problems


def scored_prompts(name: str) -> set[str]:
    """The prompts (as JSON) of `name` that the screening and the evaluation score."""
    scored = prompts_of(name, scaling.SCREEN_SEED, scaling.SCREEN_LEVELS, scaling.SCREEN_PROBLEMS)
    scored += prompts_of(name, scaling.EVAL_SEED, scaling.EVAL_LEVELS, scaling.EVAL_PROBLEMS)
    return {json.dumps(prompt) for prompt, _ in scored}


@dataclass
class WorkedData:
    sequences: list
    """SftSequence per kept problem: the prompt, then `<answer>reference</answer>`"""
    per_env: dict[str, int]
    """kept problems per environment"""
    left_out: dict[str, str]
    """environment -> why none or some of its problems were left out"""


def worked_problems(names: list[str], tokenizer) -> WorkedData:
    """The warm-up's (problem, answer) sequences of `names` (see the module docstring)."""
    from rlve.training.sft import answer_sequence

    data = WorkedData([], {}, {})
    for name in names:
        try:
            problems = prompts_of(name, WORKED_SEED, WORKED_LEVELS, WORKED_PER_LEVEL)
            scored = scored_prompts(name)
        except Exception as exc:  # a generator that fails is the environment's, not the run's
            data.left_out[name] = f"{type(exc).__name__}: {exc}"
            continue
        kept = 0
        for prompt, answer in problems:
            if json.dumps(prompt) in scored or not answer:
                continue
            sequence = answer_sequence(tokenizer, prompt, answer)
            if len(sequence.token_ids) - sum(sequence.loss_mask) > scaling.MAX_PROMPT_TOKENS:
                continue
            data.sequences.append(sequence)
            kept += 1
        data.per_env[name] = kept
        if kept < len(problems):
            data.left_out[name] = f"{len(problems) - kept} of {len(problems)} problems scored, " \
                                  "answerless or too long"  # fmt: skip
    return data


def worked_model(out: Path, model: str = scaling.MODEL) -> Path:
    """The start: SFT of `model` on the worked problems of the training side and FORMAT_ENVS
    (made once; `out/worked_info.json` says what it trained on)."""
    from rlve.config import TrainerConfig
    from rlve.models import load_tokenizer
    from rlve.rollout.records import write_text_atomically
    from rlve.training.sft import sft_warmup

    path = out / f"worked_model_{Path(model).name}"
    if (path / "config.json").exists():
        return path
    names = [*scaling.FORMAT_ENVS, *candidate_split().training_order]
    data = worked_problems(names, load_tokenizer(model))
    config = TrainerConfig(model=model, lr=WORKED_LR, max_steps=WORKED_STEPS,
                           lr_schedule="cosine", warmup_steps=WORKED_STEPS // 10,
                           max_tokens_per_microbatch=4096)  # fmt: skip
    path, losses = sft_warmup(data.sequences, config, path, batch_size=WORKED_BATCH)
    info = {"problems": len(data.sequences), "environments": len(data.per_env),
            "per_env": data.per_env, "left_out": data.left_out,
            "loss_first": losses[0], "loss_last": losses[-1]}  # fmt: skip
    write_text_atomically(out / "worked_info.json", json.dumps(info, indent=1) + "\n")
    print(f"worked-problem warm-up on {len(data.sequences)} problems of {len(data.per_env)} "
          f"environments: loss {losses[0]:.3f} -> {losses[-1]:.3f}; model: {path}")  # fmt: skip
    return path


def in_band(record: scaling.Screening) -> bool:
    """Measured, and right on between 10% and 90% of the problems at some level."""
    low, high = BAND
    return record.problem is None and any(low <= a <= high for a in record.accuracy.values())


def control_first(training: list[str], records: dict[str, scaling.Screening]) -> list[str]:
    """`training` with its first environment that passes the constant-answer rule moved to the
    front, to be C1; the others keep their order, so C4 is the control and the first 3 others,
    C16 the control and the first 15. ValueError when none passes (an empty `training` stays
    empty)."""
    control = next((n for n in training if passes(records[n].constant_answer or [])), None)
    if training and control is None:
        unmarked = [n for n in training if records[n].constant_answer is None]
        raise ValueError(
            f"none of the {len(training)} training environments passes the constant-answer rule "
            f"(margin {CONSTANT_ANSWER_MARGIN}); {len(unmarked)} of them have no constant answers "
            f"measured (scaling_pool.mark_constant_answers)"
        )
    return [control, *(n for n in training if n != control)] if training else []


def worked_split(records: dict[str, scaling.Screening]) -> dict:
    """What `split.json` stores for this start: the held-out side's and the training side's
    candidates in BAND, the training side in the rule's order but for the control first (so C1
    is in C4 is in C16), and the environments passed over for the control."""
    split = candidate_split()
    held_out = [n for n in split.held_out if n in records and in_band(records[n])]
    in_order = [n for n in split.training_order if n in records and in_band(records[n])]
    training = control_first(in_order, records)
    sizes = [n for n in scaling.COLLECTION_SIZES if n <= len(training)]
    return {
        "rule": {"seed": scaling.SPLIT_SEED, "every": scaling.HELD_OUT_EVERY,
                 "split_of": "every candidate, before screening", "band": list(BAND),
                 "screened": len(records), "in_band": len(held_out) + len(training),
                 "control_margin": CONSTANT_ANSWER_MARGIN,
                 "passed_over_for_control": in_order[: in_order.index(training[0])]
                 if training else []},
        "warm_up_envs": [*scaling.FORMAT_ENVS, *split.training_order],
        "held_out": held_out,
        "collections": {str(n): training[:n] for n in sizes},
    }  # fmt: skip
