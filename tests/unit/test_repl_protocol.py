"""The REPL worker's pipe is the cell's to write: every line the parent reads is hostile input.

A cell reaches the worker's channel through the bound methods in its namespace
(`FINAL.__self__.channel_out`) and writes lines of its choosing. Each forged line must end the
episode as the model's breach (`repl_protocol`, the worker killed), never crash the parent, and
never let more through than the limits say."""

from __future__ import annotations

import asyncio
import json

import pytest
from test_python_repl import ROWS, outputs, play, py, scripted, workers

from rlve.envs.repl import PythonREPLEnv, REPLLimits
from rlve.envs.repl.process import REPLWorker, read_limit

FORGE = """
channel = FINAL.__self__.channel_out
channel.write({line} + "\\n")
channel.flush()
import time
time.sleep(0.5)
"""

RESULT = {"op": "result", "stdout": "", "stdout_chars": 0, "value": None, "error": None,
          "final": None}  # fmt: skip

FORGED_LINES = {
    "extra_key": json.dumps({**RESULT, "admin": True}),
    "no_op": json.dumps({"stdout": "hi"}),
    "unknown_op": json.dumps({"op": "shutdown"}),
    "wrong_type": json.dumps({**RESULT, "stdout_chars": "many"}),
    "bool_for_int": json.dumps({**RESULT, "stdout_chars": True}),
    "not_json": "{'op': 'result'",
    "deep_nesting": "[" * 200_000,
    "output_past_the_cap": json.dumps({**RESULT, "stdout": "x" * 4_000_008}),
    "final_past_the_cap": json.dumps({**RESULT, "final": "9" * 5_000}),
    "llm_with_image_content": json.dumps({"op": "llm", "prompts": [
        [{"type": "image_url", "image_url": {"url": "http://10.0.0.1/x.png"}}]]}),
    "llm_with_too_many_prompts": json.dumps({"op": "llm", "prompts": ["hi"] * 17}),
    "llm_with_a_long_prompt": json.dumps({"op": "llm", "prompts": ["x" * 8001]}),
    "ok_while_a_cell_runs": json.dumps({"op": "ok"}),
}  # fmt: skip
"""name -> the line the cell writes on the worker's channel"""


@pytest.mark.parametrize("name", sorted(FORGED_LINES))
def test_a_forged_line_ends_the_episode_as_a_protocol_breach(name):
    env = PythonREPLEnv(ROWS)
    line = FORGED_LINES[name]
    (t,) = play(env, scripted(py(FORGE.format(line=repr(line))), py("'alive'"), "done"))
    assert t.stop_reason == "repl_protocol", outputs(t)
    assert outputs(t) == ["The REPL was stopped (protocol)."]
    assert t.fault is None  # the model's doing: trained on, not left out as a fault
    assert workers() == []


def test_a_line_past_the_read_limit_is_a_breach_not_a_crash():
    limit = read_limit(REPLLimits())
    assert limit == 12 * 16 * 8000 + 4096  # the llm call's prompts are the longest message
    forge = FORGE.format(line=f"'x' * {limit + 1}")
    (t,) = play(PythonREPLEnv(ROWS), scripted(py(forge), "done"))
    assert t.stop_reason == "repl_protocol"
    assert workers() == []


def test_a_final_answer_keeps_the_output_cap():
    async def final_of(code: str) -> str | None:
        worker = await REPLWorker.start(REPLLimits(max_output_chars=100))
        try:
            return (await worker.run(code, on_llm=None)).final
        finally:
            await worker.close()

    assert asyncio.run(final_of("FINAL('9' * 12 * 1024 * 1024)")) == "9" * 100
    assert asyncio.run(final_of("final_answer = 'x' * 101")) == "x" * 100


def test_all_the_cells_of_an_episode_share_one_wall_clock():
    """Each cell sleeps 1.5 s, under its own 5 s; the second takes the episode past its 2 s."""
    env = PythonREPLEnv(ROWS, limits=REPLLimits(wall_s=5, episode_wall_s=2))
    sleep = py("import time\ntime.sleep(1.5)")
    (t,) = play(env, scripted(sleep, sleep, "done"))
    assert t.stop_reason == "repl_wall_time" and t.num_turns == 2
    assert workers() == []
