"""Every built-in environment against a policy whose answers are hostile text.

Over 2,000 episodes, at least 50 in each environment, a scripted policy answers with lone
surrogates, NUL and control characters, ANSI and OSC terminal sequences, bidirectional
overrides, 1 MB answers, deeply nested brackets, malformed tool calls and forged REPL protocol
lines. Each environment is played by a text-only engine (the hostile text reaches its parsers
as written) and a token-exact one on the tiny tokenizer. Nothing may stop the evaluation: an
episode that breaks is that episode's fault, counted with its kind; nothing is written outside
the run's folder, and no REPL worker is left behind.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import rlve
from rlve.rollout import ScriptedEngine
from rlve.rollout.faults import FAULT_KINDS

REPO = Path(__file__).resolve().parents[2]

FORGED_REPL_LINE = ("```python\nchannel = FINAL.__self__.channel_out\n"
                    "channel.write('[' * 200000 + '\\n')\nchannel.flush()\n```")  # fmt: skip
HOSTILE = {
    "surrogate": "<think>\ud800</think><move>\udfff4</move><answer>\ud83d</answer>",
    "control": "\x00\x01\x02<answer>\x00\x08\x7f</answer>\x1f<move>\x00</move>",
    "terminal": ("\x1b[2K\rINFO rlve.loop: step 9 reward 1.000\x1b]0;owned\x07"
                 "\x1b]52;c;ZXZpbA==\x07"),
    "bidi": "\u202e<answer>\u2066cba\u2069</answer>\u202d<move>\u202e4</move>",
    "megabyte": "<think>" + "A" * 1_000_000 + "</think><answer>" + "9" * 1000,
    "nesting": "[" * 100_000 + "{" * 100_000 + "<move>" * 10_000,
    "tool_calls": ('<tool_call>{"name": "calculate", "arguments": {"expression": "'
                   + "(" * 50_000 + '"}}</tool_call><tool_call>{"name": ' + "[" * 10_000
                   + "</tool_call><tool_call>not json</tool_call><tool_call>"
                   + '{"name": "search", "arguments": "\ud800"}</tool_call>'),
    "repl_protocol": FORGED_REPL_LINE,
    "repl_output": "```python\nprint('\\ud800\\x1b[2K' * 1000)\nFINAL('\\udfff' * 5000)\n```",
}  # fmt: skip
"""kind -> an answer; the policy cycles through them"""

MEGABYTE_TOKENIZED = "<think>" + "A" * 20_000
"""the token-exact engine's stand-in for the 1 MB answer (cut to max_tokens anyway)"""

ENVIRONMENTS = {
    "tictactoe": ({}, 96),
    "reverse_text": ({}, 96),
    "double_check": ({}, 96),
    "calculator": ({}, 96),
    "wiki_search": ({}, 64),
    "python_repl/ledger": ({}, 32),
    "mcp/notes": ({"lifetime": "shared"}, 16),
    "rlve-gym/AdditionTable": ({}, 32),
}
"""name -> (loader arguments, examples per engine); each example is played twice per engine"""


def hostile_policy(tried: Counter, tokenized: bool):
    kinds = itertools.cycle(HOSTILE)

    def policy(messages) -> str:
        kind = next(kinds)
        tried[kind] += 1
        if tokenized and kind == "megabyte":
            return MEGABYTE_TOKENIZED
        return HOSTILE[kind]

    return policy


def repl_folders() -> set[str]:
    return {name for name in os.listdir("/tmp") if name.startswith("rlve-repl-")}


def repository_state() -> list[str]:
    """the repository's changed and ignored paths, less the bytecode caches that this test's
    own imports write (loading an environment imports its modules for the first time)"""
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    return [line for line in status.splitlines() if not line.endswith("__pycache__/")]


@pytest.fixture(scope="module")
def played(tmp_path_factory, tiny_tokenizer):
    run_folder = tmp_path_factory.mktemp("hostile_run")
    before = repository_state(), repl_folders()
    cwd = os.getcwd()
    os.chdir(run_folder)
    tried: Counter = Counter()
    results = {}
    try:
        for name, (arguments, examples) in ENVIRONMENTS.items():
            env = rlve.load_environment(name, **arguments)
            for tokenized in (False, True):
                engine = ScriptedEngine(hostile_policy(tried, tokenized),
                                        tiny_tokenizer if tokenized else None)  # fmt: skip
                result = rlve.evaluate(env, engine, examples, 2, seed=1, time_limit_s=120)
                results[name, tokenized] = [t for g in result.groups for t in g.trajectories]
    finally:
        os.chdir(cwd)
    print("answers tried, by kind:", dict(tried))
    return results, tried, before, run_folder


def test_every_environment_plays_every_hostile_episode_to_an_end(played):
    results, tried, _, _ = played
    episodes = {name: 0 for name in ENVIRONMENTS}
    faults: Counter = Counter()
    for (name, _), trajectories in results.items():
        episodes[name] += len(trajectories)
        for t in trajectories:
            assert t.stop_reason, (name, t)
            if t.fault is not None:
                assert t.fault.kind in FAULT_KINDS, t.fault
                faults[name, t.fault.kind] += 1
            if t.stop_reason in ("env_error", "engine_error", "timeout"):
                assert t.fault is not None and t.fault.kind == t.stop_reason
    print("episodes:", episodes, "faults:", dict(faults))
    assert sum(episodes.values()) >= 2000 and min(episodes.values()) >= 50
    assert set(tried) == set(HOSTILE)
    # the model's text never breaks an environment: only the token-exact stand-in engine
    # fails (its tokenizer refuses the surrogates a real model cannot write), as engine_error
    assert {kind for _, kind in faults} == {"engine_error"}


def test_nothing_is_written_outside_the_run_folder_and_no_worker_is_left(played):
    _, _, (repository, folders), _ = played
    assert repository_state() == repository
    assert repl_folders() <= folders


def test_a_forged_repl_line_ends_its_episode_as_the_model_s_breach(played):
    results, _, _, _ = played
    stops = Counter(t.stop_reason for t in results["python_repl/ledger", False])
    assert stops["repl_protocol"] > 0
