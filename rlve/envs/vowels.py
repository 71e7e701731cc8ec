"""Vowels: the smoke task, where any policy can climb its reward within a few steps.

One turn. The prompt asks for a few words; the reward is the share of vowels among the letters
of the answer (0 when it has no letter). A randomly initialised model answers with vowel shares
that differ from rollout to rollout, so every group carries a signal, and the policy gradient
only has to move the model towards vowel-heavy tokens: the embedded tiny model climbs it in a
dozen steps (`make smoke`). It says that the loop learns, nothing about language: its optimum
is "aaaa", which is honest play here, not a cheat.
"""

from __future__ import annotations

from rlve.envs.base import SingleTurnEnv, build_dataset, require_int
from rlve.envs.rubric import Rubric
from rlve.types import Message

VOWELS = frozenset("aeiouAEIOU")


def vowel_share(completion: list[Message]) -> float:
    """Vowels (a, e, i, o, u) among all the letters of the last message, of any script (0.0
    when it has none)."""
    text = str(completion[-1].get("content") or "") if completion else ""
    letters = [c for c in text if c.isalpha()]
    return sum(c in VOWELS for c in letters) / len(letters) if letters else 0.0


def load_environment(num_examples: int = 64) -> SingleTurnEnv:
    """`num_examples` prompts "Write a few words (i)."; reward: `vowel_share`."""
    require_int("num_examples", num_examples, minimum=1)
    rows = [{"question": f"Write a few words ({i})."} for i in range(num_examples)]
    return SingleTurnEnv(build_dataset(rows), rubric=Rubric().add(vowel_share, 1.0), name="vowels")
