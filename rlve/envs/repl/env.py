"""PythonREPLEnv: the model works in a persistent Python REPL, one worker process per episode.

Each model turn's fenced code blocks (```python ... ```) run in order; the reply shows what each
printed, the value of its last expression and its traceback, each cut to a budget. Variables
persist across turns. The episode ends when the code calls `FINAL(answer)` (or assigns
`final_answer`), when a turn has no code block, or when a cell breaches a limit (the worker is
killed; stop reason `repl_<breach>`).

Recursive-LM use: the example's long input is a REPL variable (`info` keys named in `variables`)
rather than prompt text, and `llm(prompt)` / `llm_batch(prompts)` inside the REPL ask the
episode's own policy (`state["generate"]`, given by the episode runner), within a call and token
budget. Every sub-call is recorded in `state["sub_calls"]` (prompt, answer, tokens); with
`train_on_sub_calls` they are also trained on, as side sequences of the episode with its
advantage.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence

from rlve.envs.base import MultiTurnEnv, State
from rlve.envs.parsers import assistant_texts
from rlve.envs.repl.process import CellResult, REPLLimits, REPLWorker
from rlve.types import Message

CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def code_blocks(text: str) -> list[str]:
    """The fenced Python code blocks of a message, in order."""
    return [block for block in CODE_BLOCK.findall(text) if block.strip()]


def render_cell(result: CellResult, limit: int) -> str:
    """A cell's result as the model reads it."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
        if result.stdout_chars > len(result.stdout):
            parts.append(f"[output cut: {limit} of {result.stdout_chars} characters shown]")
    if result.value is not None:
        parts.append(f"=> {result.value}")
    if result.error:
        parts.append(result.error.rstrip("\n"))
    return "\n".join(parts) or "(no output)"


class PythonREPLEnv(MultiTurnEnv):
    """A multi-turn environment whose actions are Python cells.

    Args (besides MultiTurnEnv's):
        limits: what each cell and worker may use (REPLLimits).
        variables: `info` keys loaded into the REPL as variables of the same name.
        max_llm_calls: llm()/llm_batch() prompts per episode.
        max_llm_tokens: tokens all sub-calls of an episode may generate together.
        llm_max_tokens: most tokens of one sub-call's answer.
        train_on_sub_calls: train on the sub-calls' answers too (token-exact engines only).
    """

    def __init__(self, dataset, *, limits: REPLLimits = REPLLimits(),
                 variables: Sequence[str] = ("context",), max_llm_calls: int = 8,
                 max_llm_tokens: int = 2048, llm_max_tokens: int = 256,
                 train_on_sub_calls: bool = False, **kwargs):  # fmt: skip
        super().__init__(dataset, **kwargs)
        self.limits = limits
        self.variables = tuple(variables)
        self.max_llm_calls = max_llm_calls
        self.max_llm_tokens = max_llm_tokens
        self.llm_max_tokens = llm_max_tokens
        self.train_side_calls = train_on_sub_calls
        """read by the episode runner: keep the sub-calls' tokens with the trajectory"""

    async def setup_state(self, state: State) -> None:
        state.update(repl_cells=0, repl_errors=0, repl_seconds=0.0, sub_calls=[], llm_tokens=0)
        start = time.perf_counter()
        state["repl"] = await REPLWorker.start(self.limits)
        for name in self.variables:
            if name in state["info"]:
                await state["repl"].set_variable(name, state["info"][name])
        state["repl_start_seconds"] = time.perf_counter() - start

    async def env_response(self, messages: list[Message], state: State) -> list[Message]:
        blocks = code_blocks(assistant_texts(messages[-1:])[0] if messages else "")
        if not blocks:
            self.end_episode(state, "no_code")
            return []
        outputs = []
        for code in blocks:
            start = time.perf_counter()
            result = await state["repl"].run(code, lambda prompts: self._llm(prompts, state))
            state["repl_seconds"] += time.perf_counter() - start
            state["repl_cells"] += 1
            state["repl_errors"] += result.error is not None
            if result.breach:
                state["repl_breach"] = result.breach
                self.end_episode(state, f"repl_{result.breach}")
                return [{"role": "user", "content": f"The REPL was stopped ({result.breach})."}]
            outputs.append(render_cell(result, self.limits.max_output_chars))
            if result.final is not None:
                state["final_answer"] = result.final
                self.end_episode(state, "final_answer")
                return []
        text = "\n\n".join(f"Out[{i + 1}]:\n{output}" for i, output in enumerate(outputs))
        return [{"role": "user", "content": text}]

    async def _llm(self, prompts: list[str], state: State) -> list[str]:
        """The REPL's llm_batch: each prompt as a one-message chat to the episode's engine."""
        calls = len(state["sub_calls"])
        if calls + len(prompts) > self.max_llm_calls:
            raise RuntimeError(f"llm call budget spent: {calls} of {self.max_llm_calls} used, "
                               f"{len(prompts)} more asked")  # fmt: skip
        room = self.max_llm_tokens - state["llm_tokens"]
        if room < 1:
            raise RuntimeError(f"llm token budget spent ({self.max_llm_tokens} tokens)")
        pending = []
        for i, prompt in enumerate(prompts):
            seed = (state["seed"] * 1000 + calls + i) * 7 + 1  # apart from the turns' seeds
            pending.append(state["generate"]([{"role": "user", "content": prompt}],
                                                max_tokens=min(self.llm_max_tokens, room),
                                                seed=seed))  # fmt: skip
        generations = await asyncio.gather(*pending)
        for prompt, generation in zip(prompts, generations, strict=True):
            tokens = len(generation.token_ids)
            state["llm_tokens"] += tokens
            state["sub_calls"].append({"prompt": prompt, "answer": generation.text,
                                       "tokens": tokens})  # fmt: skip
        return [g.text for g in generations]

    async def cleanup_state(self, state: State) -> None:
        worker = state.pop("repl", None)
        if worker is not None:
            state["repl_network_isolated"] = worker.network_isolated
            state["repl_isolation"] = worker.isolation
            await worker.close()

    def episode_metrics(self, state: State) -> dict[str, float]:
        return {
            "repl/cells": float(state.get("repl_cells", 0)),
            "repl/errors": float(state.get("repl_errors", 0)),
            "repl/breaches": float("repl_breach" in state),
            "repl/seconds": float(state.get("repl_seconds", 0.0)),
            "repl/start_seconds": float(state.get("repl_start_seconds", 0.0)),
            "repl/llm_calls": float(len(state.get("sub_calls", []))),
            "repl/llm_tokens": float(state.get("llm_tokens", 0)),
            "repl/network_isolated": float(state.get("repl_network_isolated", False)),
            **{f"repl/isolation_{name}": float(granted)
               for name, granted in state.get("repl_isolation", {}).items()},
        }  # fmt: skip
