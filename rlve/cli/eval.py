"""`scripts/evaluate.py`: evaluate a model (or a scripted policy) on an environment, from the shell.

    python scripts/evaluate.py --env tictactoe --model tiny --num-examples 100 --out runs/eval/x

Writes `summary.json` (the metrics and the settings that produced them, a 95% interval for each
rate, pass@k with --rollouts k) and `rollouts.jsonl` (one line per rollout) under --out, and
prints the main metrics. Groups are appended to `groups.jsonl` as they finish: the same command
on the same --out continues a killed evaluation where it stopped (other settings are refused).
The finished evaluation is also a W&B run (job_type "eval", offline under --out by default): its
settings as config, its summary metrics and a `rollouts` table.
Engines: vLLM on a model directory or hub id (default), an OpenAI-compatible endpoint
(--base-url), or a scripted policy (--policy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import rlve
from rlve.config.run import WANDB_MODES
from rlve.envs.base import Environment
from rlve.evaluation import EvalResult, evaluate_async
from rlve.inference import scripted
from rlve.inference.engine import Engine, SamplingConfig
from rlve.inference.scripted import Policy, ScriptedEngine
from rlve.inference.vllm_logs import send_vllm_logs_to
from rlve.rollout.group_journal import GroupJournal
from rlve.rollout.records import write_text_atomically
from rlve.rollout.runner import env_sampling
from rlve.training.rollout_table import ROLLOUT_TABLE, rollout_table
from rlve.training.wandb_run import start_wandb_run

ENGINE_KINDS = ("vllm", "openai", "scripted")

MAIN_METRICS = (
    "reward/mean",
    "reward/std",
    "game/win",
    "game/draw",
    "game/loss",
    "game/format",
    "game/invalid",
    "completion/len_mean",
    "completion/truncated_frac",
)
"""the metrics the printed table shows when present (summary.json has them all)"""
WANDB_TABLE_ROWS = 1000
"""most rollouts in the W&B run's table (the first, in example order); rollouts.jsonl has all"""


class UsageError(ValueError):
    """A bad command-line argument; the message is the one line the user sees."""


# ---------------------------------------------------------------- arguments -> objects


def load_policy(spec: str) -> Policy:
    """`package.module:function` -> the function, e.g. `rlve.envs.tictactoe:minimax_policy`."""
    try:
        return scripted.load_policy(spec, "--policy")
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def parse_env_args(text: str) -> dict[str, Any]:
    """The JSON object given to --env-args, as keyword arguments."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--env-args is not valid JSON ({exc.msg} at char {exc.pos}): {text!r}"
        ) from None
    if not isinstance(value, dict):
        raise UsageError(f"--env-args must be a JSON object like '{{\"seed\": 1}}', got {text!r}")
    return value


def build_env(name: str, env_args: dict[str, Any]) -> Environment:
    """`rlve.load_environment`, with its argument errors turned into one-line usage errors."""
    try:
        return rlve.load_environment(name, **env_args)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--env {name}: {exc}") from exc


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that choose a model and an engine (shared with scripts/play.py)."""
    group = parser.add_argument_group("model and engine")
    group.add_argument("--model", default=None,
                       help="vllm: 'tiny' (default), a model directory or a hub id; openai: the "
                            "served model name (required)")  # fmt: skip
    group.add_argument("--engine", choices=ENGINE_KINDS, default=None,
                       help="default: scripted with --policy, openai with --base-url, "
                            "else vllm")  # fmt: skip
    group.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"),
                       help="API root of an OpenAI-compatible server, e.g. "
                            "http://127.0.0.1:8000/v1 (default $OPENAI_BASE_URL)")  # fmt: skip
    group.add_argument("--api-key", default=None, help="default $OPENAI_API_KEY")
    group.add_argument("--policy", default=None,
                       help="scripted policy 'module:function', e.g. "
                            "rlve.envs.tictactoe:minimax_policy")  # fmt: skip
    group.add_argument("--max-model-len", type=int, default=2048, help="vllm: longest sequence")
    group.add_argument(
        "--dtype", default="auto", help="vllm: float32, bfloat16, or auto (bfloat16 where native)"
    )


def engine_kind(args: argparse.Namespace) -> str:
    """The engine the flags ask for, checked for the flags it needs."""
    kind = args.engine or ("scripted" if args.policy else "openai" if args.base_url else "vllm")
    if kind == "scripted" and not args.policy:
        raise UsageError("--engine scripted needs --policy module:function")
    if kind == "openai" and not args.base_url:
        raise UsageError("--engine openai needs --base-url (or $OPENAI_BASE_URL)")
    if kind == "openai" and not args.model:
        raise UsageError("--engine openai needs --model, the name the server serves")
    return kind


def build_engine(args: argparse.Namespace, log_dir: Path | None = None) -> Engine:
    """The engine of `engine_kind(args)`; a vLLM engine must be shut down by the caller, and
    logs to `log_dir/vllm.log` when one is given."""
    kind = engine_kind(args)
    if kind == "scripted":
        return ScriptedEngine(load_policy(args.policy))
    if kind == "openai":
        from rlve.inference.openai_engine import OpenAIEngine

        return OpenAIEngine(args.base_url, args.model, api_key=args.api_key)
    from rlve.config import InferenceConfig
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.models import load_tokenizer, resolve_model_path

    model = args.model or "tiny"
    try:
        tokenizer = load_tokenizer(model)
    except FileNotFoundError as exc:
        raise UsageError(f"--model: {exc}") from exc
    settings = InferenceConfig(dtype=args.dtype, max_model_len=args.max_model_len)
    if log_dir is not None:
        send_vllm_logs_to(log_dir)
    return VLLMEngine(resolve_model_path(model), tokenizer, settings)


def describe_engine(args: argparse.Namespace) -> str:
    kind = engine_kind(args)
    if kind == "scripted":
        return f"scripted {args.policy}"
    if kind == "openai":
        return f"openai {args.model} at {args.base_url}"
    return f"vllm {args.model or 'tiny'}"


async def close_engine(engine: Engine) -> None:
    """Release what the engine holds: vLLM's process, an HTTP client's connections."""
    if hasattr(engine, "aclose"):
        await engine.aclose()
    if hasattr(engine, "shutdown"):
        engine.shutdown()


# ---------------------------------------------------------------- outputs


def metrics_table(summary: dict[str, float]) -> str:
    """The main metrics (and any error counts) that the summary has, one per line."""
    names = [m for m in MAIN_METRICS if m in summary]
    # the rubric's parts (reward/<function>) say where the reward came from
    names[2:2] = sorted(
        m
        for m in summary
        if m.startswith("reward/")
        and m not in (*names, "reward/min", "reward/max")
        and not m.endswith(("/ci95_low", "/ci95_high"))
    )
    names += sorted(m for m in summary if m.startswith("errors/"))
    lines = [f"{'metric':<28} {'value':>10}  95% interval", "-" * 53]
    for name in names:
        line = f"{name:<28} {summary[name]:>10.4f}"
        if f"{name}/ci95_low" in summary:
            line += f"  {summary[f'{name}/ci95_low']:.3f}-{summary[f'{name}/ci95_high']:.3f}"
        lines.append(line)
    return "\n".join(lines)


def default_out_dir(args: argparse.Namespace) -> Path:
    who = args.policy or args.model or "tiny"
    name = f"{args.env}_{who}_{time.strftime('%Y%m%d-%H%M%S')}"
    return Path("runs") / "eval" / name.replace("/", "-").replace(":", "-")


# ---------------------------------------------------------------- the command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evaluate.py",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--env", required=True, help="environment name (rlve.list_environments())")
    parser.add_argument("--env-args", default="{}", help="JSON object of environment arguments")
    add_engine_arguments(parser)
    run = parser.add_argument_group("evaluation")
    run.add_argument("--num-examples", type=int, default=100)
    run.add_argument("--rollouts", type=int, default=1, help="rollouts per example")
    run.add_argument("--seed", type=int, default=0, help="which examples, and sampling seeds")
    run.add_argument("--temperature", type=float, default=1.0)
    run.add_argument("--top-p", type=float, default=1.0)
    run.add_argument("--max-tokens", type=int, default=None,
                     help="most tokens per model turn (default: the environment's)")  # fmt: skip
    run.add_argument("--max-concurrent", type=int, default=64, help="episodes in flight")
    run.add_argument("--time-limit-s", type=float, default=None, help="per-episode time limit")
    run.add_argument("--out", type=Path, default=None,
                     help="output directory (default runs/eval/<env>_<model>_<time>)")  # fmt: skip
    runs = parser.add_argument_group("W&B")
    runs.add_argument("--wandb-mode", choices=WANDB_MODES, default="offline",
                      help="the evaluation's W&B run (under --out/wandb when offline)")  # fmt: skip
    runs.add_argument("--wandb-project", default="rlve", help="W&B project")
    return parser


def check_counts(args: argparse.Namespace) -> None:
    """Range checks of the count flags (UsageError names the flag)."""
    if args.num_examples < 1:
        raise UsageError(f"--num-examples must be >= 1, got {args.num_examples}")
    if args.rollouts < 1:
        raise UsageError(f"--rollouts must be >= 1, got {args.rollouts}")
    if args.max_concurrent < 1:
        raise UsageError(f"--max-concurrent must be >= 1, got {args.max_concurrent}")


def sampling_from_args(env: Environment, args: argparse.Namespace) -> SamplingConfig:
    try:
        return env_sampling(
            env, temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens
        )
    except ValueError as exc:  # SamplingConfig names the bad field and its range
        raise UsageError(f"sampling: {exc}") from exc


async def evaluate_then_close(env, engine, args, sampling, journal) -> EvalResult:
    try:
        return await evaluate_async(
            env,
            engine,
            args.num_examples,
            args.rollouts,
            args.seed,
            sampling=sampling,
            max_concurrent=args.max_concurrent,
            time_limit_s=args.time_limit_s,
            progress=True,
            journal=journal,
        )
    finally:
        await close_engine(engine)


JOURNAL, SETTINGS = "groups.jsonl", "settings.json"
FREE_ON_RESUME = ("out", "max_concurrent", "wandb_mode", "wandb_project")
"""flags an evaluation may be continued with different values of (they change no result)"""


def resume_settings(config: dict[str, Any]) -> dict[str, Any]:
    """What an evaluation continued in the same --out must share (as JSON reads it back)."""
    return json.loads(json.dumps({k: v for k, v in config.items() if k not in FREE_ON_RESUME}))


def refuse_other_settings(out_dir: Path, settings: dict[str, Any]) -> None:
    """UsageError when `out_dir` holds an evaluation made with other settings."""
    path = out_dir / SETTINGS
    if not path.exists():
        return
    before = json.loads(path.read_text())
    keys = sorted(settings.keys() | before.keys())
    changed = [f"{k}: {before.get(k)!r} then, {settings.get(k)!r} now"
               for k in keys if settings.get(k) != before.get(k)]  # fmt: skip
    if changed:
        raise UsageError(
            f"{out_dir} holds an evaluation with other settings ({'; '.join(changed)}): "
            "continue it with the same flags, or choose another --out"
        )


def open_journal(out_dir: Path, settings: dict[str, Any]) -> GroupJournal:
    """The groups an earlier run of this evaluation finished in `out_dir` (none at first)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (out_dir / SETTINGS).exists():
        text = json.dumps(settings, indent=2, sort_keys=True) + "\n"
        write_text_atomically(out_dir / SETTINGS, text)
    return GroupJournal(out_dir / JOURNAL)


def evaluate_from_args(args: argparse.Namespace) -> tuple[EvalResult, Path]:
    """Evaluate as the flags say and write the outputs; returns the result and the out dir."""
    check_counts(args)
    env_args = parse_env_args(args.env_args)
    env = build_env(args.env, env_args)
    sampling = sampling_from_args(env, args)
    description = describe_engine(args)
    out_dir = args.out or default_out_dir(args)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    config.pop("api_key")  # never write a secret into a results folder
    config.update(engine=engine_kind(args), env_args=env_args, sampling=asdict(sampling))
    settings = resume_settings(config)
    refuse_other_settings(out_dir, settings)
    engine = build_engine(args, log_dir=out_dir)
    journal = open_journal(out_dir, settings)
    print(
        f"{args.env} | {description} | {args.num_examples} examples x {args.rollouts} rollouts",
        flush=True,
    )
    if journal.done:
        print(f"continuing {out_dir}: {len(journal.done)} of {args.num_examples} examples "
              "were already played", flush=True)  # fmt: skip
    result = asyncio.run(evaluate_then_close(env, engine, args, sampling, journal))
    summary = {"metrics": result.summary, "config": config}
    write_text_atomically(
        out_dir / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n"
    )
    result.save_rollouts(out_dir / "rollouts.jsonl")
    log_to_wandb(out_dir, args, config, result)
    return result, out_dir


def log_to_wandb(
    out_dir: Path, args: argparse.Namespace, config: dict[str, Any], result: EvalResult
) -> None:
    """The finished evaluation as a W&B run (job_type "eval"): its settings as config, its
    summary metrics, and its first `WANDB_TABLE_ROWS` rollouts as the `rollouts` table."""
    run = start_wandb_run(out_dir, args.wandb_mode, args.wandb_project, out_dir.name, "eval",
                          config)  # fmt: skip
    if run is None:
        return
    rollouts = [t for group in result.groups for t in group.trajectories][:WANDB_TABLE_ROWS]
    try:
        run.log({**result.summary, ROLLOUT_TABLE: rollout_table(rollouts)})
    finally:
        run.finish()


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, evaluate, print the table. Usage errors print one line and exit 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result, out_dir = evaluate_from_args(args)
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(metrics_table(result.summary))
    print(f"\nwrote {out_dir / 'summary.json'} and {out_dir / 'rollouts.jsonl'}")
