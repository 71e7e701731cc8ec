"""The README's Python examples run and give the numbers the README shows."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_readme_examples_run_and_their_commented_values_hold():
    namespace: dict = {}
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own README
        for line in block.splitlines():
            match = re.match(r"^(result\.summary\[[^\]]+\])\s+# ([-\d.]+)$", line)
            if match:
                assert eval(match.group(1), namespace) == pytest.approx(float(match.group(2)))
    assert "env" in namespace and "result" in namespace
