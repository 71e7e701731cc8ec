"""Credit for each move from the game's own verifier: a move's regret under minimax, and the
price of an answer that plays no move, which must never make stalling pay."""

import itertools

import pytest

import rlve
from rlve.envs.tictactoe import minimax_policy
from rlve.envs.tictactoe.game import (
    EMPTY_BOARD,
    O_MARK,
    X_MARK,
    board_from_string,
    dodge_regret,
    free_cells,
    is_over,
    move_regret,
    opponent_move,
    opponent_rng,
    parse_board,
    place,
    winner,
)
from rlve.envs.tictactoe.rewards import INVALID_MOVE_PENALTY
from rlve.rollout import ScriptedEngine

DODGE = "<think>stall</think><move>9</move>"


def tictactoe(**kwargs):
    return rlve.load_environment("tictactoe", invalid_penalty="per_move", **kwargs)


def test_regret_counts_the_results_a_move_gives_up():
    # X to move with XX on the top row and OO in the middle: 2 wins; 5 blocks and draws; any
    # other cell lets O win. An answer without a move is priced as losing: 1 + 1.
    board = board_from_string("XX OO    ")
    assert {c: move_regret(board, c, X_MARK) for c in free_cells(board)} == {
        2: 0, 5: 1, 6: 2, 7: 2, 8: 2,
    }  # fmt: skip
    assert dodge_regret(board, X_MARK) == 2
    # O in the centre: the corners keep the draw, an edge loses it
    board = board_from_string("    O    ")
    assert [c for c in free_cells(board) if move_regret(board, c, X_MARK)] == [1, 3, 5, 7]
    assert dodge_regret(board, X_MARK) == 1
    assert {move_regret(EMPTY_BOARD, c, X_MARK) for c in range(9)} == {0}


def positions_with_x_to_move() -> set:
    """Every board X can face in a game (X or O having opened), the game not over."""
    found, frontier = set(), [(EMPTY_BOARD, X_MARK), (EMPTY_BOARD, O_MARK)]
    while frontier:
        board, mover = frontier.pop()
        if is_over(board) or (board, mover) in found:
            continue
        found.add((board, mover))
        other = O_MARK if mover == X_MARK else X_MARK
        frontier += [(place(board, c, mover), other) for c in free_cells(board)]
    return {board for board, mover in found if mover == X_MARK}


@pytest.mark.parametrize("penalties", [{"mistake_penalty": 1.0}, {"regret_penalty": 0.5}])
def test_in_every_position_an_answer_without_a_move_costs_more_than_any_legal_move(penalties):
    env = tictactoe(**penalties)
    boards = positions_with_x_to_move()
    assert len(boards) > 2000
    for board in boards:
        dodged = {"invalid_moves": 0, "turn": 1}
        env.count_invalid(dodged, board)
        legal = []
        for cell in free_cells(board):
            state = {"turn": 1}
            env.judge_move(state, board, cell)
            legal.append(state.get("turn_rewards", {}).get(0, 0.0))
        # at least the invalid-move penalty below the worst legal move
        assert dodged["turn_rewards"][0] <= min(legal) + INVALID_MOVE_PENALTY + 1e-12, board


def worst_legal_total(board, seed, prob, penalty) -> float:
    """The least any all-legal X earns from `board` (X to move) against the env's seeded
    opponent: the result (1, 0.5, 0) minus `penalty` per result level given up, found by trying
    every sequence of X's moves (the opponent's reply depends only on the seed and the board)."""
    worst = float("inf")
    for cell in free_cells(board):
        cost = penalty * move_regret(board, cell, X_MARK)
        after = place(board, cell, X_MARK)
        if winner(after) == X_MARK or is_over(after):
            worst = min(worst, (1.0 if winner(after) == X_MARK else 0.5) - cost)
            continue
        reply = place(after, opponent_move(after, prob, opponent_rng(seed, after)), O_MARK)
        if winner(reply) == O_MARK or is_over(reply):
            worst = min(worst, (0.0 if winner(reply) == O_MARK else 0.5) - cost)
            continue
        worst = min(worst, worst_legal_total(reply, seed, prob, penalty) - cost)
    return worst


def test_stalling_earns_less_than_the_worst_legal_game_in_every_example():
    """A policy that never plays a legal move (the reward hack that per-move credit without a
    price on stalling invited) against every all-legal policy, game by game: 40 games, an
    opponent from random to perfect."""
    penalty = 0.5
    env = tictactoe(regret_penalty=penalty, num_examples=40, min_random_move_prob=0.0,
                    max_random_move_prob=1.0, num_groups=4)  # fmt: skip
    stalled = rlve.evaluate(env, ScriptedEngine(lambda messages: DODGE), 40, 1, seed=0)
    for group in stalled.groups:
        (game,) = group.trajectories
        info = env.example(group.example_id).info
        board = EMPTY_BOARD
        if info["opponent_starts"]:
            seed, prob = info["example_seed"], info["random_move_prob"]
            board = place(board, opponent_move(board, prob, opponent_rng(seed, board)), O_MARK)
        legal = worst_legal_total(board, info["example_seed"], info["random_move_prob"], penalty)
        assert game.metrics["game/unfinished"] == 1.0  # scored as a loss: 0
        # every answer is formatted (+0.2) in both; the legal games pay no invalid penalty
        assert game.reward - 0.2 < legal, (group.example_id, game.reward, legal)


def test_the_game_s_reward_is_the_sum_of_what_its_turns_earned_and_its_result():
    env = tictactoe(regret_penalty=0.5, mistake_penalty=0.25, num_examples=30,
                    min_random_move_prob=0.5, max_random_move_prob=0.5)  # fmt: skip
    moves = itertools.cycle([DODGE, None, None])  # a dodge, then two legal moves, and again

    def sometimes_stalls(messages):
        last_free = free_cells(parse_board(messages[-1]["content"]))[-1]
        return next(moves) or f"<think>.</think><move>{last_free}</move>"

    games = rlve.evaluate(env, ScriptedEngine(sometimes_stalls), 30, 1, seed=0).groups
    for game in (g.trajectories[0] for g in games):
        m = game.metrics
        result = m["game/win"] + 0.5 * m["game/draw"]
        assert game.reward == pytest.approx(result + sum(game.turn_rewards))
        assert m["reward/regrets"] <= -m["game/regret"]  # the dodges cost on top


def test_each_answer_earns_its_own_part_of_the_format_reward():
    """Every third answer lacks its think block: that answer's turn earns no format credit, and
    each well-formed one 0.2 / answers, so per-turn credit prices a malformed answer where it was
    given (before, the whole format share fell on the game's last move)."""
    env = tictactoe(num_examples=20, min_random_move_prob=0.5, max_random_move_prob=0.5)
    shapes = itertools.cycle([True, True, False])

    def sometimes_malformed(messages):
        cell = free_cells(parse_board(messages[-1]["content"]))[0]
        return f"<think>.</think><move>{cell}</move>" if next(shapes) else f"<move>{cell}</move>"

    games = rlve.evaluate(env, ScriptedEngine(sometimes_malformed), 20, 1, seed=0).groups
    turns_seen = set()
    for game in (g.trajectories[0] for g in games):
        answers = [m["content"] for m in game.completion if m["role"] == "assistant"]
        share = 0.2 / len(answers)
        expected = [share if a.startswith("<think>") else 0.0 for a in answers]
        assert game.turn_rewards == pytest.approx(expected)  # no invalid move, no penalty
        assert sum(game.turn_rewards) == pytest.approx(0.2 * game.metrics["game/format"])
        turns_seen.update(expected)
    assert 0.0 in turns_seen and len(turns_seen) > 2  # malformed answers, games of several lengths


def test_a_game_out_of_turns_credits_each_answer_its_format_once():
    """Six invalid answers, then a legal move at the seventh and last turn: the game stops
    unfinished, and each well-formed answer still earns its part (the invalid ones their penalty
    on top). A game that ends on its last turn is credited once."""
    env = tictactoe(num_examples=6, min_random_move_prob=0.0, max_random_move_prob=0.0)

    def stalls_six_times(messages):
        if sum(m["role"] == "assistant" for m in messages) < 6:
            return DODGE
        return f"<think>.</think><move>{free_cells(parse_board(messages[-1]['content']))[0]}</move>"

    games = rlve.evaluate(env, ScriptedEngine(stalls_six_times), 6, 1, seed=0).groups
    for game in (g.trajectories[0] for g in games):
        assert game.num_turns == 7 and game.metrics["game/invalid_moves"] == 6
        assert game.metrics["game/unfinished"] == 1.0
        assert game.turn_rewards[:6] == pytest.approx([0.2 / 7 + INVALID_MOVE_PENALTY] * 6)
        assert game.turn_rewards[6] == pytest.approx(0.2 / 7)
        assert game.reward == pytest.approx(sum(game.turn_rewards))  # an unfinished game: 0
    env = tictactoe(
        num_examples=20, max_turns=5, min_random_move_prob=0.0, max_random_move_prob=0.0
    )
    games = [
        g.trajectories[0] for g in rlve.evaluate(env, ScriptedEngine(minimax_policy), 20).groups
    ]
    assert any(game.num_turns == 5 for game in games)  # X opened and filled the board
    for game in games:
        assert sum(game.turn_rewards) == pytest.approx(0.2)  # every answer well formed, no mistake
