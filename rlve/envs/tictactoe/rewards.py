"""The tic-tac-toe rubric's reward functions, read from a game's final state or its messages: the
result, the share of well-formed answers, the invalid-move penalty, mistakes and regret."""

from __future__ import annotations

from rlve.envs.base import State
from rlve.envs.parsers import assistant_texts
from rlve.envs.tictactoe.game import MISTAKE_KINDS, format_ok
from rlve.types import Message

INVALID_MOVE_PENALTY = -0.1
FORMAT_WEIGHT = 0.2
"""the rubric's weight of the share of well-formed answers"""


def win_reward(state: State) -> float:
    """1 for a win, 0.5 for a draw, 0 for a loss or an unfinished game."""
    return {"win": 1.0, "draw": 0.5}.get(state.get("result"), 0.0)


def format_reward(completion: list[Message]) -> float:
    """Share of the model's messages shaped `<think>...</think> ... <move>...</move>`."""
    texts = assistant_texts(completion)
    return sum(format_ok(t) for t in texts) / len(texts) if texts else 0.0


def threats_reward(state: State) -> float:
    """Share of the answers whose think block states the threats of the position they answered,
    counting only positions with a threat (`threats.states_threats_right`; weighted by
    `threats_weight` in the rubric)."""
    stated = state.get("answer_threat_found", [])
    return sum(stated) / len(stated) if stated else 0.0


def invalid_move_penalty(state: State) -> float:
    """A flat -0.1 when any move of the game was invalid."""
    return INVALID_MOVE_PENALTY if state.get("invalid_moves", 0) > 0 else 0.0


def invalid_moves_penalty(state: State) -> float:
    """-0.1 for each invalid move of the game (invalid_penalty="per_move")."""
    return INVALID_MOVE_PENALTY * state.get("invalid_moves", 0)


INVALID_PENALTIES = {"flat": invalid_move_penalty, "per_move": invalid_moves_penalty}


def mistake_count(state: State) -> int:
    """The mistakes of the player whose state this is, of every kind."""
    return sum(state.get(kind, 0) for kind in MISTAKE_KINDS)


def mistakes(state: State) -> float:
    """Minus the number of mistakes of the game, each answer without a move counted as the
    mistakes losing from its position would be (weighted by `mistake_penalty` in the rubric)."""
    return -float(mistake_count(state) + state.get("dodged", 0))


def regrets(state: State) -> float:
    """Minus the result levels the game's moves gave up under best play, answers without a move
    priced as losing from their position (weighted by `regret_penalty` in the rubric)."""
    return -float(state.get("regret", 0) + state.get("dodged", 0))
