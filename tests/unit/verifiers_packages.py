"""The verifiers environment packages of tests/fixtures/verifiers_envs, installed with pip (as
real distributions, offline) into a directory that is put on sys.path; and scripted policies
that play them."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "verifiers_envs"
PACKAGES = ("vf_reverse_words", "vf_nim", "vf_tool_math")


def install(target: Path) -> Path:
    """pip-install every fixture package into `target` and make them importable."""
    paths = [str(FIXTURES / name) for name in PACKAGES]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--no-build-isolation", "--target", str(target), *paths],
        check=True, capture_output=True,
    )  # fmt: skip
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    return target


def reverse_policy(messages: list[dict]) -> str:
    """Reverses the sentence, except one of four words, which it gives back unchanged."""
    sentence = messages[-1]["content"].rpartition(": ")[2].split()
    words = sentence if len(sentence) == 4 else sentence[::-1]
    return f"<answer>{' '.join(words)}</answer>"


def nim_policy(messages: list[dict]) -> str:
    """Takes `stones % 4` (a winning move) but makes an illegal move at 10 stones."""
    if messages[-1]["content"] == "Illegal move.":
        return "<take>1</take>"
    stones = int(re.findall(r"(\d+) stones", messages[-1]["content"])[-1])
    if stones == 10:
        return "<take>4</take>"
    return f"<take>{stones % 4 or 1}</take>"


def tool_math_policy(messages: list[dict]) -> str:
    """Multiplies, then adds with the tools, then answers; wrong on purpose when c is 9."""
    question = next(m["content"] for m in messages if m["role"] == "user")
    a, b, c = map(int, re.findall(r"\d+", question)[:3])
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        return _call("multiply", a=a, b=b)
    if len(results) == 1:
        return _call("add", a=int(results[0]), b=c)
    return f"<answer>{int(results[1]) + (1 if c == 9 else 0)}</answer>"


def _call(name: str, **arguments: int) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


POLICIES = {"vf_reverse_words": reverse_policy, "vf_nim": nim_policy,
            "vf_tool_math": tool_math_policy}  # fmt: skip
