"""The Python examples of the README and the environment guide run and give the numbers they
show (a line `expression  # value` is checked)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ["README.md", "docs/environments.md"]


def python_blocks(document: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", document.read_text(), re.DOTALL)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_examples_run_and_their_commented_values_hold(name):
    document = ROOT / name
    blocks = python_blocks(document)
    assert blocks, f"{name} has no python example"
    namespace: dict = {}
    checked = 0
    for block in blocks:
        exec(compile(block, str(document), "exec"), namespace)  # noqa: S102 - our own docs
        for line in block.splitlines():
            match = re.match(r"^(result\.summary\[[^\]]+\])\s+# ([-\d.]+)$", line)
            if match:
                assert eval(match.group(1), namespace) == pytest.approx(float(match.group(2)))
                checked += 1
    assert checked, f"{name}: no `result.summary[...]  # value` line was checked"


def test_the_trajectory_the_readme_describes_has_the_fields_it_names():
    """The README's `# a Trajectory: prompt, completion, ...` comment names real fields."""
    from dataclasses import fields

    from rlve.types import Trajectory

    match = re.search(r"# a Trajectory: (.+)$", (ROOT / "README.md").read_text(), re.MULTILINE)
    named = [name.strip() for name in match.group(1).split(",")]
    assert named == ["prompt", "completion", "reward", "metrics", "stop_reason"]
    assert set(named) <= {f.name for f in fields(Trajectory)}
