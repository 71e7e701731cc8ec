"""Episodes per second of the tool environments, and where the time goes.

1. Scripted engine: each environment with a scripted policy that uses its tools (mcp/notes and
   python_repl/ledger with their reference solvers; wiki_search with search, view, read, answer).
2. vLLM on the CPU with --model (default the tiny model, whose untrained answers mostly end an
   episode at once, so this measures per-episode overheads such as a server per rollout): the
   wall time, the time summed over episodes inside tools and tool start-up, and inside vLLM's
   generate.

    .venv/bin/python benchmarks/bench_tool_envs.py [--episodes 64] [--model smollm2-135m]
        [--no-vllm]
"""

from __future__ import annotations

import argparse
import json
import time

import rlve
from rlve import ScriptedEngine
from rlve.envs.mcp.notes import reference_policy as notes_policy
from rlve.envs.repl.ledger import reference_policy as ledger_policy

ENVS = {
    "mcp/notes": {"num_notes": 6, "lifetime": "per_rollout"},
    "mcp/notes (shared)": {"num_notes": 6, "lifetime": "shared"},
    "wiki_search": {"difficulties": [0, 1, 2]},
    "python_repl/ledger": {"difficulties": [0, 2, 4]},
}
TOOL_SECONDS = ("tools/seconds", "mcp/start_seconds", "repl/seconds", "repl/start_seconds")


def wiki_policy(messages):
    """search -> view the top page's sections -> read its first section -> answer."""
    last = messages[-1]
    if last["role"] == "user":
        call = {"name": "search_pages", "arguments": {"query": last["content"]}}
    elif last["name"] == "search_pages":
        page = str(last["content"]).split(":")[0]
        call = {"name": "view_sections", "arguments": {"page_id": page}}
    elif last["name"] == "view_sections":
        section = str(last["content"]).split(":")[0]
        call = {"name": "read_section", "arguments": {"section_id": section}}
    else:
        return "<answer>unknown</answer>"
    return f"<tool_call>{json.dumps(call)}</tool_call>"


POLICIES = {"mcp/notes": notes_policy, "wiki_search": wiki_policy,
            "python_repl/ledger": ledger_policy}  # fmt: skip


class TimedEngine:
    """Wraps an engine and sums the seconds its generate calls take."""

    def __init__(self, engine):
        self.engine, self.tokenizer, self.seconds = engine, engine.tokenizer, 0.0

    async def generate(self, request):
        start = time.perf_counter()
        try:
            return await self.engine.generate(request)
        finally:
            self.seconds += time.perf_counter() - start


def load(label: str, episodes: int):
    return rlve.load_environment(label.split(" ")[0], num_examples=episodes, **ENVS[label])


def run(env, engine, episodes: int, sampling=None) -> tuple[float, float, dict[str, float]]:
    """(wall seconds, tool seconds summed over episodes, summary)."""
    start = time.perf_counter()
    result = rlve.evaluate(env, engine, episodes, max_concurrent=16, sampling=sampling)
    wall = time.perf_counter() - start
    trajectories = [t for g in result.groups for t in g.trajectories]
    tool = sum(t.metrics.get(key, 0.0) for t in trajectories for key in TOOL_SECONDS)
    return wall, tool, result.summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--no-vllm", action="store_true")
    parser.add_argument("--model", default="tiny", help="vLLM's model: tiny, smollm2-135m, a path")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="vLLM: most tokens per turn (default: the environment's)")  # fmt: skip
    args = parser.parse_args()
    print(f"scripted engine, {args.episodes} episodes, at most 16 at a time")
    print(f"{'environment':<22}{'episodes/s':>11}{'reward':>8}{'tool s (sum)':>14}")
    for label in ENVS:
        env = load(label, args.episodes)
        policy = POLICIES[label.split(" ")[0]]
        wall, tool, summary = run(env, ScriptedEngine(policy), args.episodes)
        print(
            f"{label:<22}{args.episodes / wall:>11.1f}{summary['reward/mean']:>8.2f}{tool:>14.1f}"
        )
        getattr(env, "close", lambda: None)()
    if args.no_vllm:
        return
    from rlve.config import InferenceConfig
    from rlve.inference.engine import SamplingConfig
    from rlve.inference.vllm_engine import VLLMEngine
    from rlve.models import load_tokenizer, resolve_model_path

    path = resolve_model_path(args.model)
    print(f"\nvLLM (CPU), {args.model}, {args.episodes} episodes, temperature 1.0")
    print(
        f"{'environment':<22}{'wall s':>8}{'generate s (sum)':>18}{'tool s (sum)':>14}{'turns':>7}"
    )
    with VLLMEngine(path, load_tokenizer(path), InferenceConfig(max_model_len=2048)) as vllm:
        for label in ENVS:
            env, engine = load(label, args.episodes), TimedEngine(vllm)
            tokens = args.max_tokens or env.sampling.get("max_tokens", 128)
            sampling = SamplingConfig(temperature=1.0, max_tokens=tokens)
            wall, tool, summary = run(env, engine, args.episodes, sampling)
            turns = summary["episode/turns_mean"]
            print(f"{label:<22}{wall:>8.1f}{engine.seconds:>18.1f}{tool:>14.1f}{turns:>7.2f}")
            getattr(env, "close", lambda: None)()


if __name__ == "__main__":  # vLLM starts processes that re-import this file
    main()
