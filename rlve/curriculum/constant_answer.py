"""Whether one answer given to every problem of an environment is paid: the control's rule.

The environment-scaling experiment compares training on many environments with training on one,
the control (C1). A control where a constant answer is right on many problems teaches a guess:
`rlve-gym/StoneGame` has two answers (`Stan` on 27 of its 48 screened problems), and every C1
seed ended giving one of them to nearly every problem. Chance here is what a constant answer earns
where no two problems share an answer, 1 / problems; the control must be an environment where
the best single answer beats it by at most CONSTANT_ANSWER_MARGIN at every screened level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

CONSTANT_ANSWER_MARGIN = 0.1
"""how far the best single answer's accuracy may exceed chance (1 / problems) at any screened
level for an environment to be the control: 2 of 16 problems pass, 3 of 16 do not"""


@dataclass(frozen=True)
class ConstantAnswer:
    """The best single answer of one environment at one level: one answer given to every
    problem, the best of the answers tried."""

    level: int
    """the difficulty level of the problems"""
    answer: str | None
    """the best answer tried (None: no answer to try, the problems have no reference answer)"""
    right: int
    """problems the verifier counts `answer` right on"""
    problems: int
    """problems at this level"""

    def __post_init__(self) -> None:
        if self.problems < 1 or not 0 <= self.right <= self.problems:
            raise ValueError(
                f"right must lie in 0..problems and problems be >= 1, got right={self.right}, "
                f"problems={self.problems}"
            )

    @property
    def accuracy(self) -> float:
        return self.right / self.problems

    @property
    def chance(self) -> float:
        """What a constant answer earns where no two problems share an answer."""
        return 1 / self.problems

    @property
    def excess(self) -> float:
        return self.accuracy - self.chance


def best_single_answer(level: int, outcomes: Mapping[str, Sequence[float]]) -> ConstantAnswer:
    """The answer of `outcomes` (answer -> its accuracy, 0 or 1, on each problem of the level, in
    the same order) right on the most problems; ties go to the first answer in sorted order."""
    if not outcomes:
        raise ValueError(f"no answer was tried at level {level}")
    sizes = {len(values) for values in outcomes.values()}
    if len(sizes) != 1:
        raise ValueError(f"every answer must be tried on the same problems, got sizes {sizes}")
    answer = max(sorted(outcomes), key=lambda a: sum(outcomes[a]))
    return ConstantAnswer(level, answer, round(sum(outcomes[answer])), sizes.pop())


def passes(marks: Sequence[ConstantAnswer], margin: float = CONSTANT_ANSWER_MARGIN) -> bool:
    """True when a best single answer was found at every level and none beats chance by more
    than `margin`. An environment without reference answers has no answer to try: it is not
    shown to pass."""
    if not 0 <= margin < 1:
        raise ValueError(f"margin must lie in [0, 1), got {margin}")
    if not marks:
        return False
    return all(m.answer is not None and m.excess <= margin for m in marks)
