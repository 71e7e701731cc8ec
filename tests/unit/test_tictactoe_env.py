import asyncio

import pytest

import rlve
from rlve.envs.tictactoe import minimax_policy, noisy_minimax_policy, random_policy
from rlve.envs.tictactoe.game import MISTAKE_KINDS, parse_board
from rlve.rollout import ScriptedEngine


def tictactoe(prob_low, prob_high=None, **kwargs):
    prob_high = prob_low if prob_high is None else prob_high
    return rlve.load_environment(
        "tictactoe", min_random_move_prob=prob_low, max_random_move_prob=prob_high, **kwargs
    )


def hello(messages):
    return "hello"


def first_free_cell(messages):
    board = parse_board(messages[-1]["content"])
    return f"<think>first free</think><move>{board.index(' ')}</move>"


@pytest.mark.parametrize(
    ("policy", "opponent", "expect"),
    [
        (minimax_policy, 0.0, {"game/draw": 1.0, "game/invalid": 0.0, "reward/mean": 0.7}),
        (minimax_policy, 1.0, {"game/loss": 0.0, "game/invalid": 0.0}),
        (random_policy, 0.0, {"game/win": 0.0}),
        (hello, 0.0, {"reward/mean": -0.1, "reward/std": 0.0, "stop/max_turns_reached": 1.0}),
    ],
)
def test_baselines_over_200_games(policy, opponent, expect):
    env = tictactoe(opponent, num_examples=200)
    summary = rlve.evaluate(env, ScriptedEngine(policy), 200, seed=0).summary
    assert {k: summary.get(k) for k in expect} == pytest.approx(expect, abs=1e-12)


def test_minimax_beats_a_random_opponent_most_of_the_time():
    summary = rlve.evaluate(tictactoe(1.0), ScriptedEngine(minimax_policy), 200).summary
    # measured: 94% wins, 6% draws (seed 0); a perfect player never loses
    assert summary["game/win"] > 0.85 and summary["game/loss"] == 0.0


def test_two_evaluations_with_the_same_seed_are_identical():
    env = tictactoe(0.2, 0.7, num_groups=4)
    runs = [rlve.evaluate(env, ScriptedEngine(random_policy), 20, 4, seed=3) for _ in range(2)]
    assert runs[0].summary == runs[1].summary
    flat = [[t.completion for g in r.groups for t in g.trajectories] for r in runs]
    assert flat[0] == flat[1]
    other = rlve.evaluate(env, ScriptedEngine(random_policy), 20, 4, seed=4)
    assert [t.completion for g in other.groups for t in g.trajectories] != flat[0]


def test_equal_positions_get_equal_replies_within_a_group():
    # A purely random opponent and a deterministic player: every rollout of an example reaches the
    # same positions, so the seeded opponent must answer identically and the games coincide.
    env = tictactoe(1.0, num_examples=10)
    result = rlve.evaluate(env, ScriptedEngine(first_free_cell), 10, rollouts_per_example=8)
    games = []
    for group in result.groups:
        completions = [t.completion for t in group.trajectories]
        assert all(c == completions[0] for c in completions)
        games.append(completions[0])
    assert len({str(g) for g in games}) > 1  # different examples, different opponents


def test_who_starts_is_decided_per_example_about_half_each():
    env = tictactoe(0.0, num_examples=200)
    starts = [env.example(i).info["opponent_starts"] for i in range(200)]
    assert 80 <= sum(starts) <= 120
    for i in range(20):
        example = env.example(i)
        board = parse_board(example.prompt[-1]["content"])
        assert board.count("O") == int(example.info["opponent_starts"]) and board.count("X") == 0


def test_random_move_probability_is_stratified_over_buckets():
    env = tictactoe(0.2, 0.6, num_examples=40, num_groups=4)
    for i in range(40):
        prob = env.example(i).info["random_move_prob"]
        low = 0.2 + (i % 4) * 0.1
        assert low <= prob <= low + 0.1


def test_dataset_depends_only_on_its_seed():
    a = tictactoe(0.2, 0.7, num_examples=5, seed=1)
    b = tictactoe(0.2, 0.7, num_examples=5, seed=1)
    c = tictactoe(0.2, 0.7, num_examples=5, seed=2)
    assert a.dataset.to_list() == b.dataset.to_list() != c.dataset.to_list()


def test_invalid_move_is_explained_and_the_game_goes_on():
    env = tictactoe(0.0, num_examples=50)
    index = next(i for i in range(50) if env.example(i).info["opponent_starts"])
    board = parse_board(env.example(index).prompt[-1]["content"])
    taken = board.index("O")
    answers = iter([f"<move>{taken}</move>", "<move>9</move>", "no move here"])

    def policy(messages):
        return next(answers, None) or minimax_policy(messages)

    env.dataset = env.dataset.select([index])
    env._examples = None
    (group,) = rlve.evaluate(env, ScriptedEngine(policy), 1).groups
    t = group.trajectories[0]
    replies = [m["content"] for m in t.completion if m["role"] == "user"]
    assert replies[0].startswith(f"Invalid move: cell {taken} is already taken by O.")
    assert replies[1].startswith("Invalid move: cell 9 is out of range")
    assert replies[2].startswith("Invalid move: no move found")
    assert t.metrics["game/invalid"] == 1.0 and t.metrics["game/invalid_moves"] == 3.0
    # a draw after three invalid answers: 0.5 + 0.2 * (format share) - 0.1
    share = t.metrics["game/format"]
    assert t.reward == pytest.approx(0.5 + 0.2 * share - 0.1)
    assert t.metrics["game/draw"] == 1.0


def test_a_clean_win_scores_the_maximum_1_2():
    env = tictactoe(1.0, num_examples=200)
    result = rlve.evaluate(env, ScriptedEngine(minimax_policy), 200)
    wins = [t for g in result.groups for t in g.trajectories if t.metrics["game/win"] == 1.0]
    assert wins and all(t.reward == pytest.approx(1.2) for t in wins)
    assert all(t.stop_reason == "game_over" for t in wins)
    assert wins[0].completion[-1]["content"].startswith("You win!")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_random_move_prob": 0.8, "max_random_move_prob": 0.2}, "min_random_move_prob"),
        ({"min_random_move_prob": -0.1}, r"min_random_move_prob must be a probability in \[0, 1\]"),
        ({"max_random_move_prob": 1.5}, r"max_random_move_prob must be a probability in \[0, 1\]"),
        ({"num_groups": 0}, "num_groups must be an integer >= 1, got 0"),
        ({"max_turns": 0}, "max_turns must be an integer >= 1"),
        ({"rules": "brief"}, r"rules must be one of \['full', 'short'\], got 'brief'"),
    ],
)
def test_bad_arguments_name_the_argument_and_the_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        rlve.load_environment("tictactoe", **kwargs)


def test_the_short_rules_play_the_same_game_with_another_system_prompt():
    games = {}
    for rules in ("full", "short"):
        env = rlve.load_environment("tictactoe", num_examples=20, seed=3, rules=rules)
        result = rlve.evaluate(env, ScriptedEngine(minimax_policy), 20, seed=0)
        games[rules] = [t for g in result.groups for t in g.trajectories]
    full, short = games["full"], games["short"]
    assert short[0].prompt[0]["content"] != full[0].prompt[0]["content"]
    assert [t.completion for t in short] == [t.completion for t in full]


def teacher_games_by_board(tokenizer, boards) -> dict[str, list]:
    """The recipe's teacher (noisy minimax, short rules) over 20 seeded games under each board."""
    from rlve.rollout.chat_tokens import end_of_turn_id

    games = {}
    for board in boards:
        env = rlve.load_environment(
            "tictactoe", num_examples=20, seed=1, rules="short", board=board
        )
        teacher = noisy_minimax_policy(0.5)
        engine = ScriptedEngine(teacher, tokenizer, end_of_turn_id(tokenizer))
        result = rlve.evaluate(env, engine, 20, seed=0)
        games[board] = [t for g in result.groups for t in g.trajectories]
    return games


def test_the_compact_board_plays_the_same_games_in_fewer_tokens(tiny_tokenizer):
    """The same moves, rewards and outcomes under either board; only the words differ."""
    games = teacher_games_by_board(tiny_tokenizer, ("grid", "compact"))
    grid, compact = games["grid"], games["compact"]

    def answers(t):
        return [m["content"] for m in t.completion if m["role"] == "assistant"]

    assert [answers(t) for t in compact] == [answers(t) for t in grid]
    assert [(t.reward, t.metrics) for t in compact] == [(t.reward, t.metrics) for t in grid]
    assert {t.metrics["game/loss"] for t in grid} == {0.0, 1.0}  # both outcomes are compared
    assert compact[0].completion[-1]["content"] != grid[0].completion[-1]["content"]
    assert "---------" in grid[0].prompt[-1]["content"]
    assert "---------" not in compact[0].prompt[-1]["content"]
    # measured: 6,088 tokens against 8,745 (70%; SmolLM2's tokenizer, 100 games: 320 against 452)
    assert sum(len(t.token_ids) for t in compact) < 0.75 * sum(len(t.token_ids) for t in grid)


def test_the_threats_board_names_every_open_line_and_changes_no_game(tiny_tokenizer):
    from rlve.envs.tictactoe.game import board_from_string, parse_board
    from rlve.envs.tictactoe.prompts import open_lines

    games = teacher_games_by_board(tiny_tokenizer, ("grid", "threats"))
    grid, threats = games["grid"], games["threats"]
    assert [(t.reward, t.metrics) for t in threats] == [(t.reward, t.metrics) for t in grid]
    asks = [m["content"] for t in threats for m in [*t.prompt, *t.completion]
            if m["role"] == "user" and m["content"].endswith("Your turn.")]  # fmt: skip
    assert all(open_lines(parse_board(text)) in text for text in asks)
    assert sum("can win at" in text for text in asks) > 0  # the games do reach threats
    assert open_lines(board_from_string("XX OO    ")) == "X can win at 2. O can win at 5."
    assert open_lines(board_from_string("O X O X  ")) == "O can win at 8."  # two lines, one cell
    assert open_lines(board_from_string("OO  X  X ")) == "O can win at 2."  # O holds 1 of 1-4-7
    assert open_lines(board_from_string("O O X  X ")) == "X can win at 1. O can win at 1."
    assert open_lines(board_from_string("X   O    ")) == "No line has two of a mark."
    assert open_lines(board_from_string("XX  OXO O")) == "X can win at 2. O can win at 2 or 7."


def test_an_unknown_board_is_refused():
    with pytest.raises(
        ValueError, match=r"board must be one of \['compact', 'grid', 'threats'\], got 'x'"
    ):
        rlve.load_environment("tictactoe", board="x")


def test_opening_board_of_the_prompt_matches_the_state_replay():
    env = tictactoe(0.5, num_examples=30)
    for i in range(30):
        example = env.example(i)
        state = env.initial_state(example)
        asyncio.run(env.setup_state(state))
        assert state["board"] == parse_board(example.prompt[-1]["content"])


def test_curriculum_difficulty_lowers_the_random_move_probability_step_by_step():
    env = tictactoe(0.2, 0.7, num_examples=4)
    probs = [
        env.make_example(seed=7, difficulty=d).info["random_move_prob"] for d in (0, 3, 10, 12)
    ]
    assert probs == pytest.approx([1.0, 0.7, 0.0, 0.0])
    example = env.make_example(seed=7, difficulty=3)
    assert example.info["difficulty"] == 3 and example.prompt[0]["role"] == "system"
    assert example.prompt == env.make_example(seed=7, difficulty=3).prompt  # seeded
    with pytest.raises(ValueError, match="difficulty must be >= 0"):
        env.make_example(seed=1, difficulty=-1)


def test_curriculum_driven_games_play_like_dataset_games():
    from rlve.rollout import GroupJob, play_groups

    env = tictactoe(0.0, num_examples=1)
    jobs = [GroupJob(env, env.make_example(seed=s, difficulty=10), s) for s in range(20)]
    groups = asyncio.run(play_groups(ScriptedEngine(minimax_policy), jobs, 1))
    # difficulty 10 is a perfect opponent: minimax draws every game
    assert all(g.trajectories[0].metrics["game/draw"] == 1.0 for g in groups)
    assert all(g.difficulty == 10 and env.accuracy(g.trajectories[0]) == 1.0 for g in groups)


def test_the_per_move_invalid_penalty_counts_every_invalid_move():
    from rlve.envs.tictactoe.rewards import invalid_move_penalty, invalid_moves_penalty

    state = {"invalid_moves": 3}
    assert invalid_move_penalty(state) == pytest.approx(-0.1)
    assert invalid_moves_penalty(state) == pytest.approx(-0.3)
    assert invalid_moves_penalty({"invalid_moves": 0}) == 0.0
    with pytest.raises(ValueError, match="invalid_penalty must be one of"):
        rlve.load_environment("tictactoe", invalid_penalty="sometimes")


def test_mistakes_are_counted_and_their_penalty_credited_to_the_move_that_made_them():
    """The empty board is a draw with best play, and O's moves cannot worsen X's result: a game
    X loses holds at least one mistake of X; minimax never makes one."""
    env = tictactoe(0.0, num_examples=20, mistake_penalty=0.25)
    games = rlve.evaluate(env, ScriptedEngine(first_free_cell), 20).groups
    lost = [t for g in games for t in g.trajectories if t.metrics["game/loss"] == 1.0]
    assert lost  # the first free cell loses to the optimal opponent
    for t in (t for g in games for t in g.trajectories):
        count = t.metrics["game/mistakes"]
        assert count >= (t in lost)
        assert t.metrics["reward/mistakes"] == -count
        # every answer is well formed: its turn earns 0.2 / answers, and a mistake costs 0.25
        penalties = [round(r - 0.2 / len(t.turn_rewards), 9) for r in t.turn_rewards]
        assert penalties.count(-0.25) == count  # one move each, no other penalty
        result = t.metrics["game/win"] + 0.5 * t.metrics["game/draw"]
        assert t.reward == pytest.approx(result + 0.2 * 1.0 - 0.25 * count)  # formatted turns
        for kind in MISTAKE_KINDS:  # a mistake is made where it was at stake
            assert t.metrics[f"game/{kind}_chances"] >= t.metrics[f"game/{kind}"]
    optimal = rlve.evaluate(tictactoe(0.3, num_examples=50), ScriptedEngine(minimax_policy), 50)
    assert optimal.summary["game/mistakes"] == 0.0
    assert sum(optimal.summary[f"game/{kind}_chances"] for kind in MISTAKE_KINDS) > 0


def test_a_negative_mistake_penalty_is_refused():
    with pytest.raises(ValueError, match=r"mistake_penalty must be a finite number >= 0, got -1"):
        tictactoe(0.0, mistake_penalty=-1)
