"""The threats of a position (the cells where X or O would complete three) and the threats an
answer states in its think block, in the words of the threats board's line (`prompts.open_lines`):
"X can win at 2. O can win at 5 or 8." or "No line has two of a mark."

The game knows every threat of every position, so a statement can be checked exactly: it is
right when it names, for each mark, the set of its winning cells and nothing else.
"""

from __future__ import annotations

import re

from rlve.envs.tictactoe.game import O_MARK, X_MARK, Board, free_cells, place, think_text, winner

Threats = dict[str, frozenset[int]]
"""mark -> the free cells where that mark would complete three"""

NO_THREATS = "No line has two of a mark."

# One digit, then " or " and a digit any number of times: no nested repetition, so each match
# attempt is linear and `finditer` scans the text once.
_CAN_WIN = re.compile(r"\b([XO]) can win at ([0-8](?: or [0-8])*)\.")


def threat_cells(board: Board) -> Threats:
    """The cells where each mark would complete three with its next mark (empty sets allowed)."""
    return {
        mark: frozenset(c for c in free_cells(board) if winner(place(board, c, mark)) == mark)
        for mark in (X_MARK, O_MARK)
    }


def stated_threats(answer: str) -> Threats | None:
    """The threats an answer's think block states, or None when it states none or contradicts
    itself: no statement at all, "No line has two of a mark." beside a "can win" sentence, or
    two "can win" sentences for one mark (hedging across sentences is not a statement)."""
    text = think_text(answer)
    if text is None:
        return None
    stated: dict[str, frozenset[int]] = {}
    for match in _CAN_WIN.finditer(text):
        mark = match.group(1)
        if mark in stated:
            return None
        stated[mark] = frozenset(int(c) for c in match.group(2).split(" or "))
    says_none = NO_THREATS in text
    if says_none == bool(stated):  # both, or neither
        return None
    return {mark: stated.get(mark, frozenset()) for mark in (X_MARK, O_MARK)}


def has_threats(board: Board) -> bool:
    """Whether either mark could complete three with its next mark."""
    return any(threat_cells(board).values())


def states_threats_right(answer: str, board: Board) -> bool:
    """Whether the answer's think block states exactly the threats of `board`, the position it
    answered."""
    return stated_threats(answer) == threat_cells(board)
