"""PythonREPLEnv with real worker processes: hand-checkable episodes, the llm() callback and its
budget, and hostile code (fork, endless loops, sleeps, huge allocations and prints, files
outside the working directory, the network), with no process left behind."""

import asyncio
import re

import psutil
import pytest

import rlve
from rlve.envs.repl import PythonREPLEnv, REPLLimits
from rlve.envs.repl.env import code_blocks
from rlve.envs.repl.ledger import make_ledger
from rlve.rollout import EpisodeSettings, GroupJob, ScriptedEngine, play_groups
from rlve.rollout.problems import is_adaptive

ROWS = [{"question": "Work in the REPL.", "answer": "42", "info": {"context": "abc"}}]
SOLVER = """```python
import re
pairs = re.findall(r"account (\\w+) received (\\d+)", context)
FINAL(sum(int(n) for a, n in pairs if a == "{account}"))
```"""


def py(code: str) -> str:
    return f"```python\n{code}\n```"


def play(env, policy, group_size=1, example=0, **settings):
    jobs = [GroupJob(env, env.example(example), seed=0)]
    (group,) = asyncio.run(
        play_groups(ScriptedEngine(policy), jobs, group_size, EpisodeSettings(**settings))
    )
    return group.trajectories


def scripted(*replies):
    def policy(messages):
        turn = sum(m["role"] == "assistant" for m in messages)
        return replies[min(turn, len(replies) - 1)]

    return policy


def outputs(trajectory):
    return [m["content"] for m in trajectory.completion if m["role"] == "user"]


def workers():
    """REPL worker processes still alive (other tests' helper processes are not counted)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "rlve/envs/repl/worker.py" in " ".join(process.cmdline()):
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


def test_ledger_has_the_lines_and_facts_its_difficulty_says():
    for difficulty in (0, 2):
        text, account, total, lines = make_ledger(seed=4, difficulty=difficulty)
        assert lines == 40 * 2**difficulty == len(text.splitlines())
        mine = [
            int(n) for a, n in re.findall(r"account (\w+) received (\d+)", text) if a == account
        ]
        assert len(mine) == difficulty + 1 and sum(mine) == total


def test_a_scripted_solver_sums_the_ledger_in_the_repl():
    env = rlve.load_environment("python_repl/ledger", num_examples=2, difficulties=[1])
    account = re.search(r"account (\w+) receive", env.example(0).prompt[-1]["content"]).group(1)
    (t,) = play(env, scripted(SOLVER.format(account=account)))
    assert t.stop_reason == "final_answer" and t.reward == 1.0
    assert t.metrics["repl/cells"] == 1.0 and t.metrics["repl/errors"] == 0.0
    (wrong,) = play(env, scripted(py("FINAL(7)")))
    assert wrong.stop_reason == "final_answer" and wrong.reward == 0.0
    (silent,) = play(env, scripted("I cannot tell."))
    assert silent.stop_reason == "no_code" and silent.reward == 0.0
    assert workers() == []


def test_variables_persist_across_turns_and_outputs_are_shown():
    env = PythonREPLEnv(ROWS)
    turns = [py("x = 5\nprint('set', x)"), py("x * 2"), py("1/0"), py("final_answer = x + 37")]
    (t,) = play(env, scripted(*turns))
    assert outputs(t) == ["Out[1]:\nset 5", "Out[1]:\n=> 10",
                              'Out[1]:\n  File "<cell>", line 1, in <module>\n'
                              "ZeroDivisionError: division by zero"]  # fmt: skip
    assert t.stop_reason == "final_answer" and t.metrics["repl/errors"] == 1.0


def test_nothing_leaks_between_episodes():
    env = PythonREPLEnv(ROWS)
    play(env, scripted(py("secret = 1\nopen('note.txt', 'w').write('x')"), "done"))
    (t,) = play(env, scripted(py("import os\n('secret' in globals(), os.listdir('.'))"), "done"))
    assert outputs(t)[0] == "Out[1]:\n=> (False, [])"


def test_llm_calls_reach_the_engine_within_their_budget():
    env = PythonREPLEnv(ROWS, max_llm_calls=2)

    def policy(messages):
        if messages[0]["content"] in ("hi", "a", "b"):  # a sub-call: the prompt alone
            return "echo: " + messages[0]["content"]
        return scripted(py("llm('hi')"), py("llm_batch(['a', 'b'])"), "done")(messages)

    (t,) = play(env, policy)
    assert outputs(t)[0] == "Out[1]:\n=> 'echo: hi'"
    assert outputs(t)[1].endswith("RuntimeError: llm call budget spent: 1 of 2 used, 2 more asked")
    assert t.metrics["repl/llm_calls"] == 1.0


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("import os\nos.fork()", "Refused: os.fork is not allowed in this REPL"),
        ("import subprocess\nsubprocess.run(['ls'])", "Refused: subprocess.Popen is not allowed"),
        ("open('/etc/hostname').read()", "Refused: access to '/etc/hostname' is not allowed"),
        ("open('../escape.txt', 'w')", "Refused: access to '../escape.txt' is not allowed"),
        ("import socket\nsocket.socket().connect(('127.0.0.1', 9))", "Refused: socket.__new__"),
        ("import ctypes\nctypes.CDLL(None)", "Refused: ctypes.dlopen is not allowed"),
        (
            "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (10**6, 10**6))",
            "Refused: resource.setrlimit is not allowed",
        ),
        ("x = bytearray(4 * 1024**3)", "MemoryError: the cell went over the REPL's memory limit"),
        ("with open('big.bin', 'wb') as f:\n    f.write(b'x' * 20_000_000)", "File too large"),
    ],
)
def test_hostile_cells_get_errors_and_the_repl_goes_on(code, expected):
    env = PythonREPLEnv(ROWS, limits=REPLLimits(memory_mb=512))
    (t,) = play(env, scripted(py(code), py("1 + 1"), "done"))
    assert expected in outputs(t)[0]
    assert outputs(t)[1] == "Out[1]:\n=> 2"
    assert workers() == []


def test_the_worker_sees_none_of_the_runs_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("RLVE_SERVE_SECRET", "s3cret")
    env = PythonREPLEnv(ROWS)
    (t,) = play(env, scripted(py("import os\nsorted(os.environ)"), "done"))
    assert outputs(t)[0] == "Out[1]:\n=> ['HOME', 'LANG', 'PATH', 'TMPDIR']"


def test_huge_output_is_cut_to_the_budget():
    env = PythonREPLEnv(ROWS, limits=REPLLimits(max_output_chars=100))
    (t,) = play(env, scripted(py("print('x' * 10**6)"), "done"))
    assert (
        outputs(t)[0] == "Out[1]:\n" + "x" * 100 + "\n[output cut: 100 of 1000001 characters shown]"
    )


@pytest.mark.parametrize(
    ("code", "limits", "reason"),
    [
        ("while True: pass", REPLLimits(cpu_s=1, wall_s=60), "repl_cpu_time"),
        ("import time\ntime.sleep(60)", REPLLimits(wall_s=1), "repl_wall_time"),
    ],
)
def test_a_cell_past_its_time_limit_ends_the_episode_and_the_worker(code, limits, reason):
    env = PythonREPLEnv(ROWS, limits=limits)
    (t,) = play(env, scripted(py(code), "never played"))
    assert t.stop_reason == reason and t.metrics["repl/breaches"] == 1.0
    assert workers() == []


def test_the_worker_dies_with_an_episode_that_times_out():
    env = PythonREPLEnv(ROWS, limits=REPLLimits(wall_s=60))
    (t,) = play(env, scripted(py("import time\ntime.sleep(30)")), time_limit_s=1.0)
    assert t.stop_reason == "timeout"
    assert workers() == []


def test_code_blocks_and_the_curriculum_hook():
    assert code_blocks("a\n```python\nx = 1\n```\nb\n```\ny\n```\n```py\n \n```") == [
        "x = 1\n",
        "y\n",
    ]
    env = rlve.load_environment("python_repl/ledger", num_examples=1)
    assert is_adaptive(env)
    example = env.make_example(seed=9, difficulty=3)
    assert len(example.info["context"].splitlines()) == 320 and example.info["difficulty"] == 3


def test_sub_calls_become_side_sequences_when_trained_on(tiny_tokenizer):
    def policy(messages):
        if messages[0]["content"] == "hi":
            return "echo"
        return scripted(py("llm('hi')"), "done")(messages)

    for train in (False, True):
        env = PythonREPLEnv(ROWS, train_on_sub_calls=train)
        jobs = [GroupJob(env, env.example(0), seed=0)]
        engine = ScriptedEngine(policy, tokenizer=tiny_tokenizer)
        (group,) = asyncio.run(play_groups(engine, jobs, 1, EpisodeSettings()))
        (t,) = group.trajectories
        assert t.metrics["repl/llm_calls"] == 1.0
        if not train:
            assert t.side_sequences == []
            continue
        (side,) = t.side_sequences
        answer = [i for i, m in zip(side.token_ids, side.loss_mask, strict=True) if m]
        assert tiny_tokenizer.decode(answer) == "echo<|im_end|>"
        assert side.loss_mask[0] == 0 and len(side.sampler_logprobs) == len(side.token_ids)
