"""Hints that fade: the threats line as the tic-tac-toe curriculum's difficulty, shown at every
turn at level 0, at fewer turns as the level rises, and never at the top level (the plain grid
board, which is also what the dataset's own games, an evaluation, show)."""

import asyncio

import pytest

import rlve
from rlve.curriculum.controller import DifficultyController
from rlve.envs.tictactoe import minimax_policy, noisy_minimax_policy
from rlve.envs.tictactoe.env import hint_probability
from rlve.envs.tictactoe.prompts import GRID, THREATS
from rlve.inference.engine import SamplingConfig
from rlve.rollout import ScriptedEngine
from rlve.rollout.episode import play_episode
from rlve.rollout.problems import ProblemSampler
from rlve.rollout.turns import EpisodeSettings

LEVELS = 4
THREATS_LINE = ("can win at", "No line has two of a mark.")


def hinted_env(**kwargs):
    return rlve.load_environment("tictactoe", hint_levels=LEVELS, rules="short", **kwargs)


def play(env, example, seed=0):
    engine = ScriptedEngine(lambda messages: minimax_policy(messages))  # the lowest best cell
    trajectory, _ = asyncio.run(
        play_episode(env, engine, example, SamplingConfig(), EpisodeSettings(), seed)
    )
    return trajectory


def board_messages(trajectory) -> list[str]:
    """The user messages that ask for a move (the final one only shows the board)."""
    users = [m["content"] for m in trajectory.prompt + trajectory.completion if m["role"] == "user"]
    return [u for u in users if u.endswith("Your turn.")]


def shows_line(message: str) -> bool:
    return any(words in message for words in THREATS_LINE)


def test_the_hint_falls_in_equal_steps_to_never():
    assert [hint_probability(d, LEVELS) for d in range(6)] == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]


def test_level_0_shows_the_line_at_every_turn_and_the_top_level_never():
    env = hinted_env()
    for seed in range(20):
        always = play(env, env.make_example(seed, 0))
        assert always.prompt[0]["content"] == THREATS.system_prompts["short"]
        assert all(shows_line(m) for m in board_messages(always))
        never = play(env, env.make_example(seed, LEVELS))
        assert never.prompt[0]["content"] == GRID.system_prompts["short"]
        assert not any(shows_line(m) for m in board_messages(never))


def test_a_middle_level_shows_it_at_about_its_share_of_turns_the_same_for_a_whole_group():
    env = hinted_env()
    shown = asked = 0
    for seed in range(60):
        example = env.make_example(seed, 2)  # half the turns
        first, second = play(env, example, seed=1), play(env, example, seed=2)
        assert board_messages(first) == board_messages(second)  # equal positions, equal hints
        shown += sum(map(shows_line, board_messages(first)))
        asked += len(board_messages(first))
    # 60 games, ~200 turns: a binomial(200, 0.5) share lies in 0.35-0.65 with p > 0.9999
    assert 0.35 < shown / asked < 0.65


def test_the_opponent_comes_from_the_random_move_range_and_the_dataset_shows_no_hint():
    env = hinted_env(min_random_move_prob=0.2, max_random_move_prob=0.7, num_examples=30)
    probs = [env.make_example(seed, 0).info["random_move_prob"] for seed in range(200)]
    assert min(probs) >= 0.2 and max(probs) <= 0.7 and max(probs) - min(probs) > 0.4
    for game in rlve.evaluate(env, ScriptedEngine(minimax_policy), 30, 1).groups:
        assert not any(shows_line(m) for m in board_messages(game.trajectories[0]))


def test_the_hint_needs_the_grid_board_and_the_scripted_opponent():
    with pytest.raises(ValueError, match="board='threats'"):
        rlve.load_environment("tictactoe", hint_levels=2, board="threats")
    with pytest.raises(ValueError, match="opponent='self'"):
        rlve.load_environment("tictactoe", hint_levels=2, opponent="self")
    with pytest.raises(ValueError, match="hint_levels"):
        rlve.load_environment("tictactoe", hint_levels=-1)


def test_under_hints_a_game_is_solved_when_no_move_gave_anything_up():
    env = hinted_env(num_examples=40, min_random_move_prob=0.0, max_random_move_prob=1.0)
    best = rlve.evaluate(env, ScriptedEngine(minimax_policy), 40, 1).groups
    assert [env.accuracy(g.trajectories[0]) for g in best] == [1.0] * 40
    noisy = rlve.evaluate(env, ScriptedEngine(noisy_minimax_policy(0.3)), 40, 1).groups
    games = [g.trajectories[0] for g in noisy]
    assert {env.accuracy(t) for t in games} == {0.0, 1.0}
    for game in games:
        assert env.accuracy(game) == float(game.metrics["game/regret"] == 0)


def test_the_controller_raises_the_level_of_a_player_that_does_not_lose():
    """Perfect play never loses: each step of 16 games at the top level moves it up one, until
    the plain board, where it stays."""
    env = hinted_env()
    controller = DifficultyController(tau_acc=0.7, tau_num=16, d_delta=1)
    sampler = ProblemSampler({"tictactoe": env}, controller=controller, seed=0)
    levels = []
    for _ in range(6):
        jobs = sampler.draw(4)
        levels.append(sorted({job.example.info["difficulty"] for job in jobs}))
        groups = [rlve_group(env, job) for job in jobs]
        for group in groups:
            expected = hint_probability(group.difficulty, LEVELS)
            assert {t.metrics["game/hint_prob"] for t in group.trajectories} == {expected}
        sampler.observe(groups)
    assert levels == [[0], [1], [2], [3], [4], [5]]


def rlve_group(env, job):
    from rlve.rollout.runner import play_group

    limit = asyncio.Semaphore(4)
    engine = ScriptedEngine(minimax_policy)
    return asyncio.run(play_group(engine, job, 4, EpisodeSettings(), limit))
