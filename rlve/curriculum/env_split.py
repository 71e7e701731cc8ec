"""A held-out split of environments and nested training collections, fixed by a rule.

RLVE's environment-scaling claim (Zeng et al. 2025) trains on nested collections of 1, 4, 16 and
256 environments and tests on environments held out of every one. Here the split is a pure
function of the pool and two seeds: within each family (the name's prefix, e.g. `rlve-gym/`),
the names are sorted, shuffled with `seed`, and every `every`-th is held out, so every family
that has enough environments gives some; the rest are shuffled together with `seed + 1`, and
the collection of size n is their first n, so C1 is in C4 is in C16 is in C64.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvSplit:
    """Which environments are held out, and which each training collection holds."""

    held_out: list[str]
    """never trained on, by any arm, nor in any warm-up data"""
    training_order: list[str]
    """the other environments of the pool; a collection of size n is the first n"""

    def collection(self, size: int) -> list[str]:
        """The first `size` training environments (ValueError when the pool has fewer)."""
        if not 1 <= size <= len(self.training_order):
            raise ValueError(
                f"a collection of {size} environments needs 1 to {len(self.training_order)}, "
                f"the training environments the pool has"
            )
        return self.training_order[:size]

    def sizes(self, wanted: Sequence[int]) -> list[int]:
        """The sizes of `wanted` that the pool can fill."""
        return [n for n in wanted if 1 <= n <= len(self.training_order)]


def family(name: str) -> str:
    """The family of an environment name: what comes before its last '/' ('' without one)."""
    return name.rpartition("/")[0]


def split_environments(pool: Iterable[str], *, seed: int, every: int) -> EnvSplit:
    """The split of `pool` (see the module docstring); the order of `pool` does not matter."""
    if every < 2:
        raise ValueError(f"every must be >= 2 (1 would hold out everything), got {every}")
    names = sorted(set(pool))
    by_family: dict[str, list[str]] = {}
    for name in names:
        by_family.setdefault(family(name), []).append(name)
    held_out, rest = [], []
    for key in sorted(by_family):
        shuffled = list(by_family[key])
        random.Random(f"{seed}:{key}").shuffle(shuffled)
        held_out += shuffled[::every]
        rest += [name for i, name in enumerate(shuffled) if i % every]
    rest.sort()
    random.Random(seed + 1).shuffle(rest)
    return EnvSplit(held_out=sorted(held_out), training_order=rest)
