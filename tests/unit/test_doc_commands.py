"""The docs' commands and arguments hold: every `python -m rlve.train ...` of README.md,
CONTRIBUTING.md and docs/**/*.md composes (as `--cfg job` would), the tic-tac-toe arguments
docs/usage.md names load and take effect, and docs/training.md's count of environments is
`rlve.list_environments()`'s."""

import re
import shlex
from pathlib import Path

import pytest

import rlve
from rlve.train import load_run_config

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`((?:[^`\n]|\n(?!\n))+)`")  # an inline span may wrap, not cross paragraphs
TRAIN = re.compile(r"-m rlve\.train(?![\w.])")
STOPS = {"|", "||", "&&", ";", "&", ">", "2>&1"}
"""shell words that end the trainer's arguments"""
HYDRA_FLAGS = {"--cfg": 1, "--resolve": 0, "--info": 1, "--help": 0}
"""Hydra's own flags (not overrides) and how many values each takes: `--cfg job` prints the
config that `load_run_config` composes"""
PLACEHOLDERS = {"..."}
"""'...': the doc elides more overrides (the ones a runner prints); the rest must compose"""
EXCEPTIONS = {
    ("docs/architecture.md", "(rank 0: drives the run)"): "a process diagram, not a command",
    ("docs/environments.md", "--config-dir my_configs +experiment=guess"): "the reader's own "
    "config folder (tests/unit/test_registry.py composes one)",
}
"""(document, what follows `-m rlve.train`) -> why it is no command to compose"""


def train_commands(path: Path) -> list[tuple[str, str, str]]:
    """(document:line, the text before `-m rlve.train`, the text after) for each trainer command
    of `path`: in code blocks, continuation lines joined, and in inline code spans."""
    text, name = path.read_text(), str(path.relative_to(ROOT))
    found = []
    for block in FENCE.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).split("\n")
        i = 0
        while i < len(lines):
            start, line = i, lines[i]
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i]
            # a text block may quote a command in backticks (the README's map of the code)
            found += [(f"{name}:{first + start}", line[: m.start()], line[m.end() :].split("`")[0])
                      for m in TRAIN.finditer(line)]  # fmt: skip
            i += 1
    prose = FENCE.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    for span in INLINE.finditer(prose):
        code, line = span.group(1).replace("\n", " "), prose.count("\n", 0, span.start()) + 1
        found += [(f"{name}:{line}", code[: m.start()], code[m.end() :])
                  for m in TRAIN.finditer(code)]  # fmt: skip
    return found


def overrides(rest: str) -> list[str]:
    """The Hydra overrides of a command's words after `rlve.train`."""
    words, chosen, skip = shlex.split(rest, comments=True), [], 0
    for word in words:
        if skip:
            skip -= 1
        elif word in STOPS:
            break
        elif word.startswith("-"):
            skip = HYDRA_FLAGS[word]  # an unknown flag is a KeyError: name it above
        elif word not in PLACEHOLDERS:
            chosen.append(word)
    return chosen


COMMANDS = [found for path in DOCUMENTS for found in train_commands(path)]
CHECKED = [c for c in COMMANDS if (c[0].split(":")[0], c[2].strip()) not in EXCEPTIONS]


def test_the_commands_are_found_in_code_blocks_and_inline():
    training = [where for where, *_ in COMMANDS if where.startswith("docs/training.md:")]
    # the recipe and its --cfg job, the headline's plain-board override (inline), the two ways
    # to choose a loss (inline), three distillations, the CPU run, torchrun (inline), RLVE gym,
    # the fading hints
    assert len(training) == 12
    assert any(where.startswith("README.md:") for where, *_ in COMMANDS)  # the map of the code
    assert len(COMMANDS) - len(CHECKED) == len(EXCEPTIONS)  # each exception is still in a doc


def test_a_command_s_continuation_lines_and_flags_are_read():
    path = ROOT / "docs" / "training.md"
    cpu = next(rest for _, _, rest in train_commands(path) if "trainer.max_steps=5" in rest)
    assert overrides(cpu) == ["+experiment=tictactoe_course", "stop_if_unplayable=false",
                              "trainer.max_steps=5", "rollout.groups_per_step=8",
                              "rollout.max_tokens=48", "output_dir=runs/cpu"]  # fmt: skip
    assert overrides(" +experiment=tictactoe_cispo --cfg job  # print") == [
        "+experiment=tictactoe_cispo"
    ]
    assert overrides(" ... a=1 | tee log") == ["a=1"]


@pytest.mark.parametrize("where, before, rest", CHECKED, ids=[c[0] for c in CHECKED])
def test_each_documented_trainer_command_composes(where, before, rest, monkeypatch):
    # torchrun's ranks share the machine's GPUs: the placement check counts them
    ranks = re.search(r"--nproc-per-node (\d+)", before)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", ranks.group(1) if ranks else "1")
    if where.startswith("docs/scaling.md"):  # a page of GPU layouts: on a machine of 8 GPUs
        monkeypatch.setattr("rlve.sync.placement.gpu_count", lambda: 8)
    load_run_config(overrides(rest))


# ---------------------------------------------------------------- usage.md's environment arguments

USAGE_ARGS = {
    # "random" and "optimal": min_random_move_prob and max_random_move_prob both 1.0 or 0.0
    "min_random_move_prob": 1.0,
    "max_random_move_prob": 1.0,
    # evaluate.py's --env-args '{"rules": "short", "board": "threats"}'; the demo's board
    "rules": "short",
    "board": "threats",
    # +env.args.tictactoe.mistake_penalty=0.2, regret_penalty=w
    "mistake_penalty": 0.2,
    "regret_penalty": 0.5,
}
SELF_PLAY_ARGS = {"opponent": "self", "scripted_fraction": 0.25}
"""+env.args.tictactoe.opponent=self and scripted_fraction (docs/usage.md, "Self-play")"""


def test_usage_md_names_only_tictactoe_arguments_and_each_is_loaded_here():
    import inspect

    from rlve.envs.tictactoe.loading import load_environment

    parameters = set(inspect.signature(load_environment).parameters)
    usage = (ROOT / "docs" / "usage.md").read_text()
    named = set(re.findall(r"env\.args\.tictactoe\.(\w+)=", usage))
    for env_args in re.findall(r"--env-args '(\{.*?\})'", usage):
        named |= set(re.findall(r'"(\w+)":', env_args))
    # the opponent's strength, once named by an argument that does not exist (random_move_prob)
    named |= set(re.findall(r"\b\w*random_move\w*", usage))
    assert named and named <= parameters
    # "seed" is every environment's dataset seed; usage.md says it of evaluate.py and sampling
    mentioned = {p for p in parameters - {"seed"} if re.search(rf"\b{p}\b", usage)}
    assert mentioned == set(USAGE_ARGS) | set(SELF_PLAY_ARGS)


def test_the_arguments_usage_md_names_take_effect():
    from rlve.envs.tictactoe.prompts import BOARDS, OPEN_LINES_RULE

    env = rlve.load_environment("tictactoe", num_examples=8, **USAGE_ARGS)
    examples = [env.example(i) for i in range(8)]
    assert env.random_move_range == (1.0, 1.0)
    assert {e.info["random_move_prob"] for e in examples} == {1.0}  # every game's opponent
    assert env.rules == "short" and env.wording is BOARDS["threats"]
    assert examples[0].prompt[0]["content"] == BOARDS["threats"].system_prompts["short"]
    assert examples[0].prompt[0]["content"].endswith(OPEN_LINES_RULE)  # the threats board's rule
    weights = {f.name: f.weight for f in env.rubric.funcs}
    assert weights["mistakes"] == 0.2 and weights["regrets"] == 0.5
    self_play = rlve.load_environment("tictactoe", num_examples=8, **SELF_PLAY_ARGS)
    assert (self_play.opponent, self_play.scripted_fraction) == ("self", 0.25)


# ---------------------------------------------------------------- training.md's environment count


def test_training_md_counts_the_environments_list_environments_has():
    text = " ".join((ROOT / "docs" / "training.md").read_text().split())
    match = re.search(r"`list_environments\(\)` has (\d+) names .*?: (\d+) `rlve-gym/<Identifier>`,"
                      r" (\d+) `reasoning-gym/<task>`, (\d+) of our own, .*? and (\d+) built-ins",
                      text)  # fmt: skip
    total, gym, reasoning, ours, builtins = map(int, match.groups())
    names = rlve.list_environments()
    assert len(names) == total == gym + reasoning + ours + builtins
    assert sum(n.startswith("rlve-gym/") for n in names) == gym
    assert sum(n.startswith("reasoning-gym/") for n in names) == reasoning
    assert sum(n.startswith("rlve/") for n in names) == ours
