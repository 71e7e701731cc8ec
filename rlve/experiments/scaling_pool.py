"""The environment-scaling experiment's pool: the candidates, their screening, the split's rule.

Shared by the experiment (rlve.experiments.env_scaling) and its starts (its format warm-up and
rlve.experiments.worked_start): which environments can be screened, how a starting model is
screened on each, and the seeds and sizes the split and the evaluation draw with.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from rlve.curriculum.constant_answer import ConstantAnswer, best_single_answer

MODEL = "smollm2-135m"
FORMAT_ENVS = ("rlve/sorting", "rlve/multiplication")
"""the warm-up's environments: they teach the answer contract and are never candidates"""
SCREEN_LEVELS = (0, 1, 2)
SCREEN_PROBLEMS = 16
"""problems per level: a share of 0 or 1 in 16 is a 95% bound of about 0.2"""
SCREEN_SEED = 46_000
"""seed of the screening problems and of the candidates' order; no training run draws from it"""
TEMPERATURE = 1.0
MAX_TOKENS = 256
MAX_PROMPT_TOKENS = 768
"""a longer prompt leaves too little of a 1,024-token context for a 135M model's answer"""
SPLIT_SEED = 46
HELD_OUT_EVERY = 4
COLLECTION_SIZES = (1, 4, 16, 64)
EVAL_LEVELS = (0, 1)
EVAL_PROBLEMS = 8
"""problems per environment and level of an evaluation"""
EVAL_SEED = 46_500


@dataclass
class Screening:
    """What the starting model did on one candidate environment."""

    name: str
    accuracy: dict[str, float]
    """level -> share of problems answered correctly (empty when not measured)"""
    format: dict[str, float]
    """level -> share of answers in the `<answer>` format"""
    prompt_tokens: int = 0
    """the longest screening prompt, in the model's chat format"""
    problem: str | None = None
    """why the environment was not measured (a failing generator, a prompt too long)"""
    constant_answer: list[ConstantAnswer] | None = None
    """the best single answer at each level (constant_answers); None: not measured"""

    def __post_init__(self) -> None:  # read back from JSON, the marks are dicts
        if self.constant_answer is not None:
            self.constant_answer = [
                m if isinstance(m, ConstantAnswer) else ConstantAnswer(**m)
                for m in self.constant_answer
            ]

    @property
    def learnable(self) -> bool:
        """Measured, right somewhere, and wrong somewhere: there is something to learn."""
        values = list(self.accuracy.values())
        return self.problem is None and bool(values) and max(values) > 0 and min(values) < 1


def candidates() -> list[str]:
    """Every environment of the three families but FORMAT_ENVS, in the screening order."""
    from rlve.envs.gym.sources import gym_families

    names = sorted(n for _, listed, _ in gym_families() for n in listed() if n not in FORMAT_ENVS)
    random.Random(SCREEN_SEED).shuffle(names)
    return names


def read_screening(path: Path) -> dict[str, Screening]:
    if not path.exists():
        return {}
    return {r["name"]: Screening(**r) for r in json.loads(path.read_text())}


def write_screening(path: Path, records: dict[str, Screening]) -> None:
    from rlve.rollout.records import write_text_atomically

    rows = [asdict(records[name]) for name in sorted(records)]
    write_text_atomically(path, json.dumps(rows, indent=1) + "\n")


def screen_one(name: str, engine, tokenizer) -> Screening:
    """The starting model's accuracy and format on `name` at each of SCREEN_LEVELS."""
    from rlve.envs import load_environment
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    sampling = SamplingConfig(temperature=TEMPERATURE, max_tokens=MAX_TOKENS)
    accuracy, formats, longest = {}, {}, 0
    for level in SCREEN_LEVELS:
        try:
            env = load_environment(name, num_examples=SCREEN_PROBLEMS, seed=SCREEN_SEED,
                                   difficulties=[level])  # fmt: skip
            prompts = [env.example(i).prompt for i in range(SCREEN_PROBLEMS)]
        except Exception as exc:  # a generator that fails is the environment's, not the run's
            return Screening(name, {}, {}, longest, f"level {level}: {type(exc).__name__}: {exc}")
        for prompt in prompts:
            text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
            longest = max(longest, len(tokenizer(text)["input_ids"]))
        if longest > MAX_PROMPT_TOKENS:
            return Screening(name, {}, {}, longest, f"a prompt of {longest} tokens")
        summary = evaluate(
            env, engine, SCREEN_PROBLEMS, seed=SCREEN_SEED, sampling=sampling
        ).summary
        accuracy[str(level)] = summary.get("reward/accuracy", 0.0)
        formats[str(level)] = summary.get("reward/format_score", 0.0)
    return Screening(name, accuracy, formats, longest, constant_answer=constant_answers(name))


def constant_answers(name: str) -> list[ConstantAnswer]:
    """At each of SCREEN_LEVELS, the best single answer over the screened problems: each
    distinct reference answer of the level is given to every problem by a scripted policy and
    verified as the model's answers are (an environment whose problems have several right
    answers, such as `rlve-gym/Circuit`, pays a constant more often than its references repeat).
    A level without reference answers has no answer to try (`answer` None, `right` 0)."""
    from rlve.envs import load_environment

    marks = []
    for level in SCREEN_LEVELS:
        env = load_environment(name, num_examples=SCREEN_PROBLEMS, seed=SCREEN_SEED,
                               difficulties=[level])  # fmt: skip
        if outcomes := reference_outcomes(env, SCREEN_PROBLEMS, SCREEN_SEED):
            marks.append(best_single_answer(level, outcomes))
        else:
            marks.append(ConstantAnswer(level, None, 0, SCREEN_PROBLEMS))
    return marks


def reference_outcomes(env, problems: int, seed: int) -> dict[str, list[float]]:
    """Each distinct reference answer of `env`'s first `problems` problems -> `constant_outcomes`
    of it on them, in sorted order of the answers; empty when they have no reference answer."""
    references = sorted({env.example(i).answer for i in range(problems)} - {""})
    return {answer: constant_outcomes(env, answer, problems, seed) for answer in references}


def constant_outcomes(env, answer: str, problems: int, seed: int) -> list[float]:
    """The verifier's accuracy of `answer` on each of `env`'s first `problems` problems, as an
    evaluation from `seed` draws them (in the order of their example ids)."""
    from rlve.evaluation import evaluate
    from rlve.inference.scripted import ScriptedEngine

    engine = ScriptedEngine(lambda messages: f"<answer>{answer}</answer>")
    groups = evaluate(env, engine, problems, seed=seed).groups
    return [
        t.metrics.get("reward/accuracy", 0.0)
        for group in sorted(groups, key=lambda g: g.example_id)
        for t in group.trajectories
    ]


def mark_constant_answers(records: dict[str, Screening], names: list[str], path: Path) -> None:
    """Adds the constant answers of each measured one of `names` that has none (a screening
    made before they were measured) to `records`, writing them to `path` after each one."""
    from rlve.rollout.progress import progress_bar

    todo = [n for n in names if records[n].problem is None and records[n].constant_answer is None]
    for name in progress_bar(iterable=todo, desc="constant answers"):
        records[name].constant_answer = constant_answers(name)
        write_screening(path, records)


def screen(out: Path, engine, tokenizer, names: list[str]) -> dict[str, Screening]:
    """Screens each of `names` not yet in `out/screening.json`, saving after each one."""
    from rlve.rollout.progress import progress_bar

    path = out / "screening.json"
    records = read_screening(path)
    todo = [name for name in names if name not in records]
    for name in progress_bar(iterable=todo, desc="screening"):
        records[name] = screen_one(name, engine, tokenizer)
        write_screening(path, records)
    return records
