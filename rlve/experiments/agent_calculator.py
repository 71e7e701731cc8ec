"""SmolLM2-135M trained through an agent it does not know of: the calculator agent, over seeds.

    python -m rlve.experiments.agent_calculator --seeds 0 1 2 --out runs/agent_calculator
    python -m rlve.experiments.agent_calculator --agent examples.agents_sdk_agent:solve

The agent is examples/calculator_agent.py (the openai SDK, a tool loop), or any agent of the
calculator's tasks named by `--agent` (the OpenAI Agents SDK's, above), run unchanged against
the run's OpenAI-compatible endpoint, which records every token it serves.
1. A short SFT on tool calls, shared by every seed and made once. Untrained, SmolLM2 called the
   calculator in none of 15 finished episodes (reward 0: nothing for RL to compare). The teacher
   is `rlve.envs.calculator.honest_policy` (call `calculate` on the question, answer with its
   value), played through the same agent and endpoint on questions of its own seed, so the
   warm-up learns the very tokens the endpoint serves. It is kept short (SFT_STEPS) so that the
   start is not already the teacher: RL has the tool's use left to learn.
2. Per seed: `python -m rlve.train +experiment=agent_calculator` from that model (the command is
   printed; the run is in <out>/cispo/seed<N>). On the run's own engine, before the first step
   and after the last: the agent on EVAL_PROBLEMS questions of EVAL_SEED (no run trains on
   them), the same for every run, at the run's temperature and token limit: accuracy (per
   question, for a comparison paired by question) and the share of episodes that called the tool.
3. A table (mean [min-max] over seeds), the training curves (rlve.experiments.experiment) and
   `<out>/gain.md`: each seed's after - before, paired by question, and the seeds' mean with a t
   interval. Finished seeds are skipped when the command is started again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rlve.experiments.experiment import Arm, Experiment, run_experiment, scores_table
from rlve.rollout.records import write_text_atomically

BASE_MODEL = "smollm2-135m"
AGENT = "examples.calculator_agent:solve"
"""the agent of +experiment=agent_calculator (its env.args.agent.agent)"""
TASKS = {"tasks": "calculator", "min_operands": 2, "max_operands": 3}
"""the questions of +experiment=agent_calculator (its env.args.agent, less the dataset's size)"""
EVAL_PROBLEMS = 128
EVAL_SEED = 555_000
"""seed of the held-out questions (the runs train on the calculator's seed 0)"""
SFT_SEED = 7
"""seed of the teacher's questions"""
SFT_EPISODES = 256
SFT_STEPS = 4
"""short on purpose: on the held-out questions 12 steps alone scored 0.984, 3 steps 0.008"""
SFT_BATCH = 8
SFT_LR = 3e-5


def agent_env(num_examples: int, seed: int, agent: str = AGENT):
    from rlve.envs import load_environment

    return load_environment("agent", agent=agent, num_examples=num_examples, seed=seed, **TASKS)


def teacher_episodes(tokenizer, episodes: int, agent: str = AGENT, seed: int = SFT_SEED):
    """The honest policy's episodes through the agent and the endpoint, as SFT sequences (every
    one solved: the teacher is exact), and the teacher's summary."""
    from rlve.envs.calculator import honest_policy
    from rlve.inference.scripted import ScriptedEngine
    from rlve.rollout.chat_tokens import end_of_turn_id
    from rlve.training.sft import SftSequence, teacher_games

    engine = ScriptedEngine(honest_policy, tokenizer, end_of_turn_id(tokenizer))
    env = agent_env(episodes, seed, agent)
    kept, summary = teacher_games(env, engine, episodes, tokenizer, seed,
                                  keep=lambda t: t.reward == 1.0)  # fmt: skip
    if len(kept) < episodes:
        raise RuntimeError(f"the honest policy solved {len(kept)} of {episodes} questions")
    return [SftSequence.of(t) for t in kept], summary


def sft_model(out: Path, steps: int = SFT_STEPS, agent: str = AGENT) -> Path:
    """The shared start: `steps` SFT steps on the teacher's episodes through `agent` (made once;
    each agent renders its own tools and prompts, so each has its own `out`)."""
    from rlve.config import TrainerConfig
    from rlve.models import load_tokenizer
    from rlve.training.sft import sft_warmup

    path = out / f"sft_model_{steps}"
    if (path / "config.json").exists():
        print(f"SFT model: {path} (already there)")
        return path
    data, _ = teacher_episodes(load_tokenizer(BASE_MODEL), SFT_EPISODES, agent)
    config = TrainerConfig(model=BASE_MODEL, dtype="float32", lr=SFT_LR, max_steps=steps)
    path, losses = sft_warmup(data, config, path, batch_size=SFT_BATCH)
    print(f"SFT on {len(data)} teacher episodes: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return path


def held_out_scores(engine, temperature: float, max_tokens: int, seed: int, agent: str = AGENT):
    """The agent on the held-out questions: accuracy per question (in the questions' order) and
    the share of episodes with a tool call."""
    from rlve.evaluation import evaluate
    from rlve.inference.engine import SamplingConfig

    sampling = SamplingConfig(temperature=temperature, max_tokens=max_tokens)
    result = evaluate(agent_env(EVAL_PROBLEMS, EVAL_SEED, agent), engine, EVAL_PROBLEMS, seed=seed,
                      sampling=sampling)  # fmt: skip
    episodes = sorted((t for g in result.groups for t in g.trajectories),
                      key=lambda t: t.example_id)  # fmt: skip
    return {
        "accuracy": [t.metrics["reward/exact_answer"] for t in episodes],
        "tool use": [t.metrics["reward/used_calculator"] for t in episodes],
    }


def gain_table(results) -> str:
    """Markdown: per seed, accuracy and tool use before -> after and the accuracy gain paired by
    question (95% interval over the questions); then the seeds' mean gain (t over seeds)."""
    from statistics import fmean

    from rlve.experiments.scaling_paired import across_seeds, seed_difference

    lines = ["| seed | accuracy before -> after | gain, paired by question (95% CI) | "
             "tool use before -> after |", "|---|---|---|---|"]  # fmt: skip
    gains = []
    for result in sorted(results, key=lambda r: r.seed):
        accuracy, tools = result.before_and_after("accuracy"), result.before_and_after("tool use")
        gain = seed_difference(accuracy["before"], accuracy["after"])
        gains.append(gain)
        lines.append(f"| {result.seed} | {fmean(accuracy['before']):.3f} -> "
                     f"{fmean(accuracy['after']):.3f} | {gain.mean:+.3f} ({gain.low:+.3f} to "
                     f"{gain.high:+.3f}) | {fmean(tools['before']):.3f} -> "
                     f"{fmean(tools['after']):.3f} |")  # fmt: skip
    total = across_seeds(gains)
    lines.append(f"| mean of {len(gains)} | | {total.mean:+.3f} ({total.low:+.3f} to "
                 f"{total.high:+.3f}, t over seeds) | |")  # fmt: skip
    return "\n".join(lines)


def experiment(sft_steps: int = SFT_STEPS, agent: str = AGENT) -> Experiment:
    def score(engine, config, seed: int) -> dict:
        sampling = config.trainer.temperature, config.rollout.max_tokens
        return held_out_scores(engine, *sampling, seed, agent)

    overrides = ("+experiment=agent_calculator", "logging.wandb_mode=disabled")
    if agent != AGENT:
        overrides += (f"env.args.agent.agent={agent}",)
    return Experiment(
        name="agent_calculator",
        arms=[Arm("cispo", overrides)],
        start=lambda out, seed: sft_model(out, sft_steps, agent),
        score=score,
        curves=["reward/mean", "reward/used_calculator", "agent/calls"],
        settings={
            "sft": [SFT_EPISODES, sft_steps, SFT_BATCH, SFT_LR, SFT_SEED],
            "eval": [EVAL_PROBLEMS, EVAL_SEED],
            "tasks": TASKS,
        },
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--agent", default=AGENT, help="package.module:function of the agent")
    parser.add_argument("--out", help="default: runs/agent_calculator, with the agent's module "
                                      "name added for another agent")  # fmt: skip
    parser.add_argument(
        "--sft-steps", type=int, default=SFT_STEPS, help="SFT steps of the shared start"
    )
    args = parser.parse_args(argv)
    if args.sft_steps < 1:
        parser.error(f"--sft-steps must be >= 1, got {args.sft_steps}")
    out = Path(args.out or "runs/agent_calculator")
    if args.out is None and args.agent != AGENT:
        out = out.with_name(f"{out.name}_{args.agent.partition(':')[0].rpartition('.')[2]}")
    results = run_experiment(experiment(args.sft_steps, args.agent), out, args.seeds)
    print(f"\n{BASE_MODEL} through {args.agent}, {len(args.seeds)} seeds, "
          f"{EVAL_PROBLEMS} held-out questions\n")  # fmt: skip
    print(scores_table(results))
    gains = gain_table(results)
    write_text_atomically(out / "gain.md", gains + "\n")
    print(f"\n{gains}")


if __name__ == "__main__":  # vLLM starts processes that re-import this file
    main()
