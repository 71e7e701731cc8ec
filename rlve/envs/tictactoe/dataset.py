"""The tic-tac-toe games' dataset rows, and what each of a game's messages shows.

A row is one game: its seed, who starts, the scripted opponent's strength (stratified over the
dataset) and its first prompt. Under `hint_levels` a game's messages show the threats line with
a probability that the curriculum's level sets (`hint_probability`), drawn per board
(`turn_wording`) so that a group's games on the same board read the same message.
"""

from __future__ import annotations

import random
from typing import Any

from rlve.curriculum.stratified import stratified_probabilities
from rlve.envs.tictactoe.game import (
    EMPTY_BOARD,
    O_MARK,
    Board,
    board_key,
    opponent_move,
    opponent_rng,
    place,
)
from rlve.envs.tictactoe.prompts import GRID, THREATS, Wording
from rlve.envs.tictactoe.self_play import plays_self


def hint_probability(difficulty: int, levels: int) -> float:
    """How often the threats line is shown at curriculum level `difficulty` of `levels`: always
    at 0, falling in equal steps, never from `levels` on (the plain grid board)."""
    return max(0.0, 1.0 - difficulty / levels)


def turn_wording(wording: Wording, info: dict[str, Any], board: Board) -> Wording:
    """The wording of a game's message on `board`: `wording`, or, in a game with a hint
    probability p (`info["hint_prob"]`), the threats board's with probability p, the draw seeded
    by the game and the board."""
    hint_prob = info.get("hint_prob", 0.0)
    if hint_prob <= 0:
        return wording
    draw = random.Random(f"hint_{info['example_seed']}_{board_key(board)}").random()
    return THREATS if draw < hint_prob else GRID


def example_row(
    example_seed: int, random_move_prob: float, self_play: bool = False, wording: Wording = GRID,
    hint_prob: float = 0.0,
) -> dict:  # fmt: skip
    """One game: who starts (from the seed), the opponent's opening if it starts, the prompt.
    In a self-play game that O opens, the prompt is made once O (the policy) has played, in the
    episode's `setup_state`; the row's says so. With `hint_prob` > 0 (on the grid wording) each
    message shows the threats line with that probability (`turn_wording`)."""
    opponent_starts = random.Random(example_seed).random() < 0.5
    board = EMPTY_BOARD
    if opponent_starts and self_play:
        status = wording.opponent_moves_first
    elif opponent_starts:
        cell = opponent_move(board, random_move_prob, opponent_rng(example_seed, board))
        board = place(board, cell, O_MARK)
        status = wording.opening_status(cell)
    else:
        status = wording.opening_status(None)
    info = {
        "random_move_prob": random_move_prob,
        "example_seed": example_seed,
        "opponent_starts": opponent_starts,
        "opponent": "self" if self_play else "scripted",
    }
    if hint_prob > 0:
        info["hint_prob"] = hint_prob
        wording = turn_wording(wording, info, board)
    return {"question": wording.turn_message(board, status), "info": info}


def example_rows(
    num_examples: int, seed: int, min_random_move_prob: float, max_random_move_prob: float,
    num_groups: int, opponent: str = "scripted", scripted_fraction: float = 0.0,
    wording: Wording = GRID,
) -> list[dict[str, Any]]:  # fmt: skip
    """The dataset: per example a seed, who starts, who plays O and how strong the scripted
    opponent is, the first prompt."""
    probs = stratified_probabilities(
        num_examples, min_random_move_prob, max_random_move_prob, num_groups, random.Random(seed)
    )
    rows = []
    for i, prob in enumerate(probs):
        self_play = opponent == "self" and plays_self(i, scripted_fraction)
        rows.append(example_row(seed * 1_000_003 + i, prob, self_play, wording))
    return rows
